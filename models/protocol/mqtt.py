"""The MQTT 3.1.1 codec of pubsim: one encoder / decoder for every MQTT user.

Used by the measurement harness's load generator and ``$SYS`` reader
(:mod:`pubsim.calibration.harness.mqttwire` adds the blocking socket
client on top) and by the capture reader (:mod:`pubsim.models.loads.readers`).
It lives in the models layer because models must not import calibration.

Encoding: CONNECT (client id, clean session, keep-alive, user name /
password), SUBSCRIBE, PUBLISH (QoS 0/1, retain, dup), PUBACK, PINGREQ,
DISCONNECT. Decoding: the remaining-length varint, every fixed header
(:func:`check_fixed_header`), PUBLISH (lenient :func:`decode_packet` for a
trusted broker, strict :func:`parse_publish` for captures, MQTT 3.1 / 3.1.1 /
5), CONNECT's protocol level (:func:`connect_version`), and an incremental
stream decoder (:class:`MqttStream`). Lengths are in bytes throughout.

Hot paths allocate nothing per message:

- :class:`PublishTemplate` is one encoded PUBLISH packet in a ``bytearray``
  whose packet id and payload header bytes are patched in place
  (``struct.pack_into``) before each write; :func:`patch_packet_ids` numbers
  the QoS 1 packets of a pre-encoded batch in place;
- :meth:`MqttStream.feed_records` copies the first bytes of every PUBLISH
  payload (the harness's message header) and the receive time straight into
  a preallocated record buffer instead of building one object per message.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "CONNECT",
    "CONNACK",
    "PUBLISH",
    "PUBACK",
    "PUBREC",
    "PUBREL",
    "PUBCOMP",
    "SUBSCRIBE",
    "SUBACK",
    "UNSUBSCRIBE",
    "UNSUBACK",
    "PINGREQ",
    "PINGRESP",
    "DISCONNECT",
    "AUTH",
    "TYPE_NAMES",
    "FIXED_FLAGS",
    "MAX_REMAINING_LENGTH",
    "CONNACK_CODES",
    "MqttError",
    "Packet",
    "encode_remaining_length",
    "decode_remaining_length",
    "encode_connect",
    "encode_subscribe",
    "encode_publish",
    "encode_puback",
    "encode_pubrec",
    "encode_pubrel",
    "encode_pubcomp",
    "encode_pingreq",
    "encode_disconnect",
    "decode_packet",
    "check_fixed_header",
    "parse_publish",
    "connect_version",
    "PublishTemplate",
    "patch_packet_ids",
    "MqttStream",
    "record_stamp",
]

CONNECT, CONNACK, PUBLISH, PUBACK = 1, 2, 3, 4
PUBREC, PUBREL, PUBCOMP = 5, 6, 7
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK = 8, 9, 10, 11
PINGREQ, PINGRESP, DISCONNECT, AUTH = 12, 13, 14, 15

#: Control packet type -> name (MQTT 5 adds AUTH, type 15).
TYPE_NAMES = {
    1: "CONNECT",
    2: "CONNACK",
    3: "PUBLISH",
    4: "PUBACK",
    5: "PUBREC",
    6: "PUBREL",
    7: "PUBCOMP",
    8: "SUBSCRIBE",
    9: "SUBACK",
    10: "UNSUBSCRIBE",
    11: "UNSUBACK",
    12: "PINGREQ",
    13: "PINGRESP",
    14: "DISCONNECT",
    15: "AUTH",
}
#: The fixed-header flags every type but PUBLISH must carry (MQTT 3.1.1 section 2.2.2).
FIXED_FLAGS = {1: 0, 2: 0, 4: 0, 5: 0, 6: 2, 7: 0, 8: 2, 9: 0, 10: 2, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0}

MAX_REMAINING_LENGTH = 268_435_455  # four varint bytes

#: CONNACK return code -> reason (MQTT 3.1.1 section 3.2.2.3).
CONNACK_CODES = {
    1: "unacceptable protocol version",
    2: "identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorized",
}


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


def encode_remaining_length(n: int) -> bytes:
    """The remaining-length varint: 7 bits per byte, low bits first.

    Parameters
    ----------
    n : int
        Remaining length, bytes, in ``0 ..`` :data:`MAX_REMAINING_LENGTH`.

    Returns
    -------
    bytes
        1 to 4 bytes.
    """
    if not 0 <= n <= MAX_REMAINING_LENGTH:
        raise ValueError(f"remaining length {n} outside 0..{MAX_REMAINING_LENGTH}")
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | 0x80 if n else byte)
        if not n:
            return bytes(out)


def decode_remaining_length(buf, pos: int = 0, end: int | None = None) -> tuple[int, int] | None:
    """Decode the remaining-length varint at ``buf[pos]``.

    Parameters
    ----------
    buf : bytes-like
    pos : int
        Offset of the varint's first byte.
    end : int or None
        Offset where the valid bytes of ``buf`` end (None: ``len(buf)``).

    Returns
    -------
    (int, int) or None
        ``(remaining length in bytes, offset after the varint)``, or None
        when ``buf`` ends inside the varint.

    Raises
    ------
    MqttError
        A varint longer than four bytes.
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
    raise MqttError("remaining length longer than 4 bytes")


def _str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    if len(b) > 0xFFFF:
        raise ValueError("MQTT string longer than 65535 bytes")
    return struct.pack("!H", len(b)) + b


def _packet(first_byte, body):
    return bytes([first_byte]) + encode_remaining_length(len(body)) + body


def encode_connect(
    client_id: str,
    *,
    clean_session: bool = True,
    keepalive: int = 60,
    username: str | None = None,
    password: str | None = None,
) -> bytes:
    """CONNECT, protocol level 4 (3.1.1), no will; user name / password only when given.

    ``keepalive`` is in seconds (0..65535). A password needs a user name
    (MQTT 3.1.1 section 3.1.2.9).
    """
    if not 0 <= keepalive <= 0xFFFF:
        raise ValueError(f"keepalive {keepalive} outside 0..65535 s")
    if password is not None and username is None:
        raise ValueError("an MQTT password needs a user name")
    flags = (
        (0x02 if clean_session else 0x00)
        | (0x80 if username is not None else 0)
        | (0x40 if password is not None else 0)
    )
    body = _str("MQTT") + bytes([4, flags]) + struct.pack("!H", keepalive) + _str(client_id)
    body += b"".join(_str(x) for x in (username, password) if x is not None)
    return _packet(CONNECT << 4, body)


def encode_subscribe(packet_id: int, topic_filters: str | Iterable[str], qos: int = 0) -> bytes:
    """SUBSCRIBE to one filter (``str``) or several (iterable of ``str``), all at ``qos``."""
    if isinstance(topic_filters, (str, bytes)):
        topic_filters = [topic_filters]
    if qos not in (0, 1, 2):
        raise ValueError(f"qos {qos} not in 0, 1, 2")
    body = struct.pack("!H", packet_id) + b"".join(_str(f) + bytes([qos]) for f in topic_filters)
    return _packet((SUBSCRIBE << 4) | 0x02, body)


def encode_publish(
    topic: str, payload, *, qos: int = 0, packet_id: int | None = None, retain: bool = False, dup: bool = False
) -> bytes:
    """PUBLISH; ``packet_id`` (1..65535) is required for QoS 1 and 2."""
    if qos not in (0, 1, 2):
        raise ValueError(f"qos {qos} not in 0, 1, 2")
    head = (PUBLISH << 4) | (qos << 1) | (0x01 if retain else 0) | (0x08 if dup else 0)
    body = _str(topic)
    if qos:
        if packet_id is None or not 1 <= packet_id <= 0xFFFF:
            raise ValueError(f"QoS {qos} needs a packet id in 1..65535, got {packet_id!r}")
        body += struct.pack("!H", packet_id)
    return _packet(head, body + bytes(payload))


def _encode_ack(ptype: int, packet_id: int) -> bytes:
    """A 4-byte acknowledgement of ``packet_id``: type, its fixed-header flags, length 2, the id."""
    return struct.pack("!BBH", ptype << 4 | FIXED_FLAGS[ptype], 2, packet_id)


def encode_puback(packet_id: int) -> bytes:
    """PUBACK of the QoS 1 PUBLISH ``packet_id`` (4 bytes)."""
    return _encode_ack(PUBACK, packet_id)


def encode_pubrec(packet_id: int) -> bytes:
    """PUBREC of the QoS 2 PUBLISH ``packet_id`` (4 bytes; MQTT 3.1.1 section 3.5)."""
    return _encode_ack(PUBREC, packet_id)


def encode_pubrel(packet_id: int) -> bytes:
    """PUBREL answering a PUBREC of ``packet_id`` (4 bytes; fixed-header flags 0010, section 3.6)."""
    return _encode_ack(PUBREL, packet_id)


def encode_pubcomp(packet_id: int) -> bytes:
    """PUBCOMP answering a PUBREL of ``packet_id`` (4 bytes; section 3.7)."""
    return _encode_ack(PUBCOMP, packet_id)


def encode_pingreq() -> bytes:
    """PINGREQ (2 bytes)."""
    return bytes([PINGREQ << 4, 0])


def encode_disconnect() -> bytes:
    """DISCONNECT (2 bytes)."""
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
        Payload length, bytes; the payload is zero-filled until patched.
    qos : int
        0, 1 or 2 (QoS 1 and 2 reserve a packet id, initially 1).
    retain : bool
    """

    def __init__(self, topic: str, payload_bytes: int, *, qos: int = 0, retain: bool = False):
        self.qos = qos
        pkt = encode_publish(topic, bytes(payload_bytes), qos=qos, packet_id=1 if qos else None, retain=retain)
        self.buf = bytearray(pkt)
        self.payload_offset = len(pkt) - payload_bytes
        self.packet_id_offset = self.payload_offset - 2 if qos else None

    def __len__(self):
        return len(self.buf)

    def patch(self, fmt: str, offset: int, *values) -> None:
        """``struct.pack_into(fmt, buf, payload_offset + offset, *values)``."""
        struct.pack_into(fmt, self.buf, self.payload_offset + offset, *values)

    def set_packet_id(self, packet_id: int) -> None:
        """Write the QoS 1 packet id (1..65535) in place."""
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
    def pending(self) -> int:
        """Bytes of an incomplete packet kept for the next feed."""
        return len(self._buf)

    def feed(self, data) -> list[Packet]:
        """Decode the complete packets of ``data`` (any bytes-like) plus the bytes kept from before."""
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
            out.append(decode_packet(buf[pos] >> 4, buf[pos] & 0x0F, bytes(buf[start:stop])))
            pos = stop
        del buf[:pos]
        return out

    def feed_records(
        self,
        data,
        t_recv_ns: int,
        records: bytearray,
        offset: int,
        *,
        header_bytes: int,
        stride: int,
        ack_ids: list | None = None,
        t_kernel_ns: int | None = None,
    ) -> tuple[int, list[Packet]]:
        """Fast path for received PUBLISH packets: copy headers into a record buffer.

        For every complete PUBLISH, the first ``header_bytes`` bytes of its
        payload go to ``records[offset:offset + header_bytes]`` followed by
        ``t_recv_ns`` as a little-endian int64, then ``t_kernel_ns`` (the
        kernel's receive time of the read, when given) as a second one;
        ``offset`` advances by ``stride``. The caller guarantees room for every PUBLISH in ``data``
        (at most ``(pending + len(data)) // (4 + header_bytes)`` of them).
        A payload shorter than ``header_bytes`` raises :class:`MqttError`.

        Returns ``(new offset, other packets)``: non-PUBLISH packets decoded
        as by :meth:`feed`. Packet ids of QoS 1 PUBLISHes (to acknowledge)
        are appended to ``ack_ids`` when given. Offsets, strides and sizes
        are in bytes, ``t_recv_ns`` in ns.
        """
        buf = self._buf
        buf += data
        others = []
        pos, end = 0, len(buf)
        stamp = record_stamp(t_recv_ns, t_kernel_ns)
        t_at, t_end = header_bytes, header_bytes + len(stamp)
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
                    raise MqttError(f"PUBLISH payload of {stop - p} bytes, shorter than the {header_bytes}-byte header")
                records[offset : offset + header_bytes] = buf[p : p + header_bytes]
                records[offset + t_at : offset + t_end] = stamp
                offset += stride
            else:
                others.append(decode_packet(head >> 4, head & 0x0F, bytes(buf[start:stop])))
            pos = stop
        del buf[:pos]
        return offset, others


_PACK_T = struct.Struct("<q").pack
_PACK_TT = struct.Struct("<qq").pack


def record_stamp(t_recv_ns: int, t_kernel_ns: int | None) -> bytes:
    """The time bytes of a record: ``<q`` receive time, or ``<qq`` with the kernel's."""
    return _PACK_T(t_recv_ns) if t_kernel_ns is None else _PACK_TT(t_recv_ns, t_kernel_ns)


_PACK_ID = struct.Struct("!H").pack_into


def patch_packet_ids(buf: bytearray, offsets: Iterable[int], last_id: int) -> int:
    """Number the QoS 1 PUBLISH packets of a pre-encoded batch in place.

    Parameters
    ----------
    buf : bytearray
        Concatenated encoded PUBLISH packets.
    offsets : iterable of int
        Offsets in ``buf`` of their 2-byte packet ids, in sending order.
    last_id : int
        Packet id used last (0 before the first); ids run 1..65535 and wrap.

    Returns
    -------
    int
        The last packet id written (pass it to the next call).
    """
    p = last_id
    for o in offsets:
        p = p % 65535 + 1
        _PACK_ID(buf, o, p)
    return p


def decode_packet(ptype: int, flags: int, body) -> Packet:
    """One control packet from its type, fixed-header flags and body (lenient).

    For packets from a trusted peer (the broker under test); see
    :func:`parse_publish` for a validating PUBLISH parser.

    Parameters
    ----------
    ptype, flags : int
        High and low nibble of the first byte.
    body : bytes
        The packet after the remaining length.

    Returns
    -------
    Packet
    """
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
    if ptype in (PUBACK, SUBACK) or (ptype in (PUBREC, PUBREL, PUBCOMP, UNSUBACK) and len(body) >= 2):
        return Packet(ptype, flags, None, body[2:], (body[0] << 8) | body[1])
    return Packet(ptype, flags, None, body, None)


def check_fixed_header(ptype: int, flags: int, version: int = 4) -> None:
    """Validate a fixed header's type and flags (MQTT 3.1.1 section 2.2; AUTH from MQTT 5).

    Parameters
    ----------
    ptype, flags : int
        High and low nibble of the first byte.
    version : int
        Protocol level of the connection (3, 4 or 5).

    Raises
    ------
    MqttError
        Reserved type 0, flags other than those :data:`FIXED_FLAGS` requires
        (PUBLISH is free), or AUTH outside MQTT 5.
    """
    if ptype == 0:
        raise MqttError("reserved packet type 0")
    if ptype != PUBLISH and flags != FIXED_FLAGS[ptype]:
        raise MqttError(f"{TYPE_NAMES[ptype]} with fixed-header flags {flags:#x}")
    if ptype == AUTH and version != 5:
        raise MqttError("AUTH outside MQTT 5")


def parse_publish(body, flags: int, version: int = 4) -> tuple[str, int, int, bool]:
    """Parse and validate a PUBLISH body (strict: for captured traffic).

    Parameters
    ----------
    body : bytes-like
        The packet after the remaining length.
    flags : int
        Fixed-header flags (DUP, QoS, RETAIN).
    version : int
        Protocol level of the connection: 3 / 4 (MQTT 3.1 / 3.1.1) or 5
        (PUBLISH has properties after the packet id).

    Returns
    -------
    topic : str
    payload_start : int
        Offset of the application payload in ``body``; the payload is
        ``len(body) - payload_start`` bytes.
    qos : int
    retain : bool

    Raises
    ------
    MqttError
        QoS 3, DUP at QoS 0, a topic past the packet, not UTF-8, with a
        wildcard or NUL (or empty before MQTT 5), packet id 0, properties
        past the packet.
    """
    qos = (flags >> 1) & 3
    if qos == 3:
        raise MqttError("PUBLISH with QoS 3")
    if qos == 0 and flags & 8:
        raise MqttError("PUBLISH with DUP set at QoS 0")
    n = len(body)
    if n < 2:
        raise MqttError("PUBLISH shorter than its topic length")
    tlen = (body[0] << 8) | body[1]
    pos = 2 + tlen + (2 if qos else 0)
    if pos > n:
        raise MqttError("PUBLISH topic longer than the packet")
    try:
        topic = bytes(body[2 : 2 + tlen]).decode("utf-8")
    except UnicodeDecodeError:
        raise MqttError("PUBLISH topic not UTF-8") from None
    if "+" in topic or "#" in topic or "\x00" in topic:
        raise MqttError("PUBLISH topic with a wildcard or NUL")
    if qos and body[2 + tlen] == 0 and body[3 + tlen] == 0:
        raise MqttError("PUBLISH with packet identifier 0")
    if version == 5:
        got = decode_remaining_length(body, pos, n)
        if got is None:
            raise MqttError("PUBLISH properties length past the packet")
        plen, pos = got
        pos += plen
        if pos > n:
            raise MqttError("PUBLISH properties longer than the packet")
    elif not topic:
        raise MqttError("PUBLISH with an empty topic")
    return topic, pos, qos, bool(flags & 1)


def connect_version(body) -> int:
    """Protocol level (3, 4 or 5) of a CONNECT body ("MQIsdp" 3.1 or "MQTT").

    Raises
    ------
    MqttError
        Too short, unknown protocol name or level.
    """
    if len(body) < 7:
        raise MqttError("CONNECT too short")
    nlen = (body[0] << 8) | body[1]
    name = bytes(body[2 : 2 + nlen])
    if name not in (b"MQTT", b"MQIsdp") or len(body) < 3 + nlen:
        raise MqttError("CONNECT with an unknown protocol name")
    level = body[2 + nlen]
    if level not in (3, 4, 5):
        raise MqttError(f"CONNECT with protocol level {level}")
    return level
