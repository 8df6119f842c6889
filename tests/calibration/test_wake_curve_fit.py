"""A wake-up priced by the idle before it, fitted (``wake_curve``, opt-in; calibration.wakecurve)."""

import math

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.fit import BrokerDemandCalibrator, KneeDemandCalibrator, wake_idle_of
from pubsim.calibration.profile import check_profile
from pubsim.calibration.validate import fit_profiles
from pubsim.calibration.wakecurve import machine_wake_shape
from pubsim.models.params.idle import WakeCurveParams
from pubsim.sim.errors import ConfigError
from tests.calibration.test_connection_term import META, TRUE, busy, run_row

# a reader's wake-up on the broker core after each pause, as a campaign's meta.json records it
IDLE_S = [2e-4, 1e-3, 5e-3, 2e-2]
WAKE_IDLE_S = [[2e-5, 4e-5, 9e-5, 1.0e-4], [4e-5, 3e-5, 1.1e-4, 1.0e-4], [3e-5, 6e-5, 1.0e-4, 1.0e-4]]
FULL_S, WORK_SHARE = 150e-6, 0.3
SHAPES = [("p64-f1", 64, 1, 1, 1), ("p64-f4", 64, 1, 4, 4), ("p64-f16", 64, 1, 16, 16)]


def _meta():
    facts = {
        f"mosquitto/{name}": {"idle_exit": {"idle_s": IDLE_S, "exit_s": [0.0] * 4, "wake_idle_s": w, "date": "d"}}
        for (name, *_), w in zip(SHAPES, WAKE_IDLE_S, strict=True)
    }
    return {**META, "pair_facts": facts}


def test_the_machine_shape_is_the_pairs_median_made_monotone_and_normalised():
    shape = machine_wake_shape(_meta())
    # medians per pause: 3e-5, 4e-5, 1e-4, 1e-4: non-decreasing already; over 1e-4
    assert shape["share"] == (0.3, 0.4, 1.0, 1.0)
    assert shape["idle_s"] == tuple(IDLE_S)
    assert "median of 3 curves" in shape["where"]
    one = {**META, "idle_exit": {"idle_s": IDLE_S, "exit_s": [0.0] * 4, "wake_idle_s": [5e-5, 4e-5, 8e-5, 1e-4]}}
    assert machine_wake_shape(one)["share"] == (0.5, 0.5, 0.8, 1.0)  # the running maximum
    assert machine_wake_shape(META) is None
    assert machine_wake_shape({**META, "idle_exit": {"idle_s": IDLE_S, "exit_s": [0.0] * 4}}) is None


def test_idle_per_wake_up_by_hand():
    m = pd.DataFrame({"ingress_rate_per_s": [100.0, 100.0, 1000.0], "demand_s_per_ingress": [1e-3, 1e-3, 1e-3]})
    idle = wake_idle_of(m, np.array([0.5, 0.0, 1.0]))
    assert idle[0] == pytest.approx(0.9 / 50)  # 0.9 s idle a second, 50 wake-ups
    assert math.isnan(idle[1])
    assert idle[2] == 0.0  # a core busy all the time never idles


def _runs(share_at, full_s=FULL_S, work_share=WORK_SHARE, truth=TRUE, cap=0.5):
    """Sustainable runs whose wake-ups cost ``share(idle) x (full_s + work_share x busy)`` with the idle
    per wake-up of :func:`wake_idle_of` (solved with the demand it depends on)."""
    rows = []
    for name, payload, pubs, subs, fanout in SHAPES:
        b = busy(payload, pubs, subs, fanout, truth)
        limit = (cap - truth["background_cpu_fraction"]) / b
        for frac in (0.01, 0.05, 0.2, 0.4, 0.6, 0.8, 0.92, 0.96):
            rate = frac * limit
            wake = (1.0 - frac) ** 2 if frac < 0.9 else 0.0
            d = b
            for _ in range(200):  # the idle per wake-up depends on the demand it sets
                idle = (1 - rate * d) / (rate * wake) if wake else 0.0
                d = b + wake * share_at(idle) * (full_s + work_share * b) + truth["background_cpu_fraction"] / rate
            rows.append(run_row(len(rows), name, payload, pubs, subs, fanout, cap, rate, d, wake))
    return pd.DataFrame(rows)


def _curve():
    shape = machine_wake_shape(_meta())
    return shape["idle_s"], shape["share"]


def _share_at(idle):
    return float(WakeCurveParams(idle_s=_curve()[0], share=_curve()[1]).share_at(idle))


def test_knee_fit_recovers_the_full_wake_up_and_its_work_share():
    runs = _runs(_share_at)
    cal = KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True, wake_curve=_curve(), fit_wake_work=True)
    cal.fit(runs)
    assert cal.params_["idle_wakeup_cost_s"] == pytest.approx(FULL_S, rel=1e-6)
    assert cal.params_["wake_work_share"] == pytest.approx(WORK_SHARE, rel=1e-6)
    assert cal.params_["background_cpu_fraction"] == pytest.approx(TRUE["background_cpu_fraction"], rel=1e-6)
    assert cal.predict(runs) == pytest.approx(runs.demand_s_per_ingress.to_numpy(), rel=1e-9)
    # the same cost whatever the idle cannot follow it
    flat = KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True).fit(runs)
    rel = np.abs(flat.residuals_.to_numpy() / runs.demand_s_per_ingress.to_numpy())
    assert rel.max() > 0.1


def test_settings_that_cannot_fit_the_work_share_are_refused():
    with pytest.raises(ConfigError, match="fit_wake_work"):
        KneeDemandCalibrator(fit_wake_work=True)  # no curve to scale
    with pytest.raises(ConfigError, match="knee fit"):
        BrokerDemandCalibrator(wake_curve=_curve(), fit_wake_work=True)  # no busy costs first


def test_profile_carries_the_curve_with_its_provenance_and_terms():
    prof = fit_profiles(
        _runs(_share_at), _meta(), n_boot=10, connection_form=None, wake_curve=True, wake_work=True, idle_exit_on=False
    )["mosquitto"]
    check_profile(prof)
    broker = prof["broker"]["mosquitto"]
    wc = broker["wake_curve"]
    assert wc["share"] == [0.3, 0.4, 1.0, 1.0] and wc["idle_s"] == IDLE_S
    assert wc["work_share"] == pytest.approx(WORK_SHARE, rel=1e-3)
    assert float(broker["idle_wakeup_cost_s"].removesuffix("us")) * 1e-6 == pytest.approx(FULL_S, rel=1e-3)
    assert wc["provenance"]["source"] == "measured" and "wake_idle_s" in wc["provenance"]["note"]
    term = prof["fit_terms"]["terms"]["wake_work_share"]
    assert term["value"] == pytest.approx(WORK_SHARE, rel=1e-3) and term["ci"][0] <= term["value"] <= term["ci"][1]


def test_not_asked_for_or_not_measured_it_is_not_fitted_and_says_why():
    runs = _runs(_share_at)
    plain = fit_profiles(runs, _meta(), n_boot=0, connection_form=None, idle_exit_on=False)["mosquitto"]
    assert "wake_curve" not in plain["broker"]["mosquitto"]
    curve_only = fit_profiles(runs, _meta(), n_boot=5, connection_form=None, wake_curve=True, idle_exit_on=False)
    assert curve_only["mosquitto"]["broker"]["mosquitto"]["wake_curve"]["work_share"] == 0.0
    assert "not asked for" in curve_only["mosquitto"]["fit_terms"]["terms"]["wake_work_share"]["reason"]
    prof = fit_profiles(runs, META, n_boot=5, connection_form=None, wake_curve=True, wake_work=True)["mosquitto"]
    assert "wake_curve" not in prof["broker"]["mosquitto"]
    term = prof["fit_terms"]["terms"]["wake_work_share"]
    assert term["identifiable"] is False and "no measured wake-ups by idle time" in term["reason"]
    joint = fit_profiles(
        runs,
        _meta(),
        n_boot=5,
        connection_form=None,
        wake_curve=True,
        wake_work=True,
        method="joint",
        idle_exit_on=False,
    )
    assert "knee" in joint["mosquitto"]["fit_terms"]["terms"]["wake_work_share"]["reason"]
