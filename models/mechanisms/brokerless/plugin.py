"""Brokerless ZeroMQ as a registry entry: socket stations, their peer pipes, socket routes.

Each socket node (:mod:`pubsim.models.mechanisms.brokerless.socket`) gets a
station, then one pipe (a link whose queue limit is the HWM) per connected
peer; its prefix table holds the subscriptions its peers sent. A copy
entering a socket is matched there and copied into the pipe of each peer
whose prefix matches.
"""

from __future__ import annotations

from ....sim.routing import Hop
from ... import topology as T
from ...params.topics import SubscriptionTable, TopicSyntax
from ..context import CompileContext
from ..core import delivery_hop
from ..keys import StationKey
from .socket import SocketStation, socket_link_limits

__all__ = ["BROKERLESS", "Brokerless", "socket_table"]


def socket_table(g, sock, subs) -> SubscriptionTable:
    """Prefix table of a socket: the subscriptions of the peers connected to it."""
    table = SubscriptionTable(TopicSyntax.PREFIX)
    for s in subs:
        if g.has_edge(s, sock):
            for f in g.nodes[s][T.PARAMS].subscriptions:
                table.add(s, f)
    return table


class Brokerless:
    """Sockets and pipes."""

    name = "brokerless"

    def prepare(self, ctx: CompileContext) -> None:
        """Each socket's prefix table (``ctx.socket_tables``)."""
        ctx.socket_tables = {k: socket_table(ctx.graph, k, ctx.subscribers) for k in ctx.sockets}

    def add_stations(self, ctx: CompileContext) -> None:
        """Socket stations, then one pipe (link, queue limit = HWM) per connected peer."""
        g = ctx.graph
        for k in ctx.sockets:
            params = ctx.params(k)
            ctx.add_station(
                StationKey.socket(k),
                SocketStation(
                    f"socket:{k}", params, streams=ctx.streams, window=ctx.window, cpu_shared=k in ctx.shared_cpu
                ),
            )
            for s in ctx.subscribers:
                if g.has_edge(s, k):
                    link = ctx.link_params(s, k)
                    ctx.add_link(StationKey.pipe(k, s), f"pipe:{k}->{s}", link, **socket_link_limits(link, params))

    def entry_hop(self, ctx: CompileContext, node, came_from, topic: str, ingress: bool) -> Hop | None:
        """Route below a socket: a copy into the pipe of each peer whose prefix matches."""
        if node not in ctx.socket_tables:
            return None
        table = ctx.socket_tables[node]
        hop = Hop(ctx.index_of(StationKey.socket(node)), matched=len(table.match(topic)), ingress=True)
        for s in table.subscribers(topic):
            hop.children.append(delivery_hop(ctx, StationKey.pipe(node, s), s))
        return hop

    def matching_subscribers(self, ctx: CompileContext, topic: str) -> int:
        """Distinct peers of all sockets whose prefix matches ``topic``."""
        return len(set().union(*(ctx.socket_tables[k].subscribers(topic) for k in ctx.sockets)))


BROKERLESS = Brokerless()
