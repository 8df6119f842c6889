"""Scheduler-tick stalls on the twin's client links (calibration.stalls, sim.distributions.Sporadic).

Closed forms: a message is late by more than ``x`` on one link with
probability ``rate x (T - x)`` whether traffic is sparse (one message per
several ticks: the rest of a tick) or dense (bursts inside a tick: the
whole tick, the messages behind held in TCP order). The twin's simulated
latencies must show that, and the calibrator must recover the rate from
them.
"""

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.profile import build_profile
from pubsim.calibration.stalls import TickStallCalibrator, TickStalls
from pubsim.calibration.virtual import VirtualHarness
from pubsim.sim.distributions import Constant, Gamma, Sporadic, Uniform
from pubsim.sim.errors import ConfigError
from tests.calibration.virtual import virtual_meta

COSTS = {"ingress_cost_s": 10e-6, "delivery_cost_s": 5e-6, "per_byte_cost_s": 0.0, "idle_wakeup_cost_s": 0.0}
LINK = {"link_latency_s": 20e-6, "jitter_mean_s": 0.0, "jitter_cv": 0.0, "n_runs": 1}
META = virtual_meta(cpu_cap_fraction=1.0)
PROFILE = build_profile(name="mosquitto", broker_kind="mosquitto", demand_params=COSTS, link_params=LINK, metadata=META)


def _row(rate, duration=20.0, run=0):
    return {
        "broker": "mosquitto",
        "config": "c",
        "run": run,
        "payload_bytes": 64,
        "publishers": 1,
        "subscribers": 1,
        "topics": 1,
        "fanout": 1,
        "rate_per_s": rate,
        "duration_s": duration,
        "warmup_s": 1.0,
        "cooldown_s": 0.5,
        "cpu_cap_fraction": 1.0,
    }


def test_sporadic_moments_and_draws():
    d = Sporadic(base=Gamma(mean_value=2e-5, cv=0.5), probability=0.1, extra=Uniform(low=0.0, high=4e-3))
    x = d.sample(np.random.default_rng(0), 400_000)
    assert d.mean == pytest.approx(2e-5 + 0.1 * 2e-3)
    assert x.mean() == pytest.approx(d.mean, rel=0.01)
    assert x.var() / x.mean() ** 2 == pytest.approx(d.scv, rel=0.02)
    assert np.mean(x > 1e-3) == pytest.approx(0.1 * 0.75, rel=0.03)
    assert Sporadic(base=Constant(value=1e-5), probability=0.0, extra=Uniform(low=0.0, high=1.0)).is_constant
    with pytest.raises(ConfigError, match="probability"):
        Sporadic(base=Constant(value=0.0), probability=1.5, extra=Constant(value=0.0))


def test_hold_sparse_and_dense():
    s = TickStalls(rate_per_s=2.0, tick_s=4e-3)
    # 200 msg/s, one message per 5 ms: held with 2/200 x 4/5, for the rest of a tick
    assert s.hold(200.0, 5e-3) == pytest.approx((0.008, 0.0))
    # 20k msg/s in bursts 1 ms apart: the first burst after a stall starts waits 3-4 ms
    assert s.hold(20_000.0, 1e-3) == pytest.approx((1e-4, 3e-3))
    assert TickStalls(rate_per_s=0.0).hold(100.0, 1e-2) == (0.0, 0.0)


def _late(rate, stalls, x, duration=20.0, run=0):
    _, lat = VirtualHarness({"mosquitto": PROFILE}, seed=run, sample=10**7, stalls=stalls)(_row(rate, duration, run))
    return float(np.mean(lat - lat.min() > x)), lat


@pytest.mark.parametrize("rate", [200.0, 20_000.0])
def test_twin_lateness_matches_the_closed_form(rate):
    stalls = TickStalls(rate_per_s=5.0, tick_s=4e-3)
    x = 1e-3
    frac, lat = _late(rate, stalls, x)
    expect = 2 * 5.0 * (4e-3 - x)  # two links
    n = lat.size
    assert abs(frac - expect) < 4 * np.sqrt(expect * (1 - expect) / n) + (0.15 * expect if rate > 1000 else 0)
    assert lat.max() < 2 * 4e-3 + 1e-3  # at most a tick per link (rarely both) plus the floor


def test_without_stalls_nothing_is_late():
    frac, _ = _late(200.0, None, 0.5e-3, duration=5.0)
    assert frac == 0.0


def test_calibrator_recovers_the_rate():
    stalls = TickStalls(rate_per_s=3.0, tick_s=4e-3)
    rows, frames = [], []
    for run, rate in enumerate([200.0, 500.0, 1000.0]):
        row = _row(rate, 20.0, run)
        out, lat = VirtualHarness({"mosquitto": PROFILE}, seed=run, sample=10**7, stalls=stalls)(row)
        rows.append({**row, **out, "sustainable": True})
        frames.append(pd.DataFrame({"broker": "mosquitto", "config": "c", "run": run, "latency_s": lat}))
    runs, latency = pd.DataFrame(rows), pd.concat(frames, ignore_index=True)
    cal = TickStallCalibrator(tick_s=4e-3).fit(runs, latency)
    assert cal.params_["n_runs"] == 3
    assert cal.params_["rate_per_s"] == pytest.approx(3.0, rel=0.15)
    assert cal.stalls("test").rate_per_s == cal.params_["rate_per_s"]
    with pytest.raises(ConfigError, match="late_s"):
        TickStallCalibrator(late_s=5e-3, tick_s=4e-3)
