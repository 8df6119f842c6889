"""TCP flow control past a broker's limit (:mod:`pubsim.models.mechanisms.overload`).

What Mosquitto 2.0.11 does past its limit, measured (``calibration/README.md``,
"Past the limit") and read in its source: its one event loop reads at most
one packet per readable connection per ``epoll_wait`` pass
(``src/mux_epoll.c`` ``loop_handle_reads_writes`` calls ``packet__read``
once; ``lib/packet_mosq.c`` ``packet__read`` reads one packet with plain
``read`` calls, no read-ahead buffer), so what it has not read stays in the
kernel: the publisher's send buffer and the broker's receive buffer of that
TCP connection. When those are full the publisher's blocking ``send``
waits (TCP flow control): ingress falls to what the broker reads, nothing is
lost, the broker keeps working at its CPU limit, and the latency of a
message stamped at its send levels off at about one buffer's worth of
messages over the broker's throughput. QoS 0 copies for connected
subscribers are never queued past ``max_queued_messages`` (``src/database.c``
``db__ready_for_flight``: dropped only when the client's ``out_packet_count``
reaches it; the harness sets 1,000,000) and keep-alive cannot expire during a
run (the harness's clients ask for at least 60 s, ``src/keepalive.c`` checks
1.5 x that), so neither drops nor disconnections shape the overload.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["OverloadParams"]


@dataclass(frozen=True, kw_only=True)
class OverloadParams:
    """Bounded socket buffers between a broker's publishers and its worker.

    Every publisher connection to the broker holds at most
    ``socket_buffer_bytes`` of messages the broker has taken in but not yet
    served (each counts its payload plus ``message_overhead_bytes``); a
    message that does not fit waits at its publisher until the broker's
    departures make room (back-pressure), and the publisher sends it then:
    its publish time (and so its latency) starts when it is sent, as a
    client stamps a message when its blocking ``send`` returns. The broker's
    connections are pooled (one buffer of ``connections x socket_buffer_bytes``,
    FIFO): exact for publishers sending at equal rates, as in the harness.

    Parameters
    ----------
    socket_buffer_bytes : int
        Bytes one publisher connection holds unread (the sender's send buffer
        plus the broker's receive buffer; Linux autotunes both, up to
        ``tcp_wmem[2]`` and ``tcp_rmem[2]``), bytes; > 0.
    message_overhead_bytes : int
        Bytes a message occupies beyond its payload (protocol framing and the
        kernel's per-segment bookkeeping), bytes; >= 0.
    provenance : Provenance
    """

    socket_buffer_bytes: int = field(metadata={"unit": "size"})
    message_overhead_bytes: int = field(default=0, metadata={"unit": "size"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if self.socket_buffer_bytes <= 0:
            raise ConfigError("socket_buffer_bytes", self.socket_buffer_bytes, "a buffer > 0 bytes")

    def buffer_bytes(self, connections: int) -> int:
        """Bytes the broker's ``connections`` publisher connections hold together (at least one connection)."""
        return max(int(connections), 1) * self.socket_buffer_bytes
