"""Push/pull: round-robin dealing (exact counts), a single worker against
M/D/1, and the ack return time by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pubsim.models.mechanisms.patterns.pushpull import ack_times, push_pull
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.patterns import AckParams
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError

FREE = LinkParams()


def _pp(n_pushers, n_pullers, *, rate, processing=0.0, arrival="poisson", link=FREE):
    pushers = {f"push{i}": PublisherParams(topics=("x",), arrival=arrival, rate_per_s=rate) for i in range(n_pushers)}
    pullers = {
        f"w{j}": SubscriberParams(subscriptions=("x",), processing_s=Constant(value=processing))
        for j in range(n_pullers)
    }
    return push_pull(broker=BrokerParams(), link=link, pushers=pushers, pullers=pullers, protocol="none")


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_round_robin_exact_counts_and_order(driver):
    g = _pp(2, 3, rate=1000.0)
    r = (
        simulate(g, duration_s=0.5, seed=4, driver=driver, chunk_messages=17)
        if driver == "batch"
        else simulate(g, duration_s=0.5, seed=4, driver=driver)
    )
    d = r.deliveries()
    pubs = simulate(g, duration_s=0.5, seed=4).summary()
    for _, grp in d.groupby("publisher"):
        seq = grp.sort_values("msg")
        k = np.arange(len(seq))
        # message k of a pusher goes to worker k mod 3, exactly once
        assert list(seq["subscriber"]) == [f"w{j}" for j in k % 3]
        assert not seq["msg"].duplicated().any()
    counts = d.groupby(["publisher", "subscriber"]).size()
    for p in ("push0", "push1"):
        n = int(counts[p].sum())
        assert sorted(counts[p].tolist()) == sorted([n // 3 + (j < n % 3) for j in range(3)])
    assert pubs["published"] >= len(d) > 0


def test_single_worker_md1():
    """One pusher (Poisson), one worker with constant processing D: an M/D/1 queue."""
    lam, dserv = 700.0, 1e-3
    g = _pp(1, 1, rate=lam, processing=dserv)
    vals = np.array(
        [
            simulate(g, duration_s=40, warmup_s=2, seed=31, replication=r, record="stream").summary()["latency_mean_s"]
            for r in range(8)
        ]
    )
    expected = theory.md1_sojourn_mean_s(lam, dserv)
    half = stats.t.ppf(0.995, len(vals) - 1) * vals.std(ddof=1) / np.sqrt(len(vals))
    assert abs(vals.mean() - expected) <= half, (vals.mean(), expected, half)
    assert abs(vals.mean() - expected) <= 0.03 * expected


def test_single_worker_dd1_exact():
    """Constant pushes every 2 ms, D = 1 ms, free links: every latency is exactly D."""
    g = _pp(1, 1, rate=500.0, processing=1e-3, arrival="constant")
    lat = simulate(g, duration_s=1, seed=1).deliveries()["latency_s"].to_numpy()
    np.testing.assert_allclose(lat, 1e-3, rtol=0, atol=1e-12)


def test_ack_return_by_hand():
    link = LinkParams(latency_s=1e-3, bandwidth_Bps=1e6, overhead_bytes=40)
    g = _pp(1, 2, rate=100.0, processing=2e-4, arrival="constant", link=link)
    d = simulate(g, duration_s=0.5, seed=2).deliveries()
    acked = ack_times(d, g, AckParams(ack_bytes=4, ack_cost_s=5e-6))
    # back: (1 ms + 44 B / 1 MB/s) + 5 us + (1 ms + 44 us) = 2.093 ms
    np.testing.assert_allclose(acked["ack_time_s"] - acked["delivery_time_s"], 2.093e-3, rtol=0, atol=1e-12)
    assert (acked["ack_latency_s"] > acked["latency_s"]).all()


def test_push_pull_needs_workers():
    with pytest.raises(ConfigError, match="pullers"):
        push_pull(broker=BrokerParams(), link=FREE, pushers={}, pullers={})
    with pytest.raises(ConfigError, match="topic_choice"):
        PublisherParams(topics=("a", "b"), rate_per_s=1, topic_choice="round_robin", topic_weights=(1, 2))
