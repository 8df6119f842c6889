"""Link parameters.

A link is a FIFO transmit queue (optionally finite, drop-tail) served at
``bandwidth_Bps``, followed by propagation ``latency_s`` plus a jitter draw;
delivery order is kept (TCP), so a jitter draw never lets a message overtake
the one before it. A sent message is lost with ``loss_probability`` after it
used the transmitter (a lossy datagram link; over TCP, set it to 0 and model
retransmission delay as jitter).

Serialization time = (payload + protocol framing + ``overhead_bytes``) /
``bandwidth_Bps``; framing is the middleware's per-message header (MQTT fixed
header, topic, ...; see :mod:`models.protocol`), ``overhead_bytes`` the lower
layers' per-message bytes (TCP/IP 40, Ethernet 38 with preamble and gap).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from sim.distributions import Constant, Distribution
from sim.errors import ConfigError

from .params import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["LinkParams"]


@dataclass(frozen=True, kw_only=True)
class LinkParams:
    """A point-to-point link, used in both directions with the same parameters.

    Parameters
    ----------
    latency_s : float
        One-way propagation delay, s.
    bandwidth_Bps : float
        Bytes per second (``inf``: no serialization delay).
    overhead_bytes : int
        Lower-layer bytes added to every message.
    jitter_s : Distribution
        Extra delay per message, s.
    loss_probability : float
        Probability that a sent message is lost.
    queue_messages, queue_bytes : int or None
        Transmit queue limit (including the message being sent), drop-tail.
    provenance : Provenance
    """

    latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    bandwidth_Bps: float = field(default=math.inf, metadata={"unit": "bandwidth"})
    overhead_bytes: int = field(default=0, metadata={"unit": "size"})
    jitter_s: Distribution = field(default=Constant(value=0.0), metadata={"unit": "duration_dist"})
    loss_probability: float = field(default=0.0, metadata={"unit": "probability"})
    queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    queue_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self):
        check_fields(self)
        if not self.bandwidth_Bps > 0:
            raise ConfigError("bandwidth_Bps", self.bandwidth_Bps, "a rate > 0")

    def serialization_s(self, wire_bytes):
        """Time to put ``wire_bytes`` on the link, s."""
        return wire_bytes / self.bandwidth_Bps
