"""Speed drift under a CPU quota (``pubsim.sim.kernels.set_speed_drift``).

The kernel's counter-based normals are checked against a plain-Python
splitmix64; finish times under the drift against the same factors computed
here, by hand and over long backlogs; the factors' mean, spread and
autocorrelation against the AR(1) they are defined as.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pubsim.models.params.broker import BrokerParams
from pubsim.sim import kernels as K
from pubsim.sim.errors import ConfigError

MASK = (1 << 64) - 1
KEY = 987654321012345


def splitmix_uniform(key, counter):
    """splitmix64 (Steele, Lea & Flood 2014) of key + counter x golden gamma, as U(0, 1)."""
    z = (key + counter * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return ((z >> 11) + 0.5) * 2.0**-53


def normal(key, p):
    """Box-Muller on counters 2p and 2p + 1."""
    return math.sqrt(-2.0 * math.log(splitmix_uniform(key, 2 * p))) * math.cos(
        2.0 * math.pi * splitmix_uniform(key, 2 * p + 1)
    )


def factors(n, sigma, rho, key=KEY):
    """S_0..S_{n-1} of consecutive periods: log S an AR(1) with correlation rho, E[S] = 1."""
    x = sigma * normal(key, 0)
    out = [math.exp(x - sigma * sigma / 2)]
    for p in range(1, n):
        x = rho * x + math.sqrt(1 - rho * rho) * sigma * normal(key, p)
        out.append(math.exp(x - sigma * sigma / 2))
    return np.array(out)


def state(quota_s, period_s, sigma=0.0, time_s=0.0):
    fs = np.zeros(K.FS_LEN)
    fs[K.QUOTA], fs[K.PERIOD] = quota_s, period_s
    K.set_speed_drift(fs, sigma, time_s, KEY)
    return fs


def test_normals_are_splitmix64_box_muller():
    assert [K.drift_normal(float(KEY), float(p)) for p in range(50)] == [normal(KEY, p) for p in range(50)]


def test_hand_timeline():
    """4 ms of work from t = 0, 2 ms of quota per 10 ms period: 12 ms without drift; with factors
    S0 = 0.64, S1, period 0 does 2 / S0 = 3.14 ms of work and period 1 the rest, (4 - 2 / S0) x S1 ms."""
    assert K.quota_finish(state(2e-3, 1e-2), 0.0, 4e-3) == pytest.approx(12e-3, abs=1e-15)
    s0, s1 = factors(2, 0.3, 0.0)
    assert s0 == pytest.approx(0.6365, abs=1e-4)  # the key's first draw: the work spills into period 1
    expected = 10e-3 + (4e-3 - 2e-3 / s0) * s1
    assert K.quota_finish(state(2e-3, 1e-2, sigma=0.3), 0.0, 4e-3) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("time_s", [0.0, 0.05])
def test_long_backlog_finishes_when_the_periods_have_done_its_work(time_s):
    """A backlog served period after period: period p does quota / S_p of work, so the work ends in
    the first period k where the cumulative sum reaches it, at k x period + (rest x S_k)."""
    quota, period, sigma = 2e-3, 1e-2, 0.2
    rho = 0.0 if time_s == 0 else math.exp(-period / time_s)
    s = factors(400, sigma, rho)
    work = 0.5  # nominal s, about 250 periods
    done = np.cumsum(quota / s)
    k = int(np.searchsorted(done, work))
    rest = work - (done[k - 1] if k else 0.0)
    expected = k * period + rest * s[k]
    assert K.quota_finish(state(quota, period, sigma, time_s), 0.0, work) == pytest.approx(expected, rel=1e-9)
    # and in message-sized pieces, one after another: the same periods, the same end
    fs, t = state(quota, period, sigma, time_s), 0.0
    for _ in range(5000):
        t = K.quota_finish(fs, t, work / 5000)
    assert t == pytest.approx(expected, rel=1e-9)


def test_factors_are_the_ar1_they_claim():
    """Mean 1, log-sd sigma, lag-k autocorrelation exp(-k period / time), periods visited with gaps too."""
    sigma, period, time_s = 0.1, 0.01, 0.05
    fs = state(1.0, period, sigma, time_s)
    x = np.array([math.log(K.drift_factor(fs, float(p))) for p in range(60_000)])
    s = np.exp(x)
    assert s.mean() == pytest.approx(1.0, abs=0.005)
    assert x.std() == pytest.approx(sigma, rel=0.03)
    for k in (1, 5):
        assert np.corrcoef(x[:-k], x[k:])[0, 1] == pytest.approx(math.exp(-k * period / time_s), abs=0.03)
    fs = state(1.0, period, sigma, time_s)  # every third period only: lag-1 correlation exp(-3 period / time)
    y = np.array([math.log(K.drift_factor(fs, float(p))) for p in range(0, 90_000, 3)])
    assert np.corrcoef(y[:-1], y[1:])[0, 1] == pytest.approx(math.exp(-3 * period / time_s), abs=0.03)


def test_without_drift_the_quota_is_unchanged():
    fs0, fs1 = state(2e-3, 1e-2), state(2e-3, 1e-2, sigma=0.0, time_s=1.0)
    t0 = t1 = 0.0
    rng = np.random.default_rng(3)
    for w in rng.exponential(1e-4, 2000):
        t0, t1 = K.quota_finish(fs0, t0 * 0.999, w), K.quota_finish(fs1, t1 * 0.999, w)
        assert t0 == t1


def test_without_a_quota_the_drift_follows_the_period():
    """No quota: period p does period / S_p of work; 0.2 s of work ends where that sum reaches it."""
    period, sigma = 1e-2, 0.2
    s = factors(100, sigma, 0.0)
    done = np.cumsum(period / s)
    k = int(np.searchsorted(done, 0.2))
    expected = k * period + (0.2 - done[k - 1]) * s[k]
    assert K.quota_finish(state(math.inf, period, sigma), 0.0, 0.2) == pytest.approx(expected, rel=1e-9)


def test_bad_drift_is_a_one_line_error():
    with pytest.raises(ConfigError, match="speed_drift_log_sd"):
        BrokerParams(speed_drift_log_sd=-0.1)
    with pytest.raises(ConfigError, match="speed_drift_time_s"):
        BrokerParams(speed_drift_log_sd=0.1, speed_drift_time_s="soon")


def test_throttled_periods_are_counted_in_the_window():
    """Work of 4.5 ms from t = 0 under 2 ms per 10 ms: periods 0 and 1 run out of budget, period 2
    finishes it (0.5 ms); only the periods that start in the counting window count."""
    fs = state(2e-3, 1e-2)
    K.set_throttle_window(fs, 0.0, 1.0)
    assert K.quota_finish(fs, 0.0, 4.5e-3) == pytest.approx(20.5e-3)
    assert fs[K.THR_N] == 2
    fs = state(2e-3, 1e-2)
    K.set_throttle_window(fs, 5e-3, 1.0)  # period 0 starts before the window
    K.quota_finish(fs, 0.0, 4.5e-3)
    assert fs[K.THR_N] == 1
    fs = state(2e-3, 1e-2)
    K.set_throttle_window(fs, 0.0, 1.0)
    K.quota_finish(fs, 0.0, 2e-3)  # the budget runs out exactly as the work ends: not throttled yet
    assert fs[K.THR_N] == 0
    K.quota_finish(fs, 11e-3, 1e-3)  # the next message starts in period 1, with budget
    assert fs[K.THR_N] == 0


def test_twin_reports_its_throttled_fraction():
    """A capped broker loaded past its quota is throttled in nearly every period of the window, one
    at half its quota in none (pubsim.calibration.virtual.result_row)."""
    from pubsim.calibration.virtual import result_row
    from pubsim.models import topology as T
    from pubsim.models.params.client import PublisherParams, SubscriberParams
    from pubsim.models.params.link import LinkParams
    from pubsim.run import simulate
    from pubsim.sim.distributions import Constant

    def fraction(rate):
        broker = BrokerParams(ingress_cost_s=Constant(value=1e-4), cpu_fraction=0.2, cpu_period_s=0.01)
        pubs = {"p": PublisherParams(topics=("t",), rate_per_s=rate)}
        subs = {"s": SubscriberParams(subscriptions=("t",))}
        g = T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4))
        return result_row(simulate(g, duration_s=1.0, warmup_s=0.1, seed=1))["cap_throttled_period_fraction"]

    assert fraction(1000.0) == 0.0
    assert fraction(4000.0) > 0.95


def test_a_scenario_mapping_reads_the_drift_with_units():
    from pubsim.models.params.mapping import from_mapping

    b = from_mapping(
        BrokerParams, {"cpu_fraction": 0.2, "speed_drift_log_sd": "0.07", "speed_drift_time_s": "300 ms"}, "broker.b"
    )
    assert (b.speed_drift_log_sd, b.speed_drift_time_s) == (0.07, 0.3)
    with pytest.raises(ConfigError, match="speed_drift_log_sd"):
        from_mapping(BrokerParams, {"speed_drift_log_sd": "large"}, "broker.b")
