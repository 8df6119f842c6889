"""The core of every network as two registry entries.

:data:`BROKERS`: each publisher's uplink, each broker (with the subscription
table of its local subscribers), the route of a flow (uplink, then the entry
hop at the home node) and the plain broker hop (matching, a copy to each
local subscriber's downlink, then whatever the mechanisms forward).
:data:`DELIVERY`: each subscriber's downlink and the subscriber station.
"""

from __future__ import annotations

from ....sim.routing import Hop
from ...params.topics import SubscriptionTable, TopicSyntax
from ...stations.core import BrokerStation, SubscriberStation
from ..context import CompileContext
from ..keys import StationKey

__all__ = [
    "BROKERS",
    "DELIVERY",
    "Brokers",
    "Delivery",
    "broker_hop",
    "client_connections",
    "delivery_hop",
    "passthrough",
    "publisher_connections",
]


def client_connections(ctx: CompileContext, broker) -> int:
    """Publishers and subscribers attached to ``broker`` (its client connections)."""
    return sum(1 for c in ctx.publishers + ctx.subscribers if ctx.home(c) == broker)


def publisher_connections(ctx: CompileContext, broker) -> int:
    """Publishers attached to ``broker`` (the connections whose socket buffers hold its ingress)."""
    return sum(1 for c in ctx.publishers if ctx.home(c) == broker)


def passthrough(sub) -> bool:
    """A subscriber that takes no time and has no buffer limit is not a station:
    its copies are delivered as they leave the downlink."""
    return (
        sub.processing_s.is_constant
        and sub.processing_s.mean == 0
        and sub.buffer_messages is None
        and (sub.serialization is None or not sub.serialization.has_decode)
    )


def delivery_hop(ctx: CompileContext, link: StationKey, subscriber) -> Hop:
    """The copy on the link ``link`` to ``subscriber``, then its subscriber station if it has one."""
    who = ctx.subscribers.index(subscriber)
    sub = StationKey.subscriber(subscriber)
    if ctx.has(sub):
        return Hop(ctx.index_of(link), link=True, children=[Hop(ctx.index_of(sub), subscriber=who)])
    return Hop(ctx.index_of(link), link=True, subscriber=who)  # delivered when it leaves the link


def broker_hop(ctx: CompileContext, broker, came_from, topic: str, ingress: bool, forward: bool = True) -> Hop:
    """A broker visit: copies to matching local subscribers, the mechanisms' other local
    copies (a share group's dispatch), then (``forward``) to neighbour nodes."""
    table = ctx.tables[broker]
    hop = Hop(ctx.index_of(StationKey.broker(broker)), matched=table.matched(topic), ingress=ingress)
    for s in table.subscribers(topic):
        hop.children.append(delivery_hop(ctx, StationKey.downlink(s), s))
    hop.children.extend(ctx.local_hops(broker, topic))
    if forward:
        hop.children.extend(ctx.forward_hops(broker, came_from, topic))
    return hop


class Brokers:
    """Uplinks, brokers, flow routes and plain broker hops."""

    name = "brokers"

    def prepare(self, ctx: CompileContext) -> None:
        """Each broker's subscription table of its local subscribers (``ctx.tables``)."""
        for b in ctx.brokers:
            table = SubscriptionTable(TopicSyntax(ctx.params(b).topic_syntax))
            for s in ctx.subscribers:
                if ctx.home(s) == b:
                    for f in ctx.params(s).subscriptions:
                        table.add(s, f)
            ctx.tables[b] = table

    def add_stations(self, ctx: CompileContext) -> None:
        """Each publisher's uplink, then each broker."""
        for p in ctx.publishers:
            b = ctx.home(p)
            link = ctx.link_params(p, b)
            ctx.add_link(
                StationKey.uplink(p),
                f"link:{p}->{b}",
                link,
                queue_messages=link.queue_messages,
                queue_bytes=link.queue_bytes,
            )
        for b in ctx.brokers:
            ctx.add_station(
                StationKey.broker(b),
                BrokerStation(
                    f"broker:{b}",
                    ctx.params(b),
                    filters=len(ctx.tables[b]),
                    streams=ctx.streams,
                    window=ctx.window,
                    connections=client_connections(ctx, b),
                    cpu_shared=b in ctx.shared_cpu,
                ),
            )

    def route(self, ctx: CompileContext, publisher, topic: str) -> Hop:
        """A flow's tree: the uplink, then the entry hop of the publisher's home node."""
        first = ctx.entry_hop(ctx.home(publisher), None, topic, True)
        return Hop(ctx.index_of(StationKey.uplink(publisher)), link=True, children=[first])

    def entry_hop(self, ctx: CompileContext, node, came_from, topic: str, ingress: bool) -> Hop | None:
        """The plain broker hop (the default entry of a broker)."""
        if node not in ctx.tables:
            return None
        return broker_hop(ctx, node, came_from, topic, ingress)

    def matching_subscribers(self, ctx: CompileContext, topic: str) -> int:
        """Local subscribers of all brokers whose filters match ``topic``."""
        return sum(len(ctx.tables[b].subscribers(topic)) for b in ctx.brokers)


class Delivery:
    """Downlinks (a broker's per-client queue) and subscriber stations."""

    name = "delivery"

    def add_stations(self, ctx: CompileContext) -> None:
        """Each subscriber's downlink, then its station unless it is a pass-through or folded."""
        for s in ctx.subscribers:
            b, sp = ctx.home(s), ctx.params(s)
            if b not in ctx.tables:  # brokerless: pipes from sockets instead of a downlink
                if not passthrough(sp):
                    ctx.add_station(
                        StationKey.subscriber(s),
                        SubscriberStation(
                            f"subscriber:{s}",
                            sp,
                            streams=ctx.streams,
                            window=ctx.window,
                            cpu_shared=s in ctx.shared_cpu,
                        ),
                    )
                continue
            ctx.add_link(StationKey.downlink(s), f"link:{b}->{s}", ctx.link_params(s, b))
            if not (passthrough(sp) or ctx.folds_subscriber(s)):
                ctx.add_station(
                    StationKey.subscriber(s),
                    SubscriberStation(
                        f"subscriber:{s}", sp, streams=ctx.streams, window=ctx.window, cpu_shared=s in ctx.shared_cpu
                    ),
                )


BROKERS = Brokers()
DELIVERY = Delivery()
