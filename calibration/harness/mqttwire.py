"""A blocking MQTT 3.1.1 client over a socket, for the load generator (no paho: it saturates first).

The codec is :mod:`pubsim.models.protocol.mqtt` (shared with the capture
reader); its names are re-exported here so the harness has one MQTT
namespace. This module adds only the socket side: :func:`connect` (CONNECT /
CONNACK), :func:`subscribe` (SUBSCRIBE / SUBACK) and :func:`recv_packet`.
"""

from __future__ import annotations

import socket
import time

# the codec's names are this module's public interface too (one MQTT namespace for the harness)
from ...models.protocol.mqtt import (
    AUTH,
    CONNACK,
    CONNACK_CODES,
    CONNECT,
    DISCONNECT,
    FIXED_FLAGS,
    MAX_REMAINING_LENGTH,
    PINGREQ,
    PINGRESP,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    SUBACK,
    SUBSCRIBE,
    TYPE_NAMES,
    UNSUBACK,
    UNSUBSCRIBE,
    MqttError,
    MqttStream,
    Packet,
    PublishTemplate,
    check_fixed_header,
    connect_version,
    decode_packet,
    decode_remaining_length,
    encode_connect,
    encode_disconnect,
    encode_pingreq,
    encode_puback,
    encode_pubcomp,
    encode_publish,
    encode_pubrec,
    encode_pubrel,
    encode_remaining_length,
    encode_subscribe,
    parse_publish,
    patch_packet_ids,
    record_stamp,
)

__all__ = [
    "connect",
    "subscribe",
    "recv_packet",
    "AUTH",
    "CONNACK",
    "CONNACK_CODES",
    "CONNECT",
    "DISCONNECT",
    "FIXED_FLAGS",
    "MAX_REMAINING_LENGTH",
    "MqttError",
    "MqttStream",
    "PINGREQ",
    "PINGRESP",
    "PUBACK",
    "PUBCOMP",
    "PUBLISH",
    "PUBREC",
    "PUBREL",
    "Packet",
    "PublishTemplate",
    "SUBACK",
    "SUBSCRIBE",
    "TYPE_NAMES",
    "UNSUBACK",
    "UNSUBSCRIBE",
    "check_fixed_header",
    "connect_version",
    "decode_packet",
    "decode_remaining_length",
    "encode_connect",
    "encode_disconnect",
    "encode_pingreq",
    "encode_puback",
    "encode_pubcomp",
    "encode_pubrec",
    "encode_pubrel",
    "encode_publish",
    "encode_remaining_length",
    "encode_subscribe",
    "parse_publish",
    "patch_packet_ids",
    "record_stamp",
]


def recv_packet(sock: socket.socket, stream: MqttStream, want: int, deadline: float) -> Packet:
    """Read until a packet of type ``want`` arrives; others go to ``stream.backlog``.

    Parameters
    ----------
    sock : socket.socket
    stream : MqttStream
        The decoder of ``sock``'s byte stream.
    want : int
        Control packet type (e.g. ``CONNACK``).
    deadline : float
        ``time.monotonic()`` time to give up at, s.

    Raises
    ------
    TimeoutError
        No such packet before ``deadline``.
    MqttError
        The broker closed the connection.
    """
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


_recv_packet = recv_packet  # the name used before the codec moved


def connect(
    port: int,
    client_id: str,
    *,
    host: str = "127.0.0.1",
    keepalive: int = 60,
    clean_session: bool = True,
    timeout_s: float = 5.0,
    username: str | None = None,
    password: str | None = None,
) -> tuple[socket.socket, MqttStream]:
    """A TCP socket (TCP_NODELAY) with an accepted MQTT session.

    Sends CONNECT (``keepalive`` in s), waits for CONNACK; returns ``(socket,
    MqttStream)`` with the socket back in blocking mode. Raises
    :class:`MqttError` when the broker refuses the connection,
    ``TimeoutError`` after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = MqttStream()
        sock.sendall(
            encode_connect(
                client_id, clean_session=clean_session, keepalive=keepalive, username=username, password=password
            )
        )
        ack = recv_packet(sock, stream, CONNACK, deadline)
        code = ack.payload[1] if len(ack.payload) >= 2 else -1
        if code != 0:
            raise MqttError(f"CONNACK refused: {CONNACK_CODES.get(code, code)}")
        sock.settimeout(None)
        return sock, stream
    except BaseException:
        sock.close()
        raise


def subscribe(
    sock: socket.socket, stream: MqttStream, topic_filters, *, qos: int = 0, packet_id: int = 1, timeout_s: float = 5.0
) -> list[int]:
    """SUBSCRIBE and wait for the SUBACK (at most ``timeout_s`` s); returns the granted QoS per filter.

    Raises :class:`MqttError` when a filter is refused (return code 0x80).
    """
    filters = [topic_filters] if isinstance(topic_filters, str) else list(topic_filters)
    sock.sendall(encode_subscribe(packet_id, filters, qos))
    ack = recv_packet(sock, stream, SUBACK, time.monotonic() + timeout_s)
    sock.settimeout(None)
    granted = list(ack.payload)
    if len(granted) != len(filters) or 0x80 in granted:
        raise MqttError(f"SUBACK refused {filters}: return codes {granted}")
    return granted
