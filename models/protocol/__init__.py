"""Per-message framing bytes of the middleware protocols.

Each function returns the bytes a protocol adds to a payload of
``payload_bytes`` published on a topic of ``topic_bytes`` bytes, as arrays.

* MQTT 3.1.1 PUBLISH (OASIS MQTT 3.1.1, §2.2 and §3.3): 1 byte of fixed
  header, 1-4 bytes of remaining length, 2 + topic bytes of topic name, and a
  2-byte packet identifier when QoS > 0.
* AMQP 0-9-1 basic.publish (AMQP 0-9-1 spec, §4.2): a method frame
  (7-byte header + 1 end byte around class/method ids, reserved short,
  exchange and routing key short strings, flags), a content header frame
  (7 + 14 + 1 with empty properties) and a body frame (7 + 1):
  48 bytes + exchange + routing key. The exchange is assumed to be
  ``amq.topic`` (9 bytes).
* ZeroMQ ZMTP 3.0 (RFC 23/ZMTP): a topic frame and a body frame, each with
  1 flag byte and a 1-byte (<= 255) or 8-byte size.
* ``none``: no framing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["framing_bytes", "wire_bytes", "needs_topic", "mqtt_length_bytes", "PROTOCOLS"]


def _mqtt_remaining_length_bytes(remaining):
    return 1 + (remaining >= 128) + (remaining >= 16_384) + (remaining >= 2_097_152)


def _mqtt_variable_header(topic_bytes, qos):
    """A PUBLISH's variable header: topic name with its 2-byte length, packet identifier when QoS > 0."""
    return 2 + topic_bytes + (2 if qos > 0 else 0)


def mqtt_length_bytes(payload_bytes, topic_bytes, qos=0):
    """Bytes of a PUBLISH's remaining-length field (1 to 4; int64 array).

    MQTT 3.1.1 §2.2.3: 7 bits per byte, so a remaining length (topic name
    with its 2-byte length, packet identifier when QoS > 0, payload) below
    128 B takes one byte, below 16 KiB two, below 2 MiB three.

    Parameters
    ----------
    payload_bytes, topic_bytes : int or array of int
        Payload and topic name sizes, bytes.
    qos : int
        QoS of the PUBLISH (a packet identifier when > 0).
    """
    payload = np.asarray(payload_bytes, dtype=np.int64)
    variable = _mqtt_variable_header(np.asarray(topic_bytes, dtype=np.int64), qos)
    return np.asarray(_mqtt_remaining_length_bytes(variable + payload), dtype=np.int64)


def mqtt_framing(payload_bytes, topic_bytes, qos=0):
    variable = _mqtt_variable_header(topic_bytes, qos)
    return 1 + _mqtt_remaining_length_bytes(variable + payload_bytes) + variable


def amqp_framing(payload_bytes, topic_bytes, exchange_bytes=9):
    return 48 + exchange_bytes + topic_bytes + 0 * payload_bytes


def zmtp_framing(payload_bytes, topic_bytes):
    def frame(n):
        return 1 + np.where(n > 255, 8, 1)

    return frame(topic_bytes) + topic_bytes + frame(payload_bytes)


def none_framing(payload_bytes, topic_bytes):
    return 0 * payload_bytes


PROTOCOLS = {"mqtt": mqtt_framing, "amqp": amqp_framing, "zmq": zmtp_framing, "none": none_framing}


def framing_bytes(protocol, payload_bytes, topic_bytes):
    """Framing bytes per message (array), for ``protocol`` in :data:`PROTOCOLS`."""
    payload = np.asarray(payload_bytes, dtype=np.int64)
    topic = np.asarray(topic_bytes, dtype=np.int64)
    return np.asarray(PROTOCOLS[protocol](payload, topic), dtype=np.int64)


#: Protocols whose framing does not depend on the topic.
_NO_TOPIC = frozenset({"none"})


def needs_topic(protocol):
    """Whether :func:`wire_bytes` reads the topic length for ``protocol``."""
    return protocol not in _NO_TOPIC


def wire_bytes(protocol, payload_bytes, topic_bytes, overhead_bytes):
    """Bytes each message puts on the wire (int64 array): payload, the protocol's
    framing and the connection's per-message ``overhead_bytes`` (lower layers;
    a number or an array). ``topic_bytes`` may be None when not
    :func:`needs_topic`. The one formula of a link and a host's network card."""
    payload = np.asarray(payload_bytes, dtype=np.int64)
    if protocol in _NO_TOPIC:
        return payload + overhead_bytes
    return payload + framing_bytes(protocol, payload, topic_bytes) + overhead_bytes
