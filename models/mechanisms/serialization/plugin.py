"""Serialization as a registry entry: the publisher's CPU encodes before the uplink.

A publisher whose ``serialization`` has an encode cost gets an encode
station (:class:`pubsim.models.stations.core.EncodeStation`), appended after
every other station so that without serialization the station indices are
unchanged; its flows' routes start there. Message sizes and the decode
stage at subscribers are parameters of the sources and the subscriber
station (:mod:`pubsim.models.params.serialization`).
"""

from __future__ import annotations

from ....sim.routing import Hop
from ...stations.core import EncodeStation
from ..context import CompileContext
from ..keys import StationKey

__all__ = ["SERIALIZATION", "Serialization"]


class Serialization:
    """Encode stations."""

    name = "serialization"

    def add_stations(self, ctx: CompileContext) -> None:
        """An encode station per publisher whose codec has an encode cost."""
        for p in ctx.publishers:
            codec = ctx.params(p).serialization
            if codec is not None and codec.has_encode:
                ctx.add_station(
                    StationKey.encode(p),
                    EncodeStation(f"encode:{p}", codec, window=ctx.window, cpu_shared=p in ctx.shared_cpu),
                )

    def wrap_route(self, ctx: CompileContext, publisher, root: Hop) -> Hop:
        """The encode stage before the uplink."""
        key = StationKey.encode(publisher)
        return Hop(ctx.index_of(key), children=[root]) if ctx.has(key) else root


SERIALIZATION = Serialization()
