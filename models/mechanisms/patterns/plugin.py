"""Request/reply servers as a registry entry.

* ``add_stations``: one :class:`.server.ServerStation` per broker with a
  ``reply`` (:class:`pubsim.models.params.patterns.ReplyParams`), after every
  other station but the share groups' dispatch;
* ``wrap_route``: on a closed-loop client's flow, each visit of such a broker
  gets the server as its only child, the broker's copies hanging below it:
  the copies that leave the server are replies.
"""

from __future__ import annotations

from ....sim.routing import Hop
from ..context import CompileContext
from ..keys import StationKey
from .server import ServerStation

__all__ = ["REQREP", "RequestReply"]


class RequestReply:
    """Server stages of request/reply."""

    name = "reqrep"

    def add_stations(self, ctx: CompileContext) -> None:
        """One server station per broker with ``reply``."""
        for b in ctx.brokers:
            reply = ctx.params(b).reply
            if reply is not None:
                ctx.add_station(
                    StationKey.server(b), ServerStation(f"server:{b}", reply, streams=ctx.streams, window=ctx.window)
                )

    def wrap_route(self, ctx: CompileContext, publisher, root: Hop) -> Hop:
        """Put the server between each server-broker visit of a request's route and its copies (in place)."""
        if ctx.params(publisher).arrival == "closed_loop":
            servers = {
                ctx.index_of(StationKey.broker(b)): ctx.index_of(StationKey.server(b))
                for b in ctx.brokers
                if ctx.has(StationKey.server(b))
            }
            if servers:
                _insert(root, servers)
        return root


def _insert(hop: Hop, servers: dict[int, int]) -> None:
    for child in hop.children:
        _insert(child, servers)
    if hop.station in servers:
        hop.children = [Hop(servers[hop.station], children=hop.children)]


REQREP = RequestReply()
