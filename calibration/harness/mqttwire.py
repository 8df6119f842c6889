"""A minimal MQTT 3.1.1 codec for the load generator (no paho: it saturates first).

Only what the harness needs: CONNECT (client id, clean session, keep-alive),
SUBSCRIBE, PUBLISH (QoS 0/1, retain), PUBACK, PINGREQ, DISCONNECT; an
incremental decoder (:class:`MqttStream`) and a blocking socket helper
(:func:`connect`).

Hot paths allocate nothing per message:

- :class:`PublishTemplate` is one encoded PUBLISH packet in a ``bytearray``
  whose packet id and payload header bytes are patched in place
  (``struct.pack_into``) before each write;
- :meth:`MqttStream.feed_records` copies the first bytes of every PUBLISH
  payload (the harness's message header) and the receive time straight into
  a preallocated record buffer instead of building one object per message.
"""
from __future__ import annotations

import socket
import struct
import time
from typing import NamedTuple

__all__ = [
    "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "SUBSCRIBE", "SUBACK", "PINGREQ", "PINGRESP",
    "DISCONNECT", "MAX_REMAINING_LENGTH", "MqttError", "Packet",
    "encode_remaining_length", "decode_remaining_length",
    "encode_connect", "encode_subscribe", "encode_publish", "encode_puback", "encode_pingreq",
    "encode_disconnect", "PublishTemplate", "MqttStream", "connect", "subscribe",
]

CONNECT, CONNACK, PUBLISH, PUBACK = 1, 2, 3, 4
SUBSCRIBE, SUBACK = 8, 9
PINGREQ, PINGRESP, DISCONNECT = 12, 13, 14

MAX_REMAINING_LENGTH = 268_435_455  # four varint bytes

_CONNACK_CODES = {1: "unacceptable protocol version", 2: "identifier rejected", 3: "server unavailable",
                  4: "bad user name or password", 5: "not authorized"}


class MqttError(RuntimeError):
    """A protocol error: malformed packet, refused connection or subscription."""


class Packet(NamedTuple):
    """A decoded control packet.

    ``topic`` is set for PUBLISH only (``str``); ``payload`` is the
    application payload of a PUBLISH, the 2-byte variable header of a
    CONNACK (session present, return code) and the return codes of a SUBACK
    (``bytes``); ``packet_id`` is set for PUBLISH with QoS > 0, PUBACK and
    SUBACK, otherwise None.
    """

    type: int
    flags: int
    topic: str | None
    payload: bytes
    packet_id: int | None


def encode_remaining_length(n):
    """The remaining-length varint: 7 bits per byte, low bits first."""
    if not 0 <= n <= MAX_REMAINING_LENGTH:
        raise ValueError(f"remaining length {n} outside 0..{MAX_REMAINING_LENGTH}")
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | 0x80 if n else byte)
        if not n:
            return bytes(out)


def decode_remaining_length(buf, pos=0, end=None):
    """``(value, position after the varint)``, or None when ``buf`` ends inside it.

    Raises :class:`MqttError` on a varint longer than four bytes.
    """
    end = len(buf) if end is None else end
    value = shift = 0
    for i in range(4):
        if pos + i >= end:
            return None
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos + i + 1
        shift += 7
    raise MqttError("malformed remaining length (more than 4 bytes)")


def _str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    if len(b) > 0xFFFF:
        raise ValueError("MQTT string longer than 65535 bytes")
    return struct.pack("!H", len(b)) + b


def _packet(first_byte, body):
    return bytes([first_byte]) + encode_remaining_length(len(body)) + body


def encode_connect(client_id, *, clean_session=True, keepalive=60, username=None, password=None):
    """CONNECT, protocol level 4 (3.1.1), no will; user name / password only when given.

    A password needs a user name (MQTT 3.1.1 section 3.1.2.9).
    """
    if not 0 <= keepalive <= 0xFFFF:
        raise ValueError(f"keepalive {keepalive} outside 0..65535 s")
    if password is not None and username is None:
        raise ValueError("an MQTT password needs a user name")
    flags = (0x02 if clean_session else 0x00) | (0x80 if username is not None else 0) \
        | (0x40 if password is not None else 0)
    body = _str("MQTT") + bytes([4, flags]) + struct.pack("!H", keepalive) + _str(client_id)
    body += b"".join(_str(x) for x in (username, password) if x is not None)
    return _packet(CONNECT << 4, body)


def encode_subscribe(packet_id, topic_filters, qos=0):
    """SUBSCRIBE to one filter (``str``) or several (iterable of ``str``), all at ``qos``."""
    if isinstance(topic_filters, (str, bytes)):
        topic_filters = [topic_filters]
    if qos not in (0, 1, 2):
        raise ValueError(f"qos {qos} not in 0, 1, 2")
    body = struct.pack("!H", packet_id) + b"".join(_str(f) + bytes([qos]) for f in topic_filters)
    return _packet((SUBSCRIBE << 4) | 0x02, body)


def encode_publish(topic, payload, *, qos=0, packet_id=None, retain=False, dup=False):
    """PUBLISH; ``packet_id`` (1..65535) is required for QoS 1."""
    if qos not in (0, 1):
        raise ValueError(f"qos {qos} not supported (0 or 1)")
    head = (PUBLISH << 4) | (qos << 1) | (0x01 if retain else 0) | (0x08 if dup else 0)
    body = _str(topic)
    if qos:
        if packet_id is None or not 1 <= packet_id <= 0xFFFF:
            raise ValueError(f"QoS 1 needs a packet id in 1..65535, got {packet_id!r}")
        body += struct.pack("!H", packet_id)
    return _packet(head, body + bytes(payload))


def encode_puback(packet_id):
    return struct.pack("!BBH", PUBACK << 4, 2, packet_id)


def encode_pingreq():
    return bytes([PINGREQ << 4, 0])


def encode_disconnect():
    return bytes([DISCONNECT << 4, 0])


class PublishTemplate:
    """One PUBLISH packet, encoded once, patched in place for every message.

    ``buf`` is the whole packet (``bytearray``); the payload starts at
    ``payload_offset``. :meth:`patch` writes values with a ``struct`` format
    at an offset inside the payload, and :meth:`set_packet_id` the QoS 1
    packet id, without allocating. Writing ``buf`` (or a ``memoryview`` of
    it) to the socket sends the message.

    Parameters
    ----------
    topic : str
    payload_bytes : int
        Payload length; the payload is zero-filled until patched.
    qos : int
        0 or 1 (QoS 1 reserves a packet id, initially 1).
    retain : bool
    """

    def __init__(self, topic, payload_bytes, *, qos=0, retain=False):
        self.qos = qos
        pkt = encode_publish(topic, bytes(payload_bytes), qos=qos, packet_id=1 if qos else None,
                             retain=retain)
        self.buf = bytearray(pkt)
        self.payload_offset = len(pkt) - payload_bytes
        self.packet_id_offset = self.payload_offset - 2 if qos else None

    def __len__(self):
        return len(self.buf)

    def patch(self, fmt, offset, *values):
        """``struct.pack_into(fmt, buf, payload_offset + offset, *values)``."""
        struct.pack_into(fmt, self.buf, self.payload_offset + offset, *values)

    def set_packet_id(self, packet_id):
        struct.pack_into("!H", self.buf, self.packet_id_offset, packet_id)


class MqttStream:
    """Incremental decoder of the server-to-client byte stream.

    :meth:`feed` takes whatever ``recv`` returned (a packet may be split
    across reads, a read may hold several packets) and returns the complete
    packets as :class:`Packet` tuples; an incomplete tail is kept for the
    next call.
    """

    def __init__(self):
        self._buf = bytearray()
        #: packets read by :func:`connect` / :func:`subscribe` while waiting for another type
        self.backlog = []

    @property
    def pending(self):
        """Bytes of an incomplete packet kept for the next feed."""
        return len(self._buf)

    def feed(self, data):
        buf = self._buf
        buf += data
        out = []
        pos, end = 0, len(buf)
        while end - pos >= 2:
            rl = decode_remaining_length(buf, pos + 1, end)
            if rl is None:
                break
            length, start = rl
            stop = start + length
            if stop > end:
                break
            out.append(_decode(buf[pos] >> 4, buf[pos] & 0x0F, bytes(buf[start:stop])))
            pos = stop
        del buf[:pos]
        return out

    def feed_records(self, data, t_recv_ns, records, offset, *, header_bytes, stride, ack_ids=None):
        """Fast path for received PUBLISH packets: copy headers into a record buffer.

        For every complete PUBLISH, the first ``header_bytes`` bytes of its
        payload go to ``records[offset:offset + header_bytes]`` followed by
        ``t_recv_ns`` as a little-endian int64; ``offset`` advances by
        ``stride``. The caller guarantees room for every PUBLISH in ``data``
        (at most ``(pending + len(data)) // (4 + header_bytes)`` of them).
        A payload shorter than ``header_bytes`` raises :class:`MqttError`.

        Returns ``(new offset, other packets)``: non-PUBLISH packets decoded
        as by :meth:`feed`. Packet ids of QoS 1 PUBLISHes (to acknowledge)
        are appended to ``ack_ids`` when given.
        """
        buf = self._buf
        buf += data
        others = []
        pos, end = 0, len(buf)
        pack_t = _PACK_T
        while end - pos >= 2:
            b1 = buf[pos + 1]
            if b1 < 0x80:
                length, start = b1, pos + 2
            else:
                rl = decode_remaining_length(buf, pos + 1, end)
                if rl is None:
                    break
                length, start = rl
            stop = start + length
            if stop > end:
                break
            head = buf[pos]
            if head >> 4 == PUBLISH:
                p = start + 2 + ((buf[start] << 8) | buf[start + 1])
                if head & 0x06:
                    if ack_ids is not None:
                        ack_ids.append((buf[p] << 8) | buf[p + 1])
                    p += 2
                if stop - p < header_bytes:
                    raise MqttError(f"PUBLISH payload of {stop - p} bytes, shorter than the "
                                    f"{header_bytes}-byte header")
                records[offset:offset + header_bytes] = buf[p:p + header_bytes]
                pack_t(records, offset + header_bytes, t_recv_ns)
                offset += stride
            else:
                others.append(_decode(head >> 4, head & 0x0F, bytes(buf[start:stop])))
            pos = stop
        del buf[:pos]
        return offset, others


_PACK_T = struct.Struct("<q").pack_into


def _decode(ptype, flags, body):
    if ptype == PUBLISH:
        if len(body) < 2:
            raise MqttError("PUBLISH without a topic")
        tlen = (body[0] << 8) | body[1]
        p = 2 + tlen
        topic = body[2:p].decode()
        packet_id = None
        if flags & 0x06:
            packet_id = (body[p] << 8) | body[p + 1]
            p += 2
        return Packet(PUBLISH, flags, topic, body[p:], packet_id)
    if ptype in (PUBACK, SUBACK) or (ptype in (5, 6, 7, 11) and len(body) >= 2):
        return Packet(ptype, flags, None, body[2:], (body[0] << 8) | body[1])
    return Packet(ptype, flags, None, body, None)


def _recv_packet(sock, stream, want, deadline):
    """Read until a packet of type ``want`` arrives; others go to ``stream.backlog``."""
    while True:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise TimeoutError(f"no MQTT packet of type {want} before the deadline")
        sock.settimeout(timeout)
        data = sock.recv(65536)
        if not data:
            raise MqttError("connection closed by the broker")
        found = None
        for pkt in stream.feed(data):
            if pkt.type == want and found is None:
                found = pkt
            else:
                stream.backlog.append(pkt)
        if found is not None:
            return found


def connect(port, client_id, *, host="127.0.0.1", keepalive=60, clean_session=True, timeout_s=5.0,
            username=None, password=None):
    """A TCP socket (TCP_NODELAY) with an accepted MQTT session.

    Sends CONNECT, waits for CONNACK; returns ``(socket, MqttStream)`` with
    the socket back in blocking mode. Raises :class:`MqttError` when the
    broker refuses the connection, ``TimeoutError`` after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = MqttStream()
        sock.sendall(encode_connect(client_id, clean_session=clean_session, keepalive=keepalive,
                                    username=username, password=password))
        ack = _recv_packet(sock, stream, CONNACK, deadline)
        code = ack.payload[1] if len(ack.payload) >= 2 else -1
        if code != 0:
            raise MqttError(f"CONNACK refused: {_CONNACK_CODES.get(code, code)}")
        sock.settimeout(None)
        return sock, stream
    except BaseException:
        sock.close()
        raise


def subscribe(sock, stream, topic_filters, *, qos=0, packet_id=1, timeout_s=5.0):
    """SUBSCRIBE and wait for the SUBACK; returns the granted QoS per filter.

    Raises :class:`MqttError` when a filter is refused (return code 0x80).
    """
    filters = [topic_filters] if isinstance(topic_filters, str) else list(topic_filters)
    sock.sendall(encode_subscribe(packet_id, filters, qos))
    ack = _recv_packet(sock, stream, SUBACK, time.monotonic() + timeout_s)
    sock.settimeout(None)
    granted = list(ack.payload)
    if len(granted) != len(filters) or 0x80 in granted:
        raise MqttError(f"SUBACK refused {filters}: return codes {granted}")
    return granted
