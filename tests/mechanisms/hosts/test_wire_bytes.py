"""One wire-bytes formula for links and cards (models.protocol.wire_bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.protocol import PROTOCOLS, framing_bytes, needs_topic, wire_bytes
from pubsim.run import simulate


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_wire_bytes_is_payload_framing_and_overhead(protocol):
    rng = np.random.default_rng(4)
    payload = rng.integers(0, 3_000_000, 500)
    topic = rng.integers(1, 400, 500)
    expected = payload + framing_bytes(protocol, payload, topic) + 54
    got = wire_bytes(protocol, payload, topic if needs_topic(protocol) else None, 54)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int64


def test_card_charges_each_links_own_overhead():
    """Two publishers of 1000 B on host a (card 1 MB/s), links with 0 and 500 bytes of
    overhead: the card takes 1.0 ms and 1.5 ms; sent 10 ms apart, each is delivered
    card time + link time after publishing (free broker and subscriber host)."""
    pubs = {
        p: PublisherParams(
            topics=("t",),
            arrival="schedule",
            schedule_time_s=(t,),
            schedule_size_bytes=(1000,),
            schedule_topic=("t",),
        )
        for p, t in (("p0", 0.0), ("p1", 0.01))
    }
    g = T.star(
        broker=BrokerParams(),
        publishers=pubs,
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(bandwidth_Bps=1e8),
        protocol="none",
    )
    g.edges["p1", "broker"][T.PARAMS] = LinkParams(bandwidth_Bps=1e8, overhead_bytes=500)
    g = T.place(g, {"a": HostParams(card_Bps=1e6), "b": HostParams()}, {"p0": "a", "p1": "a", "broker": "b", "s": "b"})
    lat = simulate(g, duration_s=0.1, seed=1).deliveries().sort_values("publish_time_s")["latency_s"].to_numpy()
    np.testing.assert_allclose(lat, [1e-3 + 1e-5, 1.5e-3 + 1.5e-5], rtol=0, atol=1e-12)
