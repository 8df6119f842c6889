"""The cost of a copy that wakes its sleeping reader (``reader_wake_cost_s``, opt-in ``reader_wakes``)."""

import numpy as np
import pytest

from pubsim.calibration.profile import check_profile
from pubsim.calibration.validate import fit_profiles
from tests.calibration.test_connection_term import META, WIDE, synthetic_runs

WAKE_S = 9e-6


def _runs():
    """The connection-term campaign, its readers sleeping at a share that falls with load, each woken
    copy costing WAKE_S more."""
    runs = synthetic_runs(WIDE, np.random.default_rng(5), noise=0.0)
    rank = runs.groupby("config")["rate_per_s"].rank(pct=True)
    runs["subscriber_sleeps_per_copy"] = 1.0 - 0.8 * rank
    runs["subscriber_cpu_per_copy_s"] = 40e-6
    runs["demand_s_per_ingress"] += WAKE_S * runs.fanout * runs.subscriber_sleeps_per_copy
    return runs


def test_asked_for_it_is_fitted_and_the_profile_simulates_it():
    prof = check_profile(fit_profiles(_runs(), META, n_boot=10, connection_form=None, reader_wakes=True)["mosquitto"])
    rw = prof["broker"]["mosquitto"]["reader_wake"]
    assert float(rw["wake_cost_s"].removesuffix("us")) * 1e-6 == pytest.approx(WAKE_S, rel=0.3)
    assert rw["copy_s"] == "40us" and rw["shared_core"] is True
    assert "sleeps per copy" in rw["provenance"]["note"]
    assert prof["fit_terms"]["terms"]["reader_wake_cost_s"]["value"] > 0


def test_by_default_it_is_not_fitted_and_says_so():
    prof = fit_profiles(_runs(), META, n_boot=5, connection_form=None)["mosquitto"]
    assert "reader_wake" not in prof["broker"]["mosquitto"]
    term = prof["fit_terms"]["terms"]["reader_wake_cost_s"]
    assert term["identifiable"] is False and "not asked for" in term["reason"]


def test_the_clients_cores_above_a_limit_come_from_the_lowest_failing_rate():
    import math

    import pandas as pd

    from pubsim.calibration.validate import client_cores_above_limit

    rows = pd.DataFrame(
        {
            "rate_per_s": [80.0, 90.0, 100.0, 100.0, 200.0],
            "sustainable": [True, True, False, False, False],
            "egress_rate_per_s": [8000.0, 9000.0, 9800.0, 10000.0, 11000.0],
            "subscriber_cpu_per_copy_s": [1e-4, 1e-4, 9e-5, 9.5e-5, 8e-5],
        }
    )
    assert client_cores_above_limit(rows, 90.0) == pytest.approx(0.95)  # the subscribers' alone
    both = rows.assign(client_cpu_cores=[0.8, 0.9, 0.97, 0.99, 0.9])
    assert client_cores_above_limit(both, 90.0) == pytest.approx(0.99)
    assert math.isnan(client_cores_above_limit(rows, 200.0))  # nothing failed above
    assert math.isnan(client_cores_above_limit(rows.drop(columns="subscriber_cpu_per_copy_s"), 90.0))
