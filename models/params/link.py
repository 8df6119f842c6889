"""Link parameters.

A link is a FIFO transmit queue (optionally finite, drop-tail) served at
``bandwidth_Bps``, followed by propagation ``latency_s`` plus a jitter draw;
delivery order is kept (TCP), so a jitter draw never lets a message overtake
the one before it. A sent message is lost with ``loss_probability`` after it
used the transmitter (a lossy datagram link; over TCP, set it to 0 and model
retransmission delay as jitter).

Serialization time = (payload + protocol framing + ``overhead_bytes``) /
``bandwidth_Bps``; framing is the middleware's per-message header (MQTT fixed
header, topic, ...; see :mod:`pubsim.models.protocol`), ``overhead_bytes`` the lower
layers' per-message bytes (TCP/IP 40, Ethernet 38 with preamble and gap).

Priority channels (YAMI4, SYSTEMS.md §1): with ``scheduling="priority"`` the
transmit queue is one outgoing queue per connection ordered by message
priority (higher first; YAMI4 uses 0 = lowest .. 2 = highest, any integer is
accepted), FIFO within a priority, non-preemptive: the message being sent
finishes first. Priorities only change the order when messages wait (a slow
receiver, a saturated link); on an idle channel delivery is FIFO.
``overflow`` is what a full transmit queue does (:class:`pubsim.sim.disciplines.Overflow`).

Who pays the jitter (``jitter_on``): with ``every_packet`` (the default) each
message leaves at ``max(sent + latency_s + its jitter draw, the previous
message's arrival)``, so a burst of k messages sent together arrives at the
largest of k draws. With ``idle_receiver`` the jitter is the receiver's
wake-up: a message that reaches the far end (``sent + latency_s``) while the
previous one has not arrived yet (the receiver is still waking up or
reading) is read with it and arrives at the same time, without a draw of its
own; only a message that finds the receiver idle (``sent + latency_s >=``
the previous arrival) pays its draw. One draw is still taken per message in
both modes (unused when the receiver is busy), so the draw streams, and the
engines that share them, stay the same. Connections with QoS > 0 and frame
channels model their propagation themselves and take ``every_packet`` only
(refused otherwise: :mod:`pubsim.models.params.features`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...sim.disciplines import Overflow
from ...sim.distributions import Constant, Distribution
from ...sim.errors import ConfigError
from .features import refuse
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["LinkParams", "JITTER_ON"]

#: Values of ``LinkParams.jitter_on`` (see the module notes).
JITTER_ON = ("every_packet", "idle_receiver")


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
        Transmit queue limit (including the message being sent).
    scheduling : str
        ``fifo`` (arithmetic fast path) or ``priority`` (a priority channel:
        messages wait by their priority, see the module notes).
    overflow : str
        What a full transmit queue does: ``drop_newest`` (drop-tail, the
        default), ``reject``, ``drop_oldest``/``ring``, ``update`` or
        ``backpressure`` (FIFO only); see :class:`pubsim.sim.disciplines.Overflow`.
        ``flow_to_disk`` is a broker policy (``BrokerParams.client_overflow``).
    jitter_on : str
        ``every_packet`` (default: every message draws its own jitter) or
        ``idle_receiver`` (only a message that finds the receiver idle pays
        its jitter; see the module notes).
    provenance : Provenance
    """

    latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    bandwidth_Bps: float = field(default=math.inf, metadata={"unit": "bandwidth"})
    overhead_bytes: int = field(default=0, metadata={"unit": "size"})
    jitter_s: Distribution = field(default=Constant(value=0.0), metadata={"unit": "duration_dist"})
    loss_probability: float = field(default=0.0, metadata={"unit": "probability"})
    queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    queue_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    scheduling: str = field(default="fifo", metadata={"unit": "choice", "choices": ("fifo", "priority")})
    overflow: str = field(default=Overflow.DROP_NEWEST, metadata={"unit": "choice", "choices": Overflow.ALL})
    jitter_on: str = field(default="every_packet", metadata={"unit": "choice", "choices": JITTER_ON})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.bandwidth_Bps > 0:
            raise ConfigError("bandwidth_Bps", self.bandwidth_Bps, "a rate > 0")
        if self.overflow == Overflow.FLOW_TO_DISK:
            raise ConfigError(
                "overflow",
                self.overflow,
                "a link policy other than flow_to_disk (a broker's client_overflow can spill to disk)",
            )
        refuse(self, "link")  # pairs of features that do not combine (models.params.features)

    @property
    def idle_receiver(self) -> bool:
        """Does only a message that finds the receiver idle pay its jitter (``jitter_on``)?"""
        return self.jitter_on == "idle_receiver"

    def serialization_s(self, wire_bytes: float) -> float:
        """Time to put ``wire_bytes`` on the link, s."""
        return wire_bytes / self.bandwidth_Bps
