"""I/O-cycle structure of a multi-threaded broker (:mod:`pubsim.models.mechanisms.iothreads`).

NATS and a ZeroMQ proxy do not pay one wake-up per message: a reading thread
takes everything its socket holds, routes it into per-connection output
buffers, and each buffer is flushed once per pass (nats-server 2.9.10
``server/client.go``: ``readLoop`` parses a whole read buffer and then
``flushClients`` writes each pending connection once; libzmq 4.3.5
``stream_engine_base.cpp`` ``out_event`` encodes queued messages into one
8 KiB batch per ``write``). The CPU of one pass is a fixed part (wake-up,
``read``), a part per connection flushed (``writev``) and the messages' own
routing costs, so CPU per message falls with load and a broker capped below
that per-pass cost reaches its quota long before its message limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["IoParams"]


@dataclass(frozen=True, kw_only=True)
class IoParams:
    """Costs of one I/O cycle of a broker (CPU seconds of one core).

    A cycle starts when a message arrives after the current cycle began
    (everything that arrived while a cycle ran is read by the next one, as
    one ``read`` returns all that is buffered); it costs
    ``cycle_cost_s + flush_cost_s x copies`` (copies of the message that
    opened it: the connections it writes to) besides the messages' own
    demands, served after the cycle's last member (the flush follows the
    routing of a whole read buffer): it delays the next cycle and uses CPU
    (and quota), not the messages of its own cycle.

    Parameters
    ----------
    cycle_cost_s : float
        Fixed CPU per cycle: wake-up of the I/O thread(s), thread hand-offs,
        the ``read`` system call, s.
    flush_cost_s : float
        CPU per output connection flushed in a cycle (one ``writev``), s.
    cycle_max_messages : int or None
        Most messages one cycle reads (a read buffer's worth: nats-server
        reads at most 64 KiB, libzmq 8 KiB per batch); later ones open the
        next cycle. None (default) = no limit.
    cycle_max_bytes : float or None
        Most bytes one cycle reads, each message counted as its payload plus
        ``message_overhead_bytes``; a message that would overflow it opens
        the next cycle (the first member always fits). nats-server 2.9.10
        reads each connection into a buffer of at most 64 KiB
        (``server/client.go`` ``maxBufSize``; measured past the limit on
        ``data/brokers-wire``: 15.5-719 messages per ``read`` for 4 KiB-64 B,
        64 KiB over their wire size within 2-8 %). None (default) = no limit.
    message_overhead_bytes : float
        Bytes a message occupies in a read beyond its payload (protocol
        framing: NATS ``PUB <subject> <size>\r\n`` and the closing
        ``\r\n``), for ``cycle_max_bytes``.
    cycle_max_per_connection : int or None
        Most messages one cycle reads from one client connection; a further
        one waits for the next cycle. Mosquitto 2.0 reads one packet per
        ready connection per pass of its event loop (``src/mux_epoll.c``
        ``mux_epoll__handle`` calls ``loop_handle_reads_writes`` once per
        ready descriptor, which calls ``lib/packet_mosq.c`` ``packet__read``
        once), so its passes are shared only by messages of different
        connections: 1. A pass then reads, from every connection with data
        at its start, its first message(s); the others wait for later
        passes, so messages of different connections leave out of arrival
        order (:class:`pubsim.models.mechanisms.iothreads.passes.PassDiscipline`).
        None (default) = no limit (a read takes all that is buffered, as
        nats-server and libzmq do).
    provenance : Provenance
    """

    cycle_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    flush_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    cycle_max_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    cycle_max_bytes: float | None = field(default=None, metadata={"unit": "optional_size"})
    message_overhead_bytes: float = field(default=0.0, metadata={"unit": "size"})
    cycle_max_per_connection: int | None = field(default=None, metadata={"unit": "optional_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("cycle_max_messages", "cycle_max_per_connection"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(name, value, "at least 1 message, or unset")
        if self.cycle_max_bytes is not None and not self.cycle_max_bytes > 0:
            raise ConfigError("cycle_max_bytes", self.cycle_max_bytes, "more than 0 bytes, or unset")
        if self.cycle_max_bytes is not None and self.cycle_max_per_connection is not None:
            raise ConfigError(
                "cycle_max_bytes",
                self.cycle_max_bytes,
                "unset with cycle_max_per_connection (passes read whole packets per connection)",
            )

    def cost_s(self, copies: Any) -> Any:
        """Cost of a cycle opened by a message with ``copies`` copies (number or array), s."""
        return self.cycle_cost_s + self.flush_cost_s * copies
