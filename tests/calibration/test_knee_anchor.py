"""Busy costs of a broker that spends its whole CPU quota near its limit (``knee_anchor="bracket"``).

NATS and the ZeroMQ proxy under a 0.1-core quota, and Mosquitto in several
configurations, use all of it at every run near their limits
(calibration/README.md, "Anchored at the limit's bracket"): their CPU per
message there is the quota over the rate. Fitted as a busy cost, the two
knee runs put the capacity below the highest rate the broker sustained;
the limit search brackets it between that rate and the lowest failing one.
"""

import math

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.fit import KneeDemandCalibrator, bracket_scale, with_limit_bracket
from pubsim.calibration.validate import fit_profiles
from pubsim.sim.errors import ConfigError
from tests.calibration.test_connection_term import META, TRUE, WIDE, busy, run_row

CAP = 0.1
STEP = 1.06  # the search's ratio between neighbouring rates near the limit
WAKE_S = TRUE["idle_wakeup_cost_s"]
BG = TRUE["background_cpu_fraction"]


def capacity(shape):
    name, payload, pubs, subs, fanout = shape
    return (CAP - BG) / busy(payload, pubs, subs, fanout)


def campaign(spend_from=0.5, limit_at=1.0, shapes=WIDE):
    """Per shape: rates on a grid of ratio STEP not aligned with its capacity; from ``spend_from`` x
    the capacity on, the broker spends its whole quota (the rest on wake-ups, falling with load, as the
    brokers do); runs above ``limit_at`` x the capacity fail (below 1: a limit that is not the CPU's)."""
    rows = []
    for k, shape in enumerate(shapes):
        name, payload, pubs, subs, fanout = shape
        b, c = busy(payload, pubs, subs, fanout), capacity(shape)
        grid = c * 0.3 * STEP ** (np.arange(40) + 0.37 * k / len(shapes) + 0.2)
        for rate in grid[grid < c * STEP**2]:
            sustained = rate <= limit_at * c
            idle = (1.0 - min(rate / c, 1.0)) ** 2
            spent = CAP if rate >= spend_from * c else BG + rate * (b + WAKE_S * idle)
            wake = max(spent - BG - rate * b, 0.0) / (rate * WAKE_S)
            row = run_row(len(rows), name, payload, pubs, subs, fanout, CAP, rate, spent / rate, wake)
            rows.append({**row, "sustainable": sustained})
    return pd.DataFrame(rows)


def bracket(runs, name):
    ok = runs[(runs.config == name) & runs.sustainable]
    return ok.rate_per_s.max(), runs[(runs.config == name) & ~runs.sustainable].rate_per_s.min()


def fit(runs, **kw):
    train = with_limit_bracket(runs)
    train = train[train.sustainable]
    return KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True, connection_form="per_message", **kw).fit(
        train
    )


def fitted_capacity(cal, shape):
    name, payload, pubs, subs, fanout = shape
    return cal.capacity_per_s(payload_bytes=payload, fanout=fanout, cap=CAP, connections=pubs + subs)


def test_the_bracket_is_the_lowest_failing_rate_above_the_highest_sustained_one():
    runs = pd.DataFrame(
        {
            "broker": ["b"] * 7,
            "config": ["x", "x", "x", "x", "y", "y", "z"],
            "rate_per_s": [100.0, 200.0, 300.0, 250.0, 100.0, 150.0, 50.0],
            "ingress_rate_per_s": [100.0, 200.0, 0.0, 240.0, 100.0, 150.0, 50.0],
            "sustainable": [True, True, False, False, False, True, True],
        }
    )
    out = with_limit_bracket(runs).groupby("config")["limit_upper_per_s"].first()
    assert out["x"] == 250.0  # not 300: the lowest failing rate above 200
    assert math.isnan(out["y"])  # the failing run is below the highest sustained one (not monotone)
    assert math.isnan(out["z"])  # nothing failed: the limit is above what was run
    assert (with_limit_bracket(with_limit_bracket(runs)).columns == with_limit_bracket(runs).columns).all()


def test_only_runs_that_spent_the_quota_move_to_the_middle_of_the_bracket():
    knee = pd.DataFrame(
        {
            "config": ["x", "x", "y", "y", "z"],
            "rate_per_s": [100.0, 90.0, 100.0, 90.0, 100.0],
            "ingress_rate_per_s": [100.0, 90.0, 100.0, 90.0, 100.0],
            "demand_s_per_ingress": [0.1 / 100, 0.1 / 90, 0.05 / 100, 0.1 / 90, 0.1 / 100],
            "cpu_cap_fraction": [0.1] * 5,
            "limit_upper_per_s": [121.0, 121.0, 121.0, 121.0, np.nan],
        }
    )
    scale = bracket_scale(knee, 0.98)
    assert scale[:2] == pytest.approx([100 / 110, 90 / 110])  # middle sqrt(100 x 121) = 110
    assert scale[2] == 1.0 and scale[3] == pytest.approx(90 / 110)  # 50 % of the quota: as measured
    assert scale[4] == 1.0  # no bracket
    assert (bracket_scale(knee.drop(columns="limit_upper_per_s"), 0.98) == 1.0).all()


def test_the_measured_cpu_puts_the_capacity_below_the_highest_sustained_rate_the_bracket_inside():
    runs = campaign()
    plain, anchored = fit(runs), fit(runs, knee_anchor="bracket")
    assert anchored.params_["n_bracketed_knee_runs"] == anchored.params_["n_knee_runs"] == 2 * len(WIDE)
    assert plain.params_.get("n_bracketed_knee_runs") == 0
    for shape in WIDE:
        low, high = bracket(runs, shape[0])
        assert low < capacity(shape) < high  # the campaign is what it claims
        assert fitted_capacity(plain, shape) < low, shape  # below what the broker sustained
        assert low < fitted_capacity(anchored, shape) < high, shape
        assert fitted_capacity(anchored, shape) == pytest.approx(math.sqrt(low * high), rel=0.01), shape


def test_runs_below_the_quota_are_fitted_as_measured():
    runs = campaign(spend_from=2.0, limit_at=0.8)  # a limit below the CPU's: the quota is never spent
    plain, anchored = fit(runs), fit(runs, knee_anchor="bracket")
    assert anchored.params_["n_bracketed_knee_runs"] == 0
    for name in TRUE:
        assert anchored.params_[name] == pytest.approx(plain.params_[name], rel=1e-9, abs=1e-15), name


def test_fit_profiles_anchors_on_the_bracket_says_so_and_refuses_it_with_the_joint_fit():
    runs = campaign()
    prof = fit_profiles(runs, META, n_boot=0, connection_form="per_message", knee_anchor="bracket", speed_drift=False)
    note = prof["mosquitto"]["broker"]["mosquitto"]["provenance"]["note"]
    assert f"{2 * len(WIDE)} of them spent the CPU quota" in note
    plain = fit_profiles(runs, META, n_boot=0, connection_form="per_message", speed_drift=False)
    assert "spent the CPU quota" not in plain["mosquitto"]["broker"]["mosquitto"]["provenance"]["note"]
    with pytest.raises(ConfigError, match="knee_anchor"):
        fit_profiles(runs, META, n_boot=0, method="joint", knee_anchor="bracket")
    with pytest.raises(ConfigError, match="knee_anchor"):
        KneeDemandCalibrator(knee_anchor="middle")
