"""Serialization stage: size ratio at the source, encoding at the publisher's
CPU, decoding at the subscriber; a hand timeline and the link ceiling of
SYSTEMS.md §6 (12,500 binary vs 2,500 text messages of 1 kB per second)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.serialization import SerializationParams, link_ceiling_per_s, parse_serialization
from pubsim.run import simulate
from pubsim.scenario import parse_scenario
from pubsim.sim.errors import ConfigError

CODEC = dict(encode_cost_s=20e-6, encode_cost_per_byte_s=2e-9, decode_cost_s=10e-6, decode_cost_per_byte_s=1e-9)


def _hand_star(ratio, serialization=True):
    codec = (
        SerializationParams(format="text" if ratio > 1 else "binary", size_ratio=ratio, **CODEC)
        if serialization
        else None
    )
    pub = PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=(0.0, 1e-3, 2e-3),
        schedule_size_bytes=(1000,) * 3,
        schedule_topic=("t",) * 3,
        serialization=codec,
    )
    sub = SubscriberParams(subscriptions=("t",), serialization=codec)
    link = LinkParams(latency_s=1e-3, bandwidth_Bps=1e6)
    return T.star(broker=BrokerParams(), publishers={"p": pub}, subscribers={"s": sub}, link=link, protocol="none")


# hand timelines (us): encode 20 + 2/B, uplink 1 us/B + 1 ms, free broker,
# downlink 1 us/B + 1 ms, decode 10 + 0.001/B
#   binary 1000 B: encode 22, each link 1000 + 1000, decode 11 -> 4033 us, no queueing
#   text 5000 B:   encode 30, each link 5000 + 1000, decode 15;
#     m0: 0 -> 30 -> 5030 -> 6030 -> 11030 -> 12030 -> 12045
#     m1: 1000 -> 1030, uplink waits until 5030 -> 10030 -> 11030 -> 16030 -> 17030 -> 17045
#     m2: 2000 -> 2030, uplink 10030 -> 15030 -> 16030 -> 21030 -> 22030 -> 22045
@pytest.mark.parametrize("driver", ["batch", "reference"])
@pytest.mark.parametrize("ratio,delivered_us", [(1.0, [4033, 5033, 6033]), (5.0, [12045, 17045, 22045])])
def test_hand_timeline_text_vs_binary(ratio, delivered_us, driver):
    r = simulate(_hand_star(ratio), duration_s=0.1, seed=1, driver=driver)
    d = r.deliveries().sort_values("msg")
    assert list(d["size_bytes"]) == [int(1000 * ratio)] * 3
    np.testing.assert_allclose(d["delivery_time_s"], np.array(delivered_us) * 1e-6, rtol=0, atol=1e-12)


def test_no_serialization_is_todays_model_exactly():
    """A zero-cost binary codec adds no station and changes no record."""
    free = SerializationParams(format="binary", size_ratio=1.0)
    base = simulate(_hand_star(1.0, serialization=False), duration_s=0.1, seed=3)
    g = _hand_star(1.0, serialization=False)
    pub = g.nodes["p"][T.PARAMS]
    g.nodes["p"][T.PARAMS] = PublisherParams(**{**pub.__dict__, "serialization": free})
    same = simulate(g, duration_s=0.1, seed=3)
    pd.testing.assert_frame_equal(base.deliveries(), same.deliveries(), check_exact=True)
    assert list(same.stations()["station"]) == list(base.stations()["station"])


@pytest.mark.parametrize("preset,expected_per_s", [("binary", 12_500), ("text", 2_500)])
def test_link_ceiling_100mbit_1kb_binary_vs_text(preset, expected_per_s):
    """SYSTEMS.md §6: 100 Mbit/s carries 12,500 msg/s of 1 kB; 5x text: 2,500."""
    codec = parse_serialization(preset)
    assert link_ceiling_per_s(1000, 12.5e6, size_ratio=codec.size_ratio) == pytest.approx(expected_per_s)
    pub = PublisherParams(topics=("t",), arrival="constant", rate_per_s=20_000.0, size_bytes="1kB", serialization=codec)
    sub = SubscriberParams(subscriptions=("t",), serialization=codec)
    g = T.star(
        broker=BrokerParams(),
        publishers={"p": pub},
        subscribers={"s": sub},
        link=LinkParams(latency_s=1e-4, bandwidth_Bps="100Mbit/s"),
        protocol="none",
    )
    r = simulate(g, duration_s=1.5, seed=2, drain=False)
    t = r.deliveries()["delivery_time_s"].to_numpy()
    per_s = np.count_nonzero((t >= 0.5) & (t < 1.5))
    assert abs(per_s - expected_per_s) <= 1  # saturated transmitter: one message per size/bandwidth


def test_scenario_syntax_and_errors():
    def scenario(ser):
        return {
            "run": {"duration": "1s"},
            "topology": {
                "protocol": "none",
                "broker": {},
                "link": {"preset": "ethernet-100mbit"},
                "publishers": [
                    {"name": "p", "topics": ["t"], "rate_per_s": 10, "size_bytes": "1kB", "serialization": ser}
                ],
                "subscribers": [{"name": "s", "subscriptions": ["t"], "serialization": ser}],
            },
        }

    sc = parse_scenario(scenario("text"))
    assert sc.topology.nodes["p"][T.PARAMS].serialization.size_ratio == 5
    sc = parse_scenario(scenario({"preset": "text", "size_ratio": 3}))
    codec = sc.topology.nodes["p"][T.PARAMS].serialization
    assert codec.size_ratio == 3 and "overridden here: size_ratio" in codec.provenance.note
    with pytest.raises(ConfigError, match=r"serialization\.preset.*nope"):
        parse_scenario(scenario("nope"))
    with pytest.raises(ConfigError, match=r"serialization\.size_ratio"):
        parse_scenario(scenario({"format": "text", "size_ratio": 0}))
    with pytest.raises(ConfigError, match=r"serialization\.format"):
        parse_scenario(scenario({"format": "morse"}))


def test_parameters_table_shows_the_codec_provenance():
    r = simulate(_hand_star(5.0), duration_s=0.05, seed=1)
    p = r.parameters().set_index("component")
    assert p.loc["p.serialization", "kind"] == "serialization"


def test_graphml_round_trip_keeps_codec_round_robin_and_closed_loop(tmp_path):
    codec = parse_serialization("json")
    pubs = {
        "p": PublisherParams(topics=("a", "b"), rate_per_s=5.0, topic_choice="round_robin", serialization=codec),
        "c": PublisherParams(topics=("rr/c",), arrival="closed_loop", window_requests=3, think_time_s=1e-3),
    }
    subs = {"s": SubscriberParams(subscriptions=("a", "b", "rr/c"), serialization=codec)}
    g = T.star(broker=BrokerParams(), publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-3))
    T.write_graphml(g, tmp_path / "g.graphml")
    h = T.read_graphml(tmp_path / "g.graphml")
    for n in ("p", "c", "s"):
        assert h.nodes[n][T.PARAMS] == g.nodes[n][T.PARAMS]
