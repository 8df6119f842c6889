"""ILDM as a registry entry: relays in front of brokers, bridges between them,
forwarding decided by the control plane's steady state (:func:`.control.steady_state`).

Stations: each broker's relay (``relay:`` mapping), then both directions of
each broker-broker link. A copy entering a broker with a relay enters the
relay, which hands it to its broker and forwards copies over the bridges;
without a relay the broker forwards them itself (:meth:`ILDM.forward_hops`).
"""

from __future__ import annotations

import numpy as np

from ....sim.routing import Hop
from ... import topology as T
from ...params.bridge import hop_qos
from ...params.relay import RECEIVER_ACKS
from ...stations.wiring import Wiring
from ..context import CompileContext
from ..core import broker_hop
from ..keys import StationKey, StationKind
from .control import steady_state
from .relay import RelayStation

__all__ = ["ILDM", "Ildm"]


class Ildm:
    """Relays, bridges and the control plane."""

    name = "ildm"

    def prepare(self, ctx: CompileContext) -> None:
        """The relays (``ctx.relays``) and the control plane in its steady state (``ctx.control``)."""
        g = ctx.graph
        ctx.relays = {b: g.nodes[b][T.RELAY] for b in ctx.brokers if g.nodes[b].get(T.RELAY) is not None}
        ctx.control = steady_state(g)

    def add_stations(self, ctx: CompileContext) -> None:
        """Relay stations, then both directions of each broker-broker link."""
        for b in ctx.relays:
            ctx.add_station(
                StationKey.relay(b), RelayStation(f"relay:{b}", ctx.relays[b], streams=ctx.streams, window=ctx.window)
            )
        for a, b in T.broker_links(ctx.graph):
            link = ctx.link_params(a, b)
            for x, y in ((a, b), (b, a)):
                ctx.add_link(
                    StationKey.bridge(x, y),
                    f"link:{x}->{y}",
                    link,
                    queue_messages=link.queue_messages,
                    queue_bytes=link.queue_bytes,
                )

    def entry_hop(self, ctx: CompileContext, node, came_from, topic: str, ingress: bool) -> Hop | None:
        """A broker with a relay: the relay, its broker (first child), then the forwarded copies."""
        if node not in ctx.relays:
            return None
        hop = Hop(
            ctx.index_of(StationKey.relay(node)),
            children=[broker_hop(ctx, node, came_from, topic, ingress, forward=False)],
        )
        hop.children.extend(self.forward_hops(ctx, node, came_from, topic))
        return hop

    def wire(self, ctx: CompileContext, wiring: Wiring) -> None:
        """Per relay visit: ack packets of the hop that brought the copy (if the
        relay charges them: ``RECEIVER_ACKS`` of the hop's QoS,
        :func:`pubsim.models.params.bridge.hop_qos`) and the inter-subscription
        entries consulted and matched (Subscription Flooding, if the relay
        charges them)."""
        plan = wiring.plan
        for b, relay in ctx.relays.items():
            table = relay.table_entry_cost_s > 0 or relay.table_match_cost_s > 0
            idx = ctx.index_of(StationKey.relay(b))
            load = {k: np.zeros(plan.n_visits) for k in ("inbound_acks", "table_entries", "table_matches")}
            for v in _node_visits(ctx, plan, idx, b):
                came = _came_from(ctx, plan, v)
                if relay.charge_inbound_acks and came is not None:
                    load["inbound_acks"][v] = RECEIVER_ACKS[_inbound_qos(ctx, plan, v, came, b)]
                if table:
                    topic = ctx.topics[int(plan.flow_topic[plan.flow[v]])]
                    load["table_entries"][v], load["table_matches"][v] = ctx.control.table_load(b, came, topic)
            if table or load["inbound_acks"].any():
                wiring.relay_load[idx] = load  # else the station keeps the plain demand

    def forward_hops(self, ctx: CompileContext, node, came_from, topic: str) -> list[Hop]:
        """A copy over the bridge to each neighbour broker the control plane forwards ``topic`` to."""
        return [
            Hop(ctx.index_of(StationKey.bridge(node, n)), link=True, children=[ctx.entry_hop(n, node, topic, False)])
            for n in _wanted(ctx, node, came_from, topic)
        ]


def _node_visits(ctx: CompileContext, plan, relay: int, broker) -> list[int]:
    """Visits of ``broker``'s node: at its relay station, or at a host CPU station that
    serves the node and its broker as one visit (``mechanisms/hosts``; the broker's
    visit is its first child)."""
    at = ctx.index_of(StationKey.broker(broker))
    cpus = [i for i, k in enumerate(ctx.keys) if k.kind is StationKind.CPU]
    cpu_visits = np.flatnonzero(np.isin(plan.station, cpus) & (plan.n_children > 0))
    shared = cpu_visits[plan.station[plan.child_idx[plan.child_ptr[cpu_visits]]] == at]
    return sorted(np.flatnonzero(plan.station == relay).tolist() + shared.tolist())


def _came_from(ctx: CompileContext, plan, v: int):
    """The neighbour node a copy at visit ``v`` came from over a bridge, or None."""
    parent = int(plan.parent[v])
    while parent >= 0 and ctx.keys[int(plan.station[parent])].kind is StationKind.CARD:
        parent = int(plan.parent[parent])  # a host's network card around the bridge (mechanisms/hosts)
    if parent < 0:
        return None
    key = ctx.keys[int(plan.station[parent])]
    return key.names[0] if key.kind is StationKind.BRIDGE else None


def _inbound_qos(ctx: CompileContext, plan, v: int, came, node) -> int:
    """QoS of the hop ``came -> node`` that brought the copy at visit ``v``."""
    g = ctx.graph
    publish = g.nodes[ctx.publishers[int(plan.flow_publisher[plan.flow[v]])]][T.PARAMS].qos
    return hop_qos(
        publish, protocol=g.graph[T.PROTOCOL], bridge=g.edges[came, node].get(T.BRIDGE), relay=ctx.relays.get(came)
    )


def _wanted(ctx: CompileContext, broker, came_from, topic: str) -> list:
    """Neighbour brokers a copy is forwarded to from ``broker``."""
    brokers = set(ctx.brokers)  # the broker nodes; a set test instead of a node-attribute lookup per neighbour
    nbrs = [n for n in ctx.graph.neighbors(broker) if n != came_from and n in brokers]
    return [n for n in nbrs if ctx.control.forwards(broker, n, topic)]


ILDM = Ildm()
