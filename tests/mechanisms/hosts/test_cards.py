"""Network cards: a shared card is one FIFO queue (M/D/1), a hand timeline of
two connections on one card, loopback within a host, and the two drivers agree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim import theory

from .helpers import FREE, card_star, mixed_hosts

REPS = 10


def _ci(values, level=0.99):
    mean = values.mean()
    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return mean, half


def test_shared_card_is_md1():
    """Four Poisson publishers on one host share its card: the card is one M/D/1 queue
    (service = 1000 B / 1 MB/s = 1 ms at 800 msg/s); everything else is free."""
    lam, size, rate = 800.0, 1000, 1e6
    g = card_star(lam_per_s=lam, size_bytes=size, card_Bps=rate)
    values = np.array(
        [
            simulate(g, duration_s=60, warmup_s=5, seed=909, replication=r, record="stream").summary()["latency_mean_s"]
            for r in range(REPS)
        ]
    )
    expected = theory.md1_sojourn_mean_s(lam, size / rate)
    mean, half = _ci(values)
    assert abs(mean - expected) <= half, f"theory {expected:.6g} outside {mean:.6g} ± {half:.3g}"
    assert abs(mean - expected) <= 0.03 * expected


def test_card_utilization_is_offered_load():
    g = card_star(lam_per_s=800.0, size_bytes=1000, card_Bps=1e6)
    st = simulate(g, duration_s=30, warmup_s=2, seed=3).stations().set_index("station")
    assert st.loc["card:a:tx", "role"] == "card_tx"
    assert st.loc["card:a:tx", "utilization"] == pytest.approx(0.8, rel=0.03)
    assert "card:b:rx" not in st.index  # an unlimited card is no station


def _scheduled(times, size):
    n = len(times)
    return PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * n,
        schedule_topic=("t",) * n,
    )


def test_two_connections_on_one_card_by_hand():
    """p1 sends 1000 B at 0 and p2 1000 B at 0.5 ms from host a (card 1 MB/s, 0.1 ms card latency):
    p1 leaves the card at 1.0 ms, p2 waits for it and leaves at 2.0 ms. Link 0.2 ms; host b's
    card receives at 2 MB/s (0.5 ms each): 1.3 -> 1.8 ms and 2.3 -> 2.8 ms; the broker is free and
    its subscriber is on host b: loopback 0.05 ms. Deliveries at 1.85 and 2.85 ms."""
    g = T.star(
        broker=BrokerParams(),
        publishers={"p1": _scheduled([0.0], 1000), "p2": _scheduled([0.5e-3], 1000)},
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(latency_s=2e-4, bandwidth_Bps=1e9),
        protocol="none",
    )
    hosts = {
        "a": HostParams(card_Bps=1e6, card_latency_s=1e-4),
        "b": HostParams(card_Bps=2e6, loopback_latency_s=5e-5),
    }
    g = T.place(g, hosts, {"p1": "a", "p2": "a", "broker": "b", "s": "b"})
    d = simulate(g, duration_s=0.01, seed=1).deliveries().sort_values("delivery_time_s")
    got = d["delivery_time_s"].to_numpy()
    wire_s = 1000 / 1e9  # the link's own transmitter
    np.testing.assert_allclose(got, [1.85e-3 + wire_s, 2.85e-3 + wire_s], rtol=0, atol=1e-9)


def test_same_host_connection_is_loopback_and_skips_the_card():
    """Publisher, broker and subscriber on one host: no card station, each link's latency is
    the host's loopback latency (the link's own 5 ms and its 1 kB/s bandwidth are gone)."""
    g = T.star(
        broker=BrokerParams(),
        publishers={"p": _scheduled([0.0, 1e-3], 500)},
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(latency_s=5e-3, bandwidth_Bps=1e3),
        protocol="none",
    )
    g = T.place(
        g, {"desk": HostParams(card_Bps=1e5, loopback_latency_s=2e-5)}, {"p": "desk", "broker": "desk", "s": "desk"}
    )
    r = simulate(g, duration_s=0.01, seed=1)
    assert not r.stations()["role"].str.startswith("card").any()
    np.testing.assert_allclose(r.deliveries()["latency_s"].to_numpy(), [4e-5, 4e-5], rtol=0, atol=1e-12)


def test_no_hosts_builds_the_same_network():
    """A host of its own for every process with unlimited cards and no placement change nothing."""
    g = card_star(lam_per_s=500.0, size_bytes=100, card_Bps=1e6)
    bare = T.star(
        broker=BrokerParams(),
        publishers={f"p{i}": g.nodes[f"p{i}"][T.PARAMS] for i in range(4)},
        subscribers={"s": g.nodes["s"][T.PARAMS]},
        link=FREE,
        protocol="none",
    )
    separate = T.place(bare.copy(), {"x": HostParams(), "y": HostParams()}, {"p0": "x", "broker": "y"})
    a = simulate(bare, duration_s=2, seed=4)
    b = simulate(separate, duration_s=2, seed=4)
    for x, y in ((a.deliveries(), b.deliveries()), (a.stations(), b.stations())):
        pd.testing.assert_frame_equal(x, y, check_exact=True)


def test_batch_and_reference_agree_on_hosts():
    g = mixed_hosts()
    fast = simulate(g, duration_s=0.6, warmup_s=0.05, seed=11, driver="batch")
    ref = simulate(g, duration_s=0.6, warmup_s=0.05, seed=11, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations()), (ref.deliveries(), ref.drops(), ref.stations())
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    st = fast.stations().set_index("station")
    assert {"card:gw:tx", "card:srv:tx", "card:srv:rx", "card:app:rx"} <= set(st.index)
    assert st.loc["card:gw:tx", "utilization"] > 0.5  # the card binds: queueing there
    assert len(fast.deliveries()) > 100


def test_chunk_size_does_not_change_host_results():
    g = mixed_hosts()
    big = simulate(g, duration_s=0.4, seed=5, chunk_messages=1_000_000)
    small = simulate(g, duration_s=0.4, seed=5, chunk_messages=37)
    pd.testing.assert_frame_equal(big.deliveries(), small.deliveries(), check_exact=True)
