"""The ``overload`` registry entry: brokers with ``overload`` set get flow-controlled ingress."""

from __future__ import annotations

from ....sim.disciplines import Overflow
from ....sim.errors import ConfigError
from ..context import CompileContext
from ..core import publisher_connections
from ..keys import StationKey
from .station import FlowControlBrokerStation

__all__ = ["Overload", "OVERLOAD", "check_overload"]


def check_overload(name, params) -> None:
    """One-line error if broker ``name``'s settings do not combine with ``overload``."""
    rules = (
        ("workers", params.workers != 1, "1 with overload (one event loop reads the sockets)"),
        ("scheduling", params.scheduling != "fifo", "fifo with overload"),
        ("queue_messages", params.queue_messages is not None, "unset with overload (the socket buffers bound ingress)"),
        ("queue_bytes", params.queue_bytes is not None, "unset with overload (the socket buffers bound ingress)"),
        ("overflow", params.overflow in Overflow.EVENT_DRIVEN, "drop_newest, reject or backpressure with overload"),
        ("batch_max_messages", params.batch_max_messages != 1, "1 with overload"),
        ("restart_at_s", bool(params.restart_at_s), "empty with overload"),
    )
    for field_name, bad, expected in rules:
        if bad:
            raise ConfigError(f"{name}.{field_name}", getattr(params, field_name), expected)
    if params.io is not None and params.io.cycle_max_per_connection is None:
        raise ConfigError(
            f"{name}.io.cycle_max_per_connection",
            None,
            "set with overload (event-loop passes that read a few packets per connection; cycles read whole buffers)",
        )


class Overload:
    """Replace each flow-controlled broker's plain station by a :class:`FlowControlBrokerStation`
    (a broker with event-loop passes, ``io``, is the iothreads mechanism's: its passes bound the
    bytes themselves)."""

    name = "overload"

    def prepare(self, ctx: CompileContext) -> None:
        """Check the brokers that have ``overload``."""
        for b in ctx.brokers:
            p = ctx.params(b)
            if p.overload is not None:
                check_overload(b, p)

    def add_stations(self, ctx: CompileContext) -> None:
        """Same index, same name; one socket buffer per publisher homed at the broker.

        Runs after every ``prepare`` (the hosts mechanism's fills ``ctx.shared_cpu``)."""
        for b in ctx.brokers:
            p = ctx.params(b)
            if p.overload is None:
                continue
            if b in ctx.shared_cpu:
                raise ConfigError(f"{b}.overload", "set", "unset for a broker sharing its host's CPU")
            if p.io is not None:
                continue
            connections = publisher_connections(ctx, b)
            ctx.replace_station(
                StationKey.broker(b),
                FlowControlBrokerStation(
                    f"broker:{b}",
                    p,
                    connections=connections,
                    filters=len(ctx.tables[b]),
                    streams=ctx.streams,
                    window=ctx.window,
                ),
            )


OVERLOAD = Overload()
