"""ILDM cooperating edge brokers (SYSTEMS.md §3): the control plane's message
flows (the paper's walkthrough, deduplication, retain, will, per-hop QoS), the
relay node on a hand timeline, traffic accounting, static bridges, and the
placement scenarios."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network, compile_context
from pubsim.models.mechanisms.ildm.control import ControlPlane, covers, steady_state
from pubsim.models.params.bridge import BridgeParams
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.relay import RelayParams
from pubsim.models.params.topics import matches
from pubsim.run import simulate
from pubsim.scenario import load_scenario
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from pubsim.sim.rng import StreamFactory
from tests import ROOT
from tests.model.test_topology import ILDM_BROKERS, ildm_tree

TREE = (("I2", "I1"), ("I2", "I3"), ("I2", "I4"), ("I3", "I5"))
HOMES = {"C1": "I2", "C2": "I3", "C3": "I5"}


def paper_plane(mode, **kw):
    cp = ControlPlane(nx.Graph(TREE), mode, **kw)
    for c, n in HOMES.items():
        cp.attach(c, n)
    return cp


def pairs(flows, kind):
    return [(f.src, f.dst) for f in flows if f.kind == kind]


# --------------------------------------------------------------------------
# The paper's walkthrough, exactly
# --------------------------------------------------------------------------


def test_walkthrough_publication_flooding():
    cp = paper_plane("flood")
    s1, s2, s3 = cp.subscribe("C1", "t"), cp.subscribe("C2", "t"), cp.publish("C3", "t")
    # the SUBSCRIBEs only reach the local brokers of I2 and I3
    assert [(f.kind, f.src, f.dst) for f in s1] == [("subscribe", "C1", "I2")]
    assert [(f.kind, f.src, f.dst) for f in s2] == [("subscribe", "C2", "I3")]
    # I5 -> I3, then I3 -> I2, then I2 -> I1 and I4: all five brokers receive it
    assert pairs(s3, "publish") == [("C3", "I5"), ("I5", "I3"), ("I3", "I2"), ("I2", "I1"), ("I2", "I4")]
    seen = {"I5"} | {dst for src, dst in pairs(s3, "publish")}
    assert seen - {"I5"} >= set(ILDM_BROKERS) - {"I5"} and seen >= set(ILDM_BROKERS)
    # C1 and C2 get it from their local brokers
    assert sorted(pairs(s3, "deliver")) == [("I2", "C1"), ("I3", "C2")]


def test_walkthrough_subscription_flooding():
    cp = paper_plane("subscription")
    s1, s2, s3 = cp.subscribe("C1", "t"), cp.subscribe("C2", "t"), cp.publish("C3", "t")
    # step 1: I2 inter-subscribes to I1, I3 and I4; I3 passes it on to I5
    assert pairs(s1, "subscribe") == [("C1", "I2")]
    assert sorted(pairs(s1, "inter_subscribe")) == [("I2", "I1"), ("I2", "I3"), ("I2", "I4"), ("I3", "I5")]
    # step 2: I3 inter-subscribes to I2 only; I2 does not pass it to I1 or I4
    assert pairs(s2, "inter_subscribe") == [("I3", "I2")]
    # step 3: I5 -> I3 (delivers to C2) -> I2 (delivers to C1); I1 and I4 never see it
    assert pairs(s3, "publish") == [("C3", "I5"), ("I5", "I3"), ("I3", "I2")]
    assert sorted(pairs(s3, "deliver")) == [("I2", "C1"), ("I3", "C2")]
    assert not {"I1", "I4"} & {x for f in s3 for x in (f.src, f.dst)}


def test_records_are_tidy_and_separate_client_from_inter_broker():
    import pandas as pd

    cp = paper_plane("subscription")
    cp.subscribe("C1", "t")
    df = pd.DataFrame(cp.records())
    assert list(df.columns[:6]) == ["step", "kind", "src", "dst", "topic", "client"]
    assert df[df.kind == "inter_subscribe"].inter_broker.all()
    assert not df[df.kind == "subscribe"].inter_broker.any()
    assert df.control.all()


@pytest.mark.parametrize("forwarding", ["flood", "subscription"])
def test_data_plane_routes_come_from_the_control_plane(forwarding):
    """The compiled route of C3's flow crosses exactly the tree edges the
    protocol model forwards the PUBLISH on."""
    net = build_network(ildm_tree(forwarding), seed=1)
    names = [net.stations[s].name for s in net.plan.station]
    bridges = sorted(n[5:] for n in names if n.startswith("link:I") and "->I" in n)
    cp = paper_plane(forwarding)
    cp.subscribe("C1", "t")
    cp.subscribe("C2", "t")
    assert bridges == sorted(f"{a}->{b}" for a, b in pairs(cp.publish("C3", "t"), "publish") if a != "C3")


# --------------------------------------------------------------------------
# Covering and deduplication
# --------------------------------------------------------------------------

COVER_CASES = [
    ("a/#", "a/b", True),
    ("a/#", "a", True),
    ("a/+", "a/b", True),
    ("a/+", "a/b/c", False),
    ("a/b", "a/#", False),
    ("#", "a/+/c", True),
    ("+/+", "a/+", True),
    ("a/+", "+/b", False),
    ("a/+/#", "a/b/c/d", True),
    ("#", "$SYS/x", False),
    ("$SYS/#", "$SYS/x", True),
    ("a/#", "a/#", True),
    ("+/#", "a/#", True),
    ("a/+/c", "a/#", False),
]


@pytest.mark.parametrize("wide, narrow, expected", COVER_CASES)
def test_covers_mqtt(wide, narrow, expected):
    assert covers("mqtt", wide, narrow) is expected


def test_covers_amqp_and_prefix():
    assert covers("amqp", "a.#", "a.*.c") and covers("amqp", "#", "")
    assert covers("amqp", "a.#.c", "a.b.#.c") and not covers("amqp", "a.*", "a.#")
    assert covers("prefix", "sen", "sensor/1") and not covers("prefix", "sensor/1", "sen")


TOPICS = ["a", "a/b", "a/c", "a/b/c", "x/b", "x/b/c", "$SYS/x", "a/b/c/d"]
FILTERS = [
    "#",
    "a/#",
    "a/+",
    "+/b",
    "+/b/#",
    "a/b",
    "a/+/c",
    "+/+",
    "$SYS/#",
    "x/#",
    "+",
    "a/b/#",
    "+/#",
    "a/+/#",
    "$SYS/+",
]


def test_covers_agrees_with_matching_on_all_short_topics():
    """covers(w, n) exactly when every topic of up to 4 levels (over the
    filters' words plus a fresh one) that n matches is also matched by w."""
    import itertools

    words = ["a", "b", "c", "x", "z", ""]
    topics = [
        ("$SYS/" if dollar else "") + "/".join(levels)
        for k in range(1, 5)
        for levels in itertools.product(words, repeat=k)
        for dollar in (False, True)
    ]
    topics = [t for t in topics if t]
    matched = {f: {t for t in topics if matches("mqtt", f, t)} for f in FILTERS}
    for w in FILTERS:
        for n in FILTERS:
            assert covers("mqtt", w, n) == (matched[n] <= matched[w]), (w, n)


def test_overlapping_second_subscription_propagates_nothing():
    cp = paper_plane("subscription")
    cp.subscribe("C1", "a/#")
    again = cp.subscribe("C1", "a/b")  # covered by a/# everywhere
    assert pairs(again, "inter_subscribe") == []
    assert pairs(again, "subscribe") == [("C1", "I2")]


def test_wider_filter_propagates_the_difference():
    cp = paper_plane("subscription")
    cp.subscribe("C1", "a/b")
    wider = cp.subscribe("C1", ["a/b", "a/+", "z"])  # a/b already sent; a/+ is wider; z is new
    sent = sorted((f.src, f.dst, f.topic) for f in wider if f.kind == "inter_subscribe")
    edges = [("I2", "I1"), ("I2", "I3"), ("I2", "I4"), ("I3", "I5")]
    assert sent == sorted((a, b, t) for a, b in edges for t in ("a/+", "z"))
    # another client's narrower filter downstream adds only the reverse direction
    narrow = cp.subscribe("C2", "a/c")
    assert pairs(narrow, "inter_subscribe") == [("I3", "I2")]


def test_unsubscribe_withdraws_and_reexposes_narrower_filters():
    cp = paper_plane("subscription")
    cp.attach("C4", "I2")
    cp.subscribe("C1", "a/#")
    cp.subscribe("C4", "a/b")  # covered: not propagated
    flows = cp.unsubscribe("C1", "a/#")
    gone = sorted(pairs(flows, "inter_unsubscribe"))
    back = sorted((f.src, f.dst, f.topic) for f in flows if f.kind == "inter_subscribe")
    edges = [("I2", "I1"), ("I2", "I3"), ("I2", "I4"), ("I3", "I5")]
    assert gone == edges
    assert back == [(a, b, "a/b") for a, b in edges]
    assert pairs(cp.publish("C3", "a/x"), "publish") == [("C3", "I5")]
    assert pairs(cp.publish("C3", "a/b"), "deliver") == [("I2", "C4")]


def _interested(b, broker, came_from, topic):
    """Independent oracle of SF's steady state: a matching subscriber at
    ``broker`` or behind it, away from ``came_from`` (recursive search)."""
    if b.tables[broker].subscribers(topic):
        return True
    return any(
        _interested(b, n, broker, topic)
        for n in b.graph.neighbors(broker)
        if n != came_from and b.graph.nodes[n][T.KIND] == T.NodeKind.BROKER
    )


def test_steady_state_equals_an_independent_oracle():
    """Forwarding decisions of the control plane after all subscriptions equal a
    recursive search for matching subscribers behind each neighbour."""
    rng = np.random.default_rng(4)
    for trial in range(6):
        tree = (
            nx.random_labeled_tree(7, seed=trial)
            if hasattr(nx, "random_labeled_tree")
            else nx.random_tree(7, seed=trial)
        )
        g = nx.Graph(**{T.PROTOCOL: "mqtt", T.FORWARDING: "subscription"})
        for n in tree:
            g.add_node(f"b{n}", **{T.KIND: "broker", T.PARAMS: BrokerParams()})
        for a, b in tree.edges:
            g.add_edge(f"b{a}", f"b{b}", **{T.PARAMS: LinkParams()})
        for k in range(10):
            filt = tuple(rng.choice(FILTERS[:8], size=2, replace=False))
            g.add_node(f"s{k}", **{T.KIND: "subscriber", T.PARAMS: SubscriberParams(subscriptions=filt)})
            g.add_edge(f"s{k}", f"b{rng.integers(7)}", **{T.PARAMS: LinkParams()})
        T.validate(g)
        b = compile_context(g, StreamFactory(0, 0), (0.0, 1.0))
        cp = steady_state(g)
        for x, y in g.subgraph(T.brokers(g)).edges:
            for u, v in ((x, y), (y, x)):
                for t in TOPICS[:-1]:
                    assert cp.forwards(u, v, t) == _interested(b, v, u, t), (trial, u, v, t)


# --------------------------------------------------------------------------
# Retain, will, per-hop QoS
# --------------------------------------------------------------------------


def test_retained_publish_reaches_every_broker_under_sf():
    cp = paper_plane("subscription")
    cp.subscribe("C2", "t")
    flows = cp.publish("C3", "r/1", retain=True)  # nobody subscribed to r/1
    assert sorted(pairs(flows, "publish")) == sorted(
        [("C3", "I5"), ("I5", "I3"), ("I3", "I2"), ("I2", "I1"), ("I2", "I4")]
    )
    assert all("r/1" in cp.retained[n] for n in ILDM_BROKERS)
    cp.attach("C4", "I4")
    late = cp.subscribe("C4", "r/#")
    assert [(f.kind, f.src, f.dst, f.topic, f.retain) for f in late if f.kind == "deliver"] == [
        ("deliver", "I4", "C4", "r/1", True)
    ]
    # a non-retained publish on the same topic follows inter-subscriptions only
    assert pairs(cp.publish("C3", "r/1"), "publish") == [("C3", "I5"), ("I5", "I3"), ("I3", "I2"), ("I2", "I4")]


def test_will_forwarded_on_unexpected_disconnect_only():
    cp = paper_plane("subscription")
    cp.subscribe("C1", "status/#")
    cp.connect("C3", "I5", will="status/C3")
    assert cp.disconnect("C3", unexpected=False) == []
    cp.connect("C3", "I5", will="status/C3")
    flows = cp.disconnect("C3", unexpected=True)
    assert [(f.kind, f.src, f.dst) for f in flows][:1] == [("will", "C3", "I5")]
    assert pairs(flows, "publish") == [("I5", "I3"), ("I3", "I2")]
    assert pairs(flows, "deliver") == [("I2", "C1")]
    assert cp.disconnect("C3", unexpected=True) == []  # the will fires once


@pytest.mark.parametrize(
    "qos, acks",
    [
        (0, []),
        (1, [("puback", "I3", "I5")]),
        (2, [("pubrec", "I3", "I5"), ("pubrel", "I5", "I3"), ("pubcomp", "I3", "I5")]),
    ],
)
def test_per_hop_qos_adds_acks_as_control(qos, acks):
    cp = paper_plane("subscription", hop_qos={("I5", "I3"): qos})
    cp.subscribe("C1", "t")
    flows = cp.publish("C3", "t")
    got = [(f.kind, f.src, f.dst) for f in flows if f.kind in ("puback", "pubrec", "pubrel", "pubcomp")]
    assert got == acks
    assert all(f.control and f.inter_broker for f in flows if f.kind.startswith("pub") and f.kind != "publish")


def test_control_plane_rejects_cycles_and_bad_qos():
    with pytest.raises(ConfigError, match="closes the cycle"):
        ControlPlane(nx.Graph([("a", "b"), ("b", "c"), ("c", "a")]))
    with pytest.raises(ConfigError, match="hop_qos"):
        ControlPlane(nx.Graph(TREE), hop_qos={("I5", "I3"): 3})
    with pytest.raises(ConfigError, match="hop_qos"):
        ControlPlane(nx.Graph(TREE), hop_qos={("I5", "I1"): 1})


# --------------------------------------------------------------------------
# Relay node in the data plane
# --------------------------------------------------------------------------


def relay_pair(hop_qos=0, forwarding="subscription"):
    """Two nodes a - b with relays; publisher and subscriber at a, subscriber at b."""
    c = lambda s: Constant(value=s)  # noqa: E731
    broker = BrokerParams(ingress_cost_s=c(10e-6), delivery_cost_s=c(5e-6))
    relay = RelayParams(relay_cost_s=c(100e-6), forward_cost_s=c(20e-6), control_cost_s=c(7e-6), hop_qos=hop_qos)
    return T.chain(
        brokers={"a": broker, "b": broker},
        bridge=LinkParams(latency_s=2e-3),
        link=LinkParams(latency_s=1e-3),
        publishers={"p": ("a", PublisherParams(topics=("t",), arrival="constant", rate_per_s=50.0))},
        subscribers={
            "sa": ("a", SubscriberParams(subscriptions=("t",))),
            "sb": ("b", SubscriberParams(subscriptions=("t",))),
        },
        relays={"a": relay, "b": relay},
        forwarding=forwarding,
    )


@pytest.mark.parametrize("driver", ["batch", "reference"])
@pytest.mark.parametrize(
    "hop_qos, relay_a_s, bridge_s, relay_b_s", [(0, 120e-6, 2e-3, 100e-6), (2, 141e-6, 6e-3, 121e-6)]
)
def test_relay_hand_timeline(driver, hop_qos, relay_a_s, bridge_s, relay_b_s):
    """uplink 1 ms; relay a: 100 us + 1 copy x (20 us + acks x 7 us); broker a:
    10 + 5 us; downlink 1 ms. Towards b: the bridge (QoS 0: 2 ms; QoS 2: the
    receiver delivers on PUBREL, PUBLISH + PUBREC + PUBREL = 3 x 2 ms), relay b
    100 us + its acks of the hop (QoS 2: PUBREC, PUBREL, PUBCOMP = 3 x 7 us; no
    copies onward), broker b 15 us, downlink 1 ms."""
    r = simulate(relay_pair(hop_qos), duration_s=1.0, seed=2, driver=driver)
    d = r.deliveries()
    assert len(d) == 2 * r.summary()["published"] == 100
    lat = d.groupby("subscriber", observed=True)["latency_s"]
    assert np.allclose(lat.min()["sa"], 1e-3 + relay_a_s + 15e-6 + 1e-3, atol=1e-12)
    assert np.allclose(lat.max()["sa"], lat.min()["sa"], atol=1e-12)
    assert np.allclose(lat.min()["sb"], 1e-3 + relay_a_s + bridge_s + relay_b_s + 15e-6 + 1e-3, atol=1e-12)
    assert d.groupby("subscriber", observed=True)["hops"].unique().map(list).to_dict() == {"sa": [2], "sb": [3]}
    st = r.stations().set_index("station")
    assert st.loc["relay:a", "role"] == "relay"
    assert st.loc["relay:a", "utilization"] == pytest.approx(50 * relay_a_s, rel=1e-4)
    assert st.loc["relay:b", "utilization"] == pytest.approx(50 * relay_b_s, rel=1e-4)
    # the broker of a relay node delivers locally only (one copy, not two)
    assert st.loc["broker:a", "utilization"] == pytest.approx(50 * 15e-6, rel=1e-4)


def test_no_relay_keeps_routes_unchanged():
    g = relay_pair()
    for b in ("a", "b"):
        del g.nodes[b][T.RELAY]
    names = [s.name for s in build_network(g, seed=0).stations]
    assert not any(n.startswith("relay:") for n in names)


def test_relay_topologies_reject_cycles_and_misplaced_relays():
    g = relay_pair()
    g.add_node("c", **{T.KIND: "broker", T.PARAMS: BrokerParams(), T.RELAY: RelayParams()})
    g.add_edge("b", "c", **{T.PARAMS: LinkParams()})
    g.add_edge("c", "a", **{T.PARAMS: LinkParams()})
    with pytest.raises(ConfigError, match="closes the cycle"):
        T.validate(g)
    g = relay_pair()
    g.nodes["sa"][T.RELAY] = RelayParams()
    with pytest.raises(ConfigError, match="relay"):
        T.validate(g)
    with pytest.raises(ConfigError, match="hop_qos"):
        RelayParams(hop_qos=3)


def test_graphml_round_trip_keeps_relays_and_bridges(tmp_path):
    g = relay_pair()
    g.graph[T.FORWARDING] = "bridge"
    g.edges["a", "b"][T.BRIDGE] = BridgeParams(local="a", topics_out=("t", "x/#"), topics_in=("y",))
    T.write_graphml(g, tmp_path / "g.graphml")
    back = T.read_graphml(tmp_path / "g.graphml")
    assert back.nodes["a"][T.RELAY] == g.nodes["a"][T.RELAY]
    assert back.edges["a", "b"][T.BRIDGE] == g.edges["a", "b"][T.BRIDGE]
    assert T.RELAY not in back.nodes["sa"]


# --------------------------------------------------------------------------
# Traffic accounting
# --------------------------------------------------------------------------


def _traffic(r):
    t = r.traffic()
    return t.groupby(["scope", "element", "traffic", "plane", "direction"])["messages"].sum()


@pytest.mark.parametrize(
    "forwarding, copies",
    [
        ("flood", {"I5->I3": 20, "I3->I2": 20, "I2->I1": 20, "I2->I4": 20}),
        ("subscription", {"I5->I3": 20, "I3->I2": 20}),
    ],
)
def test_inter_broker_copies_equal_hand_count(forwarding, copies):
    r = simulate(ildm_tree(forwarding), duration_s=1.0, seed=3)  # 20 publications
    t = _traffic(r)
    data = {e: int(n) for (s, e, tr, p, d), n in t.items() if s == "edge" and p == "data" and n}
    assert data == copies
    control = {e: int(n) for (s, e, tr, p, d), n in t.items() if s == "edge" and p == "control" and n}
    expected_control = (
        {} if forwarding == "flood" else {"I2->I1": 1, "I2->I3": 1, "I2->I4": 1, "I3->I5": 1, "I3->I2": 1}
    )
    assert control == expected_control
    assert t["node", "I5", "client", "data", "in"] == 20
    assert t["node", "I2", "client", "data", "out"] == 20
    assert t["node", "I2", "client", "control", "in"] == 1
    assert t["node", "I2", "inter_broker", "data", "out"] == (40 if forwarding == "flood" else 0)


def test_traffic_counts_hop_qos_acks():
    r = simulate(relay_pair(hop_qos=1), duration_s=1.0, seed=2)
    t = _traffic(r)
    assert t["edge", "a->b", "inter_broker", "data", ""] == 50
    assert t["edge", "b->a", "inter_broker", "control", ""] == 50 + 1  # PUBACKs + b's inter-subscription
    assert t["edge", "a->b", "inter_broker", "control", ""] == 1  # a's inter-subscription (for sa)


# --------------------------------------------------------------------------
# Static bridges
# --------------------------------------------------------------------------


def bridged(bridge):
    brokers = {n: BrokerParams() for n in ("b0", "b1", "b2")}
    pubs = {
        "p0": ("b0", PublisherParams(topics=("out/x", "keep/x"), arrival="constant", rate_per_s=10.0)),
        "p2": ("b2", PublisherParams(topics=("in/y", "other/y"), arrival="constant", rate_per_s=10.0)),
    }
    subs = {f"s{i}": (f"b{i}", SubscriberParams(subscriptions=("#",))) for i in range(3)}
    return T.chain(
        brokers=brokers,
        bridge=LinkParams(latency_s=1e-3),
        link=LinkParams(latency_s=1e-4),
        publishers=pubs,
        subscribers=subs,
        forwarding="bridge",
        bridges=bridge,
    )


def test_static_bridge_in_and_out_patterns():
    g = bridged(
        {
            ("b1", "b0"): BridgeParams(local="b1", topics_in=("out/#",), topics_out=("in/#",)),
            ("b1", "b2"): BridgeParams(local="b1", topics_in=("in/#",), topics_out=("out/#",)),
        }
    )
    d = simulate(g, duration_s=1.0, seed=1).deliveries()
    got = d.groupby(["topic", "subscriber"], observed=True).size().unstack(fill_value=0)
    # out/x crosses b0->b1 (in at b1) and b1->b2 (out at b1); keep/x stays at b0
    reached = {t: sorted(row[row > 0].index) for t, row in got.iterrows()}
    assert reached == {"out/x": ["s0", "s1", "s2"], "keep/x": ["s0"], "in/y": ["s0", "s1", "s2"], "other/y": ["s2"]}
    for t, row in got.iterrows():
        assert len(set(row[row > 0])) == 1, t  # every receiver got every message of the topic


def test_bridge_local_must_be_an_end():
    with pytest.raises(ConfigError, match="local"):
        bridged({("b0", "b1"): BridgeParams(local="b2", topics_out=("#",))})
    with pytest.raises(ConfigError, match="topics_out"):
        bridged({("b0", "b1"): BridgeParams(local="b0", topics_out=("a/#/b",))})


# --------------------------------------------------------------------------
# Placement scenarios A-D (SYSTEMS.md §3)
# --------------------------------------------------------------------------

SCENARIOS = ROOT / "experiments" / "ildm"


def run_placement(kind, fwd):
    sc = load_scenario(SCENARIOS / f"placement_{kind}_{fwd}.yaml")
    return sc, sc.simulate(duration_s=1.5, warmup_s=0.5)


def _inter_broker_copies(r):
    t = r.traffic()
    return int(t[(t.scope == "edge") & (t.plane == "data")].messages.sum())


@pytest.fixture(scope="module")
def placements():
    return {(k, f): run_placement(k, f) for k in "abcd" for f in ("pf", "sf")}


def test_placement_files_describe_the_study(placements):
    for (kind, fwd), (sc, r) in placements.items():
        g = sc.topology
        assert g.graph[T.FORWARDING] == {"pf": "flood", "sf": "subscription"}[fwd]
        brokers = T.brokers(g)
        assert len(brokers) == (1 if kind == "a" else 5)
        assert all(g.nodes[b].get(T.RELAY) is not None for b in brokers)
        data_pubs = [p for p in T.clients(g, T.NodeKind.PUBLISHER) if p != "latency-pub"]
        assert len(data_pubs) == 50
        if kind != "a":
            per_node = {
                b: sum(
                    T.home_broker(g, c) == b
                    for c in g
                    if g.nodes[c][T.KIND] != "broker" and not c.startswith("latency")
                )
                for b in brokers
            }
            assert set(per_node.values()) == {20}
        assert r.summary()["delivery_ratio"] == pytest.approx(1.0, abs=0.02)
        sp = r.network.sp_ratio
        assert sp == pytest.approx((50 * 10 + 1 * len(brokers) * 1) / 51)


def test_placement_qualitative_expectations(placements):
    copies = {key: _inter_broker_copies(r) for key, (_, r) in placements.items()}
    assert copies["a", "pf"] == copies["a", "sf"] == 0  # one node: no inter-broker traffic
    assert copies["b", "sf"] == copies["b", "pf"] > 0  # no locality: SF gains nothing
    assert copies["c", "sf"] * 10 < copies["c", "pf"]  # high locality: SF far fewer copies
    assert copies["c", "sf"] < copies["d", "sf"] < copies["d", "pf"]
    # every broker sees every publication under PF
    _, r = placements["b", "pf"]
    st = r.stations().set_index("station")
    relay_arrivals = st[st.role == "relay"].arrivals
    assert relay_arrivals.max() - relay_arrivals.min() <= 0.02 * relay_arrivals.mean()
    # multi-hop paths add latency: the latency topic's farthest subscriber waits longest
    d = placements["c", "sf"][1].deliveries()
    lat = d[d.topic == "ildm/latency"].groupby("subscriber", observed=True)["latency_s"].mean()
    assert list(lat.sort_values().index) == [f"latency-sub{n}" for n in range(5)]


# --------------------------------------------------------------------------
# Bad input in scenario files: one line naming the field
# --------------------------------------------------------------------------


def _chain_spec(**extra):
    spec = {
        "builder": "chain",
        "forwarding": "subscription",
        "brokers": [{"name": "n0", "relay": {"relay_cost_s": "5us"}}, {"name": "n1"}],
        "publishers": [{"name": "p", "broker": "n0", "topics": ["t"], "rate_per_s": 10}],
        "subscribers": [{"name": "s", "broker": "n1", "subscriptions": ["t"]}],
    }
    spec.update(extra)
    return {"run": {"duration": "1s"}, "topology": spec}


def test_scenario_relay_and_bridges_parse():
    from pubsim.scenario import parse_scenario

    g = parse_scenario(_chain_spec()).topology
    assert g.nodes["n0"][T.RELAY].relay_cost_s.mean == pytest.approx(5e-6)
    assert T.RELAY not in g.nodes["n1"]
    spec = _chain_spec(forwarding="bridge", bridges=[{"local": "n1", "remote": "n0", "topics_in": ["t"]}])
    g = parse_scenario(spec).topology
    assert T.bridge_patterns(g) == {("n1", "n0"): (), ("n0", "n1"): ("t",)}


@pytest.mark.parametrize(
    "edit, field",
    [
        (
            lambda s: s["topology"]["brokers"][0]["relay"].update(relay_cost="5us"),
            "topology.brokers[0](n0).relay.relay_cost",
        ),
        (lambda s: s["topology"]["brokers"][0]["relay"].update(hop_qos=3), "topology.brokers[0](n0).relay.hop_qos"),
        (lambda s: s["topology"].update(bridges=[{"local": "n0", "remote": "n2"}]), "bridges['n0', 'n2']"),
        (
            lambda s: s["topology"].update(bridges=[{"local": "n0", "remote": "n1", "topics_out": ["a/#/b"]}]),
            "edge ('n0', 'n1').bridge.topics_out",
        ),
        (lambda s: s["topology"].update(forwarding="static"), "graph.forwarding"),
    ],
)
def test_scenario_bad_ildm_fields_name_the_field(edit, field):
    from pubsim.scenario import parse_scenario

    spec = _chain_spec()
    edit(spec)
    with pytest.raises(ConfigError) as info:
        parse_scenario(spec)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_graphml_bad_relay_field_names_node_and_field(tmp_path):
    g = relay_pair()
    T.write_graphml(g, tmp_path / "g.graphml")
    text = (tmp_path / "g.graphml").read_text().replace('attr.name="relay_hop_qos"', 'attr.name="relay_hop_qs"')
    (tmp_path / "bad.graphml").write_text(text)
    with pytest.raises(ConfigError) as info:
        T.read_graphml(tmp_path / "bad.graphml")
    assert info.value.field.endswith(".relay.hop_qs") and "\n" not in str(info.value)
