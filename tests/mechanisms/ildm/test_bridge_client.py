"""A bridge between two brokers is a client of both (issue 14).

Two brokers ``a - b``, no ILDM node: publisher ``p`` and subscriber ``sa`` at
``a``, subscriber ``sb`` at ``b``. A copy crossing the bridge costs ``a`` one
delivery (plus the hop's handshake packets) and ``b`` one ingress (plus the
same packets); the hop runs at the bridge's QoS
(:func:`pubsim.models.params.bridge.hop_qos`: MQTT ``min(publish, qos)``,
AMQP the bridge's own level). Handshake packets per hop (MQTT 3.1.1 §4.3):
QoS 0: 0, QoS 1: 1 (PUBACK), QoS 2: 3 (PUBREC, PUBREL, PUBCOMP).

Costs here: ingress 10 us, delivery 5 us, 1 us per handshake packet, no
matching cost; links 1 ms (clients) and 2 ms (the bridge), no bandwidth limit.
"""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.params.bridge import BridgeParams, hop_qos
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.relay import RelayParams
from pubsim.run import simulate
from pubsim.scenario import load_scenario
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError

INGRESS_S, DELIVERY_S, ACK_S = 10e-6, 5e-6, 1e-6
PACKETS = {0: 0, 1: 1, 2: 3}


def pair(publish_qos, bridge_qos=None, *, protocol="mqtt", rate=50.0, sb=1, sa=1, broker=None):
    """``a - b`` bridged; ``sa`` subscribers at a, ``sb`` at b, all at the publisher's QoS."""
    c = lambda s: Constant(value=s)  # noqa: E731
    broker = broker or BrokerParams(ingress_cost_s=c(INGRESS_S), delivery_cost_s=c(DELIVERY_S), ack_cost_s=ACK_S)
    subs = {f"sa{i}": ("a", SubscriberParams(subscriptions=("t",), qos=publish_qos)) for i in range(sa)}
    subs |= {f"sb{i}": ("b", SubscriberParams(subscriptions=("t",), qos=publish_qos)) for i in range(sb)}
    pub = PublisherParams(topics=("t",), arrival="constant", rate_per_s=rate, qos=publish_qos)
    bridges = {} if bridge_qos is None else {("a", "b"): BridgeParams(local="a", qos=bridge_qos)}
    return T.chain(
        brokers={"a": broker, "b": broker},
        bridge=LinkParams(latency_s=2e-3),
        link=LinkParams(latency_s=1e-3),
        publishers={"p": ("a", pub)},
        subscribers=subs,
        forwarding="subscription",
        protocol=protocol,
        bridges=bridges,
    )


def test_hop_qos_rule():
    """MQTT: the bridge subscribes at its QoS, so min(publish, qos); AMQP: the
    federation link's own ack mode; an ILDM node: its hop_qos; unset: the publication's."""
    assert hop_qos(2) == 2
    assert hop_qos(2, bridge=BridgeParams(local="a", qos=1)) == 1
    assert hop_qos(0, bridge=BridgeParams(local="a", qos=1)) == 0
    assert hop_qos(0, protocol="amqp", bridge=BridgeParams(local="a", qos=1)) == 1
    assert hop_qos(1, protocol="amqp", bridge=BridgeParams(local="a", qos=0)) == 0
    assert hop_qos(0, bridge=BridgeParams(local="a", qos=2), relay=RelayParams(hop_qos=1)) == 1


# (publish QoS, bridge QoS, hop QoS on the bridge)
CASES = [(1, None, 1), (1, 0, 0), (2, 1, 1), (2, 2, 2), (0, 2, 0)]


@pytest.mark.parametrize("driver", ["batch", "reference"])
@pytest.mark.parametrize("publish_qos, bridge_qos, hop", CASES)
def test_costs_at_both_ends_by_hand(driver, publish_qos, bridge_qos, hop):
    """a: ingress + 2 deliveries (sa, the bridge) + packets of the uplink, of
    sa's downlink and of the bridge hop; b: ingress + 1 delivery + packets of
    the bridge hop and of sb's downlink. 50 messages/s, so utilization = 50 x demand."""
    q = PACKETS[publish_qos] * ACK_S  # uplink and each downlink run at the publication's QoS
    a_s = INGRESS_S + 2 * DELIVERY_S + 2 * q + PACKETS[hop] * ACK_S
    b_s = INGRESS_S + DELIVERY_S + q + PACKETS[hop] * ACK_S
    r = simulate(pair(publish_qos, bridge_qos), duration_s=2.0, seed=1, driver=driver)
    st = r.stations().set_index("station")
    assert st.loc["broker:a", "utilization"] == pytest.approx(50 * a_s, rel=1e-4)
    assert st.loc["broker:b", "utilization"] == pytest.approx(50 * b_s, rel=1e-4)
    assert r.summary()["sustainability"] == pytest.approx(1.0)


@pytest.mark.parametrize("driver", ["batch", "reference"])
@pytest.mark.parametrize("publish_qos, bridge_qos, hop", CASES)
def test_timeline_by_hand(driver, publish_qos, bridge_qos, hop):
    """One message at a time (20 ms apart, nothing queues). A link delivers on
    the PUBLISH at QoS 0/1 and on the PUBREL at QoS 2 (PUBLISH, PUBREC back,
    PUBREL: three crossings). sa: uplink, a, downlink; sb: uplink, a, bridge,
    b, downlink."""
    crossings = {0: 1, 1: 1, 2: 3}
    q = PACKETS[publish_qos] * ACK_S
    a_s = INGRESS_S + 2 * DELIVERY_S + 2 * q + PACKETS[hop] * ACK_S
    b_s = INGRESS_S + DELIVERY_S + q + PACKETS[hop] * ACK_S
    client_s = crossings[publish_qos] * 1e-3
    r = simulate(pair(publish_qos, bridge_qos), duration_s=1.0, seed=2, driver=driver)
    lat = r.deliveries().groupby("subscriber", observed=True)["latency_s"]
    assert np.allclose([lat.min()["sa0"], lat.max()["sa0"]], 2 * client_s + a_s, atol=1e-12)
    expected_b = 2 * client_s + a_s + crossings[hop] * 2e-3 + b_s
    assert np.allclose([lat.min()["sb0"], lat.max()["sb0"]], expected_b, atol=1e-12)


@pytest.mark.parametrize("bridge_qos, hop", [(1, 1), (0, 0)])
def test_amqp_federation_link_acks_whatever_the_publisher(bridge_qos, hop):
    """AMQP, publisher without confirms, consumers without acks: a federation link
    with ack-mode on-confirm (qos 1) still costs each end one ack per copy."""
    r = simulate(pair(0, bridge_qos, protocol="amqp"), duration_s=2.0, seed=1)
    st = r.stations().set_index("station")
    assert st.loc["broker:a", "utilization"] == pytest.approx(50 * (INGRESS_S + 2 * DELIVERY_S + hop * ACK_S), rel=1e-4)
    assert st.loc["broker:b", "utilization"] == pytest.approx(50 * (INGRESS_S + DELIVERY_S + hop * ACK_S), rel=1e-4)


# --------------------------------------------------------------------------
# Saturation of a bridge chain against the closed form
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sa, sb, bottleneck",
    [
        (2, 1, "a"),  # a: 10 + (2 + 1) x 5 = 25 us (the forward is a delivery); b: 10 + 5 = 15 us
        (0, 4, "b"),  # a: 10 + 1 x 5 = 15 us; b: 10 + 4 x 5 = 30 us (the bridged copy's ingress)
    ],
)
def test_saturation_of_a_bridge_chain_matches_the_closed_form(sa, sb, bottleneck):
    """QoS 0, constant arrivals: the chain's limit is 1 / max(D_a, D_b) with
    D_a = ingress + (local deliveries + 1 forward) x delivery and
    D_b = ingress + local deliveries x delivery. Sustainable (SYSTEMS.md §4:
    egress / (ingress x sp) >= 0.99) at 0.9 of it, not at 1.1; below the
    limit each broker's utilization is rate x its demand (after a warm-up: the
    first copies reach b 3 ms after the start)."""
    d = {"a": INGRESS_S + (sa + 1) * DELIVERY_S, "b": INGRESS_S + sb * DELIVERY_S}
    limit = 1.0 / max(d.values())
    assert max(d, key=d.get) == bottleneck
    under = simulate(pair(0, sa=sa, sb=sb, rate=0.9 * limit), duration_s=0.5, warmup_s=0.05, seed=3)
    s = under.summary()
    assert s["sustainability"] >= 0.99
    st = under.stations().set_index("station")
    for b in "ab":
        assert st.loc[f"broker:{b}", "utilization"] == pytest.approx(0.9 * limit * d[b], rel=1e-3)
    over = simulate(pair(0, sa=sa, sb=sb, rate=1.1 * limit), duration_s=0.5, warmup_s=0.05, seed=3)
    assert over.summary()["sustainability"] < 0.99
    assert over.stations().set_index("station").loc[f"broker:{bottleneck}", "utilization"] > 0.99


# --------------------------------------------------------------------------
# Bad settings: one-line errors
# --------------------------------------------------------------------------


def test_bad_bridge_qos_is_a_one_line_error():
    with pytest.raises(ConfigError, match="qos") as err:
        BridgeParams(local="a", qos=3)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"edge \('a', 'b'\)\.bridge\.qos") as err:
        simulate(pair(0, 2, protocol="amqp"), duration_s=0.1, seed=1)
    assert "\n" not in str(err.value) and "amqp" in str(err.value)


def test_scenario_bridge_qos(tmp_path):
    text = """
topology:
  builder: chain
  forwarding: subscription
  brokers: [{name: a}, {name: b}]
  bridges: [{local: a, remote: b, qos: %s}]
  publishers: [{name: p, broker: a, topics: [t], rate_per_s: 10, qos: 1}]
  subscribers: [{name: s, broker: b, subscriptions: [t], qos: 1}]
run: {duration: 1s}
"""
    (tmp_path / "ok.yaml").write_text(text % 0)
    g = load_scenario(tmp_path / "ok.yaml").topology
    assert g.edges["a", "b"][T.BRIDGE].qos == 0
    (tmp_path / "bad.yaml").write_text(text % 5)
    with pytest.raises(ConfigError, match=r"topology\.bridges\[0\]\.qos") as err:
        load_scenario(tmp_path / "bad.yaml")
    assert "\n" not in str(err.value)
