"""The ``iothreads`` registry entry: brokers with ``io`` set get a cycle-served station."""

from __future__ import annotations

from ....sim.disciplines import Overflow
from ....sim.errors import ConfigError
from ..context import CompileContext
from ..core import client_connections, publisher_connections
from ..keys import StationKey
from .station import CycleBrokerStation, FlowControlPassStation

__all__ = ["IoThreads", "IOTHREADS", "check_io"]


def check_io(name, params) -> None:
    """One-line error if broker ``name``'s settings do not combine with ``io``."""
    rules = (
        ("workers", params.workers != 1, "1 with io (one I/O cycle server)"),
        ("scheduling", params.scheduling != "fifo", "fifo with io"),
        ("queue_messages", params.queue_messages is not None, "unset with io (unlimited ingress queue)"),
        ("queue_bytes", params.queue_bytes is not None, "unset with io (unlimited ingress queue)"),
        ("overflow", params.overflow in Overflow.EVENT_DRIVEN, "drop_newest, reject or backpressure with io"),
        ("batch_max_messages", params.batch_max_messages != 1, "1 with io (io replaces batching)"),
        ("restart_at_s", bool(params.restart_at_s), "empty with io"),
    )
    for field_name, bad, expected in rules:
        if bad:
            raise ConfigError(f"{name}.{field_name}", getattr(params, field_name), expected)


class IoThreads:
    """Replace each I/O-cycle broker's plain station by a :class:`CycleBrokerStation`, or, with
    ``overload`` too, a :class:`FlowControlPassStation` (``overload`` checks that combination)."""

    name = "iothreads"

    def prepare(self, ctx: CompileContext) -> None:
        """Check the brokers that have ``io``."""
        for b in ctx.brokers:
            p = ctx.params(b)
            if p.io is not None:
                check_io(b, p)
                if b in ctx.shared_cpu:
                    raise ConfigError(f"{b}.io", "set", "unset for a broker sharing its CPU with an ILDM node")

    def add_stations(self, ctx: CompileContext) -> None:
        """Same index, same name; the broker's worker runs I/O cycles."""
        for b in ctx.brokers:
            p = ctx.params(b)
            if p.io is None:
                continue
            common = {
                "filters": len(ctx.tables[b]),
                "streams": ctx.streams,
                "window": ctx.window,
                "connections": client_connections(ctx, b),
            }
            if p.overload is None:
                station = CycleBrokerStation(f"broker:{b}", p, **common)
            else:
                station = FlowControlPassStation(f"broker:{b}", p, publishers=publisher_connections(ctx, b), **common)
            ctx.replace_station(StationKey.broker(b), station)


IOTHREADS = IoThreads()
