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
