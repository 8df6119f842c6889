"""The ``readers`` registry entry: brokers with ``reader_wake`` charge the copies that wake their readers."""

from __future__ import annotations

from ..context import CompileContext
from ..keys import StationKey
from .wakes import ReaderWakes

__all__ = ["Readers", "READERS"]


class Readers:
    """Give each broker station whose params set ``reader_wake`` a :class:`ReaderWakes`
    (:meth:`pubsim.models.stations.core.BrokerStation.demand_s` charges
    ``reader_wake.wake_cost_s`` per copy it counts)."""

    name = "readers"

    def wire(self, ctx: CompileContext, wiring) -> None:
        """One per-visit state per such broker, once the route plan exists."""
        for b in ctx.brokers:
            p = ctx.params(b).reader_wake
            if p is not None:
                station = ctx.station(StationKey.broker(b))
                station.reader_wakes = ReaderWakes(p, len(wiring.plan.station), ctx.window)


READERS = Readers()
