"""ILDM node costs at both ends of an inter-node link and Subscription
Flooding's inter-subscription table matching, by hand on the SYSTEMS.md §3
worked example (I1..I5, edges I2-I1, I2-I3, I2-I4, I3-I5; C1 at I2 and C2 at
I3 subscribe to t, C3 at I5 publishes t).

Held inter-subscriptions in SF's steady state (ControlPlane.held[x][y]: what
x forwards to y): I1->I2, I3->I2, I4->I2 and I5->I3 hold ``t`` (step 1), and
I2->I3 holds ``t`` (step 2). A PUBLISH from C3 is matched at I5 against
I5->I3 (1 entry, 1 match), at I3 (came from I5) against I3->I2 (1, 1), at I2
(came from I3) against I2->I1 and I2->I4 (both empty: 0, 0).
"""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.relay import RelayParams
from pubsim.run import simulate
from pubsim.scenario import load_scenario
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from pubsim.sim.packets import Packets
from tests import ROOT
from tests.model.test_topology import ILDM_BROKERS, ildm_tree

RELAY_S, FORWARD_S, CONTROL_S = 10e-6, 3e-6, 0.5e-6
ENTRY_S, MATCH_S = 1e-6, 2e-6


def tree(forwarding, **relay):
    g = ildm_tree(forwarding)
    params = RelayParams(
        relay_cost_s=Constant(value=RELAY_S),
        forward_cost_s=Constant(value=FORWARD_S),
        control_cost_s=Constant(value=CONTROL_S),
        **relay,
    )
    for b in ILDM_BROKERS:
        g.nodes[b][T.RELAY] = params
    return g


def relay_demands(g):
    """{node: demand of its relay visit on C3's flow, s}, from the stations themselves."""
    net = build_network(g, seed=3)
    out = {}
    for v in range(net.plan.n_visits):
        st = net.stations[int(net.plan.station[v])]
        if st.role == "relay":
            p = Packets([0.0], [0], [v], [32], [0.0])
            out[st.name.split(":", 1)[1]] = float(st.service_s(p)[0])
    return out


TABLE = {"table_entry_cost_s": ENTRY_S, "table_match_cost_s": MATCH_S}


def test_sf_pays_for_its_inter_subscription_tables():
    d = relay_demands(tree("subscription", **TABLE))
    # I5: 1 copy on; 1 entry, 1 match. I3: 1 copy (to I2); 1 entry, 1 match. I2: no copy, empty tables.
    assert d == pytest.approx(
        {
            "I5": RELAY_S + FORWARD_S + ENTRY_S + MATCH_S,
            "I3": RELAY_S + FORWARD_S + ENTRY_S + MATCH_S,
            "I2": RELAY_S,
        },
        abs=1e-15,
    )


def test_pf_consults_no_table():
    d = relay_demands(tree("flood", **TABLE))
    # PF: I5 -> I3 -> I2 -> {I1, I4}; table costs are never charged
    assert d == pytest.approx(
        {
            "I5": RELAY_S + FORWARD_S,
            "I3": RELAY_S + FORWARD_S,
            "I2": RELAY_S + 2 * FORWARD_S,
            "I1": RELAY_S,
            "I4": RELAY_S,
        },
        abs=1e-15,
    )


@pytest.mark.parametrize("forwarding", ["flood", "subscription"])
def test_default_costs_keep_the_plain_relay_demand(forwarding):
    plain, zero = relay_demands(tree(forwarding)), relay_demands(tree(forwarding, table_entry_cost_s=0.0))
    assert plain == zero
    assert plain["I5"] == RELAY_S + FORWARD_S


@pytest.mark.parametrize("qos, sender, receiver", [(1, 1, 1), (2, 3, 3)])
def test_both_ends_of_a_hop_handle_its_acks(qos, sender, receiver):
    """A copy crossing I5 -> I3 costs I5 a delivery (forward) plus the sender's
    acks, and I3 an ingress (relay) plus the receiver's acks (QoS 1: PUBACK;
    QoS 2: PUBREC, PUBREL, PUBCOMP)."""
    d = relay_demands(tree("subscription", hop_qos=qos))  # the default since issue 14
    assert d["I5"] == pytest.approx(RELAY_S + FORWARD_S + sender * CONTROL_S, abs=1e-15)
    assert d["I3"] == pytest.approx(RELAY_S + receiver * CONTROL_S + FORWARD_S + sender * CONTROL_S, abs=1e-15)
    assert d["I2"] == pytest.approx(RELAY_S + receiver * CONTROL_S, abs=1e-15)
    old = relay_demands(tree("subscription", hop_qos=qos, charge_inbound_acks=False))  # the sender-only model
    assert old["I2"] == pytest.approx(RELAY_S, abs=1e-15)


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_table_costs_show_in_relay_utilization(driver):
    """C3 publishes 20/s: a relay's utilization is 20 x its demand per PUBLISH."""
    r = simulate(tree("subscription", **TABLE), duration_s=2.0, seed=4, driver=driver)
    st = r.stations().set_index("station")
    assert st.loc["relay:I5", "utilization"] == pytest.approx(20 * (RELAY_S + FORWARD_S + ENTRY_S + MATCH_S), rel=1e-3)
    assert st.loc["relay:I2", "utilization"] == pytest.approx(20 * RELAY_S, rel=1e-3)
    assert np.isclose(st.loc["relay:I1", "arrivals"], 0)


def test_placement_b_table_variant_separates_sf_from_pf():
    """Placement B (no locality): SF forwards the same copies as PF, so without
    table costs their nodes are equally busy; the table variant makes SF's nodes
    busier by its matching (each node holds 6 filters per neighbour: 5 topics
    and the latency topic)."""
    util = {}
    for name in ("placement_b_pf", "placement_b_sf", "placement_b_sf_table"):
        sc = load_scenario(ROOT / "experiments" / "ildm" / f"{name}.yaml")
        r = sc.simulate(duration_s=1.0, warmup_s=0.25)
        st = r.stations()
        util[name] = st[st.role == "relay"].set_index("station")["utilization"]
        relay = sc.topology.nodes["n0"][T.RELAY]
    assert relay.table_entry_cost_s == pytest.approx(0.1e-6) and relay.table_match_cost_s == pytest.approx(0.5e-6)
    assert np.allclose(util["placement_b_sf"], util["placement_b_pf"], rtol=0.05)
    assert (util["placement_b_sf_table"] > util["placement_b_sf"] * 1.02).all()


@pytest.mark.parametrize("qos, acks", [(0, 0), (1, 1)])
def test_a_bridge_without_relays_is_a_client_of_both_brokers(qos, acks):
    """Brokers a - b bridged directly (no ILDM node): a copy over the bridge costs a
    one delivery (plus the hop's handshake packets) and b one ingress (plus the same
    packets): a = ingress + 2 deliveries (local subscriber, bridge) + packets of
    the publisher's hop, the bridge hop and its downlink; b = ingress + 1 delivery
    + packets of the bridge hop and its downlink (QoS 1: one PUBACK per hop)."""
    c = lambda s: Constant(value=s)  # noqa: E731
    broker = BrokerParams(ingress_cost_s=c(10e-6), delivery_cost_s=c(5e-6), ack_cost_s=1e-6)
    g = T.chain(
        brokers={"a": broker, "b": broker},
        bridge=LinkParams(latency_s=2e-3),
        link=LinkParams(latency_s=1e-3),
        publishers={"p": ("a", PublisherParams(topics=("t",), arrival="constant", rate_per_s=50.0, qos=qos))},
        subscribers={
            "sa": ("a", SubscriberParams(subscriptions=("t",), qos=qos)),
            "sb": ("b", SubscriberParams(subscriptions=("t",), qos=qos)),
        },
        forwarding="subscription",
    )
    st = simulate(g, duration_s=2.0, seed=1).stations().set_index("station")
    assert st.loc["broker:a", "utilization"] == pytest.approx(50 * (10e-6 + 2 * 5e-6 + 3 * acks * 1e-6), rel=1e-4)
    assert st.loc["broker:b", "utilization"] == pytest.approx(50 * (10e-6 + 5e-6 + 2 * acks * 1e-6), rel=1e-4)


@pytest.mark.parametrize("driver", ["batch", "reference"])
@pytest.mark.parametrize("qos, card_Bps", [(0, 1e9), (1, None)])
def test_node_costs_reach_a_shared_host_cpu(driver, qos, card_Bps):
    """Each broker and its node on a 1-core host of its own (behind a network card,
    or at QoS 1 without one: QoS is not modelled through cards): the host CPU serves
    the node's and the broker's demand as one visit, table costs and the acks of the
    hop that brought the copy included, so its utilization is that of the node plus
    the broker without hosts."""
    g = tree("subscription", hop_qos=qos, **TABLE)
    plain = simulate(g, duration_s=2.0, seed=4, driver=driver).stations().set_index("station")["utilization"]
    g.graph[T.HOSTS] = {f"h{b}": HostParams(cores=1, card_Bps=card_Bps or "unlimited") for b in ILDM_BROKERS}
    for b in ILDM_BROKERS:
        g.nodes[b][T.HOST] = f"h{b}"
    shared = simulate(g, duration_s=2.0, seed=4, driver=driver).stations().set_index("station")["utilization"]
    assert ("card:hI3:rx" in shared.index) == (card_Bps is not None)
    for b in ("I5", "I3", "I2"):
        assert shared[f"cpu:h{b}"] == pytest.approx(plain[f"relay:{b}"] + plain[f"broker:{b}"], rel=1e-3)
    node = RELAY_S + FORWARD_S + ENTRY_S + MATCH_S + 2 * qos * CONTROL_S  # I3: acks of I5->I3 and of I3->I2
    assert plain["relay:I3"] == pytest.approx(20 * node, rel=1e-3)


def test_hop_qos_through_a_card_is_refused_in_one_line():
    """A node's QoS 1 hop is a QoS connection: through a host's network card it is
    refused like any QoS connection (handshakes are not modelled through cards)."""
    g = tree("subscription", hop_qos=1)
    g.graph[T.HOSTS] = {f"h{b}": HostParams(cores=1, card_Bps=1e9) for b in ILDM_BROKERS}
    for b in ILDM_BROKERS:
        g.nodes[b][T.HOST] = f"h{b}"
    with pytest.raises(ConfigError, match=r"link:I\d->I\d\.qos: 1 is invalid") as err:
        build_network(g, seed=1)
    assert "\n" not in str(err.value)
