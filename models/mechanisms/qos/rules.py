"""Delivery guarantees per hop: MQTT QoS 0/1/2 and AMQP acknowledgements.

A hop (uplink, bridge, downlink) carries each message at an effective QoS:
the publisher's QoS on its uplink and on bridges, and ``min(publish QoS,
granted QoS)`` on a subscriber's downlink (OASIS MQTT 3.1.1, §3.8.4: the
broker delivers at the lower of the two). Handshake packets per message
(MQTT 3.1.1 §4.3; each is a 2-byte fixed header + 2-byte packet id = 4 bytes):

====  ==========================  ====================  =================
QoS   forward (with the message)  reverse               receiver delivers
====  ==========================  ====================  =================
0     -                           -                     on PUBLISH
1     -                           PUBACK                on PUBLISH
2     PUBREL                      PUBREC, PUBCOMP       on PUBREL
====  ==========================  ====================  =================

QoS 2 receivers deliver on PUBREL ("method B" of MQTT 3.1.1 Fig. 4.3): the
behaviour of Mosquitto (incoming messages are released to subscribers on
PUBREL) and of Eclipse Paho Python (``on_message`` is called on PUBREL).
AMQP 0-9-1 has one level of acknowledgement: ``qos: 1`` is a consumer in
manual-ack mode (``basic.ack``, 21 bytes: 8-byte frame envelope, 4 bytes of
class/method, 8-byte delivery tag, 1 flags byte; AMQP 0-9-1 §4.2, §1.8.3.13)
or a publisher with confirms; QoS 2 does not exist there. Consumer acks do
not depend on publisher confirms: an AMQP downlink runs at the consumer's
level whatever the publisher's.

Assumptions (stated, shown with the parameters):

* Reverse-direction handshake packets travel on the link's other direction,
  which carries nothing else on a client link (full duplex, no contention):
  they add ``latency_s + wire bytes / bandwidth_Bps`` (no jitter) to the
  sender's round trip, not to the receiver's delivery time (except PUBREC
  before a QoS 2 delivery). Forward ones (PUBREL) take the transmitter.
* Retransmission (MQTT 3.1.1 §4.4 retries unacknowledged packets; Mosquitto
  up to 1.x resent after ``retry_interval``, 20 s by default,
  mosquitto.conf(5)): on a link with ``loss_probability`` p every packet of
  a QoS > 0 exchange is lost independently with p and the sender resends
  after ``retry_timeout_s``; QoS > 0 messages are never lost. The
  transmitter time of all attempts is charged when the message is first
  sent (the link's capacity falls by the mean number of attempts; resends do
  not queue behind later messages).
* A QoS 1 receiver that gets the PUBLISH again after its PUBACK was lost
  delivers it again: a *duplicate*, counted per link; a duplicate is not an
  egress delivery (SYSTEMS.md §4 counts a message once per subscriber). QoS 2
  receivers recognise the packet id: no duplicates.
"""

from __future__ import annotations

import numpy as np

from ....sim.errors import ConfigError

__all__ = ["QOS_LEVELS", "ACK_BYTES", "handshake_packets", "forward_packets", "exchange_draws", "check_protocol_qos"]

QOS_LEVELS = (0, 1, 2)

#: Bytes of one handshake packet above the lower layers, per protocol.
ACK_BYTES = {"mqtt": 4, "amqp": 21, "none": 0}

#: Handshake packets per message besides the PUBLISH, per QoS (both directions).
_HANDSHAKE = np.array([0, 1, 3], dtype=np.int64)
#: Of those, packets in the message's own direction (QoS 2: PUBREL).
_FORWARD = np.array([0, 0, 1], dtype=np.int64)


def handshake_packets(qos):
    """Handshake packets of one exchange at QoS ``qos`` (array or int), both directions."""
    return _HANDSHAKE[np.asarray(qos, dtype=np.int64)]


def forward_packets(qos):
    """Handshake packets sent in the message's direction (QoS 2: PUBREL)."""
    return _FORWARD[np.asarray(qos, dtype=np.int64)]


def check_protocol_qos(protocol, qos, field):
    """One-line error for a QoS the protocol cannot carry."""
    if qos == 0:
        return
    if protocol not in ACK_BYTES:
        raise ConfigError(field, qos, f"0 with protocol {protocol} (it has no acknowledgements)")
    if protocol == "amqp" and qos == 2:
        raise ConfigError(field, qos, "0 or 1 with protocol amqp (AMQP 0-9-1 has one ack level)")


def _geometric(u, p):
    """Attempts until the first success (>= 1) when each fails with ``p``, from U(0,1] draws."""
    if p <= 0.0:
        return np.ones(len(u), dtype=np.int64)
    return 1 + np.floor(np.log(u) / np.log(p)).astype(np.int64)


def exchange_draws(u_first, u_dups, take_more, p):
    """One request/acknowledgement exchange on a lossy link, per message.

    The sender sends, and resends after each timeout without an
    acknowledgement; request and acknowledgement are each lost with ``p``.

    Parameters
    ----------
    u_first, u_dups : numpy.ndarray
        U(0, 1] draws, one per message.
    take_more : callable
        ``take_more(n)`` returns ``n`` more U(0, 1] draws (one per resend
        after a lost acknowledgement), consumed in message order.
    p : float
        Loss probability of each packet.

    Returns
    -------
    first, later, dups : numpy.ndarray of int
        ``first``: attempts until the request first arrives (geometric,
        mean 1/(1-p)); ``dups``: acknowledgements lost after an arrival
        (geometric from 0, mean p/(1-p)), each costing a resend that
        arrives again; ``later``: attempts after the first arrival (sum of
        ``dups`` geometric variables), so the exchange ends
        ``first - 1 + later`` timeouts after the first send.
    """
    first = _geometric(u_first, p)
    dups = first - 1 if p <= 0 else _geometric(u_dups, p) - 1
    total = int(dups.sum())
    if total == 0:
        return first, np.zeros_like(first), dups
    each = _geometric(take_more(total), p)
    owner = np.repeat(np.arange(len(dups)), dups)
    later = np.bincount(owner, weights=each, minlength=len(dups)).astype(np.int64)
    return first, later, dups
