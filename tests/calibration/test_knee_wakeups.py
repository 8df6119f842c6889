"""Busy costs near the limit with the wake-ups taken out (``KneeDemandCalibrator(knee_wakeups=True)``).

A broker that still sleeps between its publishers' bursts at its limit (the
ZeroMQ proxy under a quota: calibration/README.md, "Wake-ups at the limit")
spends part of its CPU there on wake-ups; the default knee fit charges that
part to every message, so its capacity under a larger quota comes out low.
"""

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.fit import KneeDemandCalibrator
from pubsim.calibration.profile import check_profile
from pubsim.calibration.validate import fit_profiles
from pubsim.sim.errors import ConfigError
from pubsim.sim.units import parse_duration_s
from tests.calibration.test_connection_term import META, TRUE, WIDE, busy, run_row

CAP = 0.1


def runs(floor):
    """Training runs whose wake-ups per message fall with load to ``floor`` (one per burst) near the limit."""
    rows = []
    for name, payload, pubs, subs, fanout in WIDE:
        b = busy(payload, pubs, subs, fanout)
        for frac in (0.02, 0.1, 0.3, 0.5, 0.7, 0.85, 0.92, 0.96):
            wake = max((1.0 - frac) ** 2, floor) if frac < 0.9 else floor
            rate = frac * (CAP - TRUE["background_cpu_fraction"]) / (b + TRUE["idle_wakeup_cost_s"] * floor)
            d = b + TRUE["idle_wakeup_cost_s"] * wake + TRUE["background_cpu_fraction"] / rate
            rows.append(run_row(len(rows), name, payload, pubs, subs, fanout, CAP, rate, d, wake))
    return pd.DataFrame(rows)


def fit(data, **kw):
    return KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True, connection_form="per_message", **kw).fit(
        data
    )


def test_with_wakeups_at_the_limit_the_default_charges_them_to_each_message():
    data = runs(floor=0.05)
    default, taken = fit(data), fit(data, knee_wakeups=True)
    for name, value in TRUE.items():
        assert taken.params_[name] == pytest.approx(value, rel=1e-3), name
    # the default's busy cost of one 64 B message is high by about the wake-ups' share at the limit
    shape = {"payload_bytes": 64, "fanout": 1, "cap": 2 * CAP, "connections": 2}
    truth = (2 * CAP - TRUE["background_cpu_fraction"]) / busy(64, 1, 1, 1)
    assert default.capacity_per_s(**shape) < 0.97 * truth
    assert taken.capacity_per_s(**shape) == pytest.approx(truth, rel=1e-3)


def test_without_wakeups_at_the_limit_both_fits_agree():
    data = runs(floor=0.0)
    default, taken = fit(data), fit(data, knee_wakeups=True)
    for name in TRUE:
        assert taken.params_[name] == pytest.approx(default.params_[name], rel=1e-3, abs=1e-12), name


def test_the_knee_fit_keeps_its_settings():
    cal = KneeDemandCalibrator(knee_wakeups=True)
    assert cal.knee_wakeups is True and not hasattr(cal, "params_")
    assert np.isclose(fit(runs(0.0)).params_["idle_wakeup_cost_s"], TRUE["idle_wakeup_cost_s"], rtol=1e-3)


def test_fit_profiles_passes_the_setting_and_says_so():
    data = runs(floor=0.05)
    prof = check_profile(
        fit_profiles(data, META, n_boot=0, connection_form="per_message", knee_wakeups=True)["mosquitto"]
    )
    broker = prof["broker"]["mosquitto"]
    assert parse_duration_s(broker["ingress_cost_s"]) == pytest.approx(TRUE["ingress_cost_s"], rel=1e-3)
    assert "their measured wake-ups taken out" in broker["provenance"]["note"]
    plain = fit_profiles(data, META, n_boot=0, connection_form="per_message")["mosquitto"]["broker"]["mosquitto"]
    assert "taken out" not in plain["provenance"]["note"]


def test_the_setting_is_refused_with_the_joint_fit():
    with pytest.raises(ConfigError, match="knee_wakeups: True is invalid"):
        fit_profiles(runs(floor=0.05), META, n_boot=0, method="joint", knee_wakeups=True)
