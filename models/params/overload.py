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
    receive_window_bytes : int or None
        Bytes one connection holds unread before its publisher's TCP window
        closes (the broker's receive buffer), bytes; at most
        ``socket_buffer_bytes``. None: flow control costs the broker nothing.
    flow_control_cost_s, flow_control_cost_s_per_byte : float
        CPU the broker spends per message, and per byte of it (payload plus
        overhead), admitted while its connections hold more than
        ``receive_window_bytes`` each (pooled), s and s/B; >= 0. Past that
        point the publishers' sending is clocked by the broker's window
        updates, and on loopback the publisher's transmit and the receive of
        its segments run in the broker's softirq, on the broker's CPU
        (measured: ``calibration/README.md``, "Flow control moves the
        publishers' sending onto the broker's core").
    provenance : Provenance
    """

    socket_buffer_bytes: int = field(metadata={"unit": "size"})
    message_overhead_bytes: int = field(default=0, metadata={"unit": "size"})
    receive_window_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    flow_control_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    flow_control_cost_s_per_byte: float = field(default=0.0, metadata={"unit": "float"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if self.socket_buffer_bytes <= 0:
            raise ConfigError("socket_buffer_bytes", self.socket_buffer_bytes, "a buffer > 0 bytes")
        self._check_flow_control()

    def _check_flow_control(self) -> None:
        for name in ("flow_control_cost_s", "flow_control_cost_s_per_byte"):
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), "a cost >= 0")
        window = self.receive_window_bytes
        if window is None:
            if self.flow_control_cost_s or self.flow_control_cost_s_per_byte:
                raise ConfigError("receive_window_bytes", window, "set when a flow-control cost is")
            return
        if not 0 < window <= self.socket_buffer_bytes:
            raise ConfigError(
                "receive_window_bytes", window, f"> 0 and at most socket_buffer_bytes ({self.socket_buffer_bytes})"
            )

    @property
    def flow_control(self) -> bool:
        """Whether messages admitted past the receive windows cost the broker more."""
        return self.receive_window_bytes is not None and bool(
            self.flow_control_cost_s or self.flow_control_cost_s_per_byte
        )

    def buffer_bytes(self, connections: int) -> int:
        """Bytes the broker's ``connections`` publisher connections hold together (at least one connection)."""
        return max(int(connections), 1) * self.socket_buffer_bytes

    def window_bytes(self, connections: int) -> int | None:
        """Bytes the broker's ``connections`` publisher connections hold before their windows close
        (at least one connection); None without ``receive_window_bytes``."""
        if self.receive_window_bytes is None:
            return None
        return max(int(connections), 1) * self.receive_window_bytes
