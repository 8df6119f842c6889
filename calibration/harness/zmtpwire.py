"""A minimal ZMTP 3.0 SUB peer over a plain socket, for the load generator's subscribers.

ZeroMQ's own SUB socket reads TCP in libzmq's I/O thread, so the receiving
code never sees the socket and cannot ask the kernel when a message arrived
(:mod:`pubsim.calibration.harness.rxstamp`). This module speaks the wire
protocol itself (ZMTP 3.0, RFC 23/ZMTP, https://rfc.zeromq.org/spec/23/,
NULL security): the 64-byte greeting, a READY command with
``Socket-Type: SUB``, subscriptions as messages whose body is ``0x01`` and
the prefix (ZMTP 3.0's form; a 3.1 peer such as libzmq 4.3 speaks 3.0 to a
peer that greets with minor version 0), then message frames: a flags byte
(bit 0 MORE, bit 1 LONG, bit 2 COMMAND), a size of one byte (eight,
big-endian, when LONG) and the body. The load generator's publishers send
one frame per message, ``topic NUL payload``
(:mod:`pubsim.calibration.harness.loadgen.publisher`).
"""

from __future__ import annotations

import socket
import time

from .mqttwire import record_stamp

__all__ = ["GREETING", "ZmtpError", "ZmtpStream", "command", "connect", "frame"]

#: Our greeting: signature, version 3.0, mechanism NULL, as-server 0, filler (RFC 23 "Greeting").
GREETING = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + bytes(31)

_MORE, _LONG, _COMMAND = 0x01, 0x02, 0x04


class ZmtpError(ConnectionError):
    """The peer broke the protocol or closed the connection during the handshake."""


def frame(body: bytes, *, flags: int = 0) -> bytes:
    """One ZMTP frame (``flags`` without the LONG bit, which the size sets)."""
    n = len(body)
    if n > 255:
        return bytes([flags | _LONG]) + n.to_bytes(8, "big") + body
    return bytes([flags, n]) + body


def command(name: bytes, properties: dict[bytes, bytes] | None = None) -> bytes:
    """A command frame: name length, name, then ``name-length name value-length(4) value`` properties."""
    body = bytes([len(name)]) + name
    for key, value in (properties or {}).items():
        body += bytes([len(key)]) + key + len(value).to_bytes(4, "big") + value
    return frame(body, flags=_COMMAND)


class ZmtpStream:
    """Incremental decoder of a peer's frames (after the greeting)."""

    def __init__(self, pending: bytes = b""):
        self._buf = bytearray(pending)

    @property
    def pending(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def frames(self, data: bytes):
        """Complete ``(flags, body)`` frames in what has been fed so far."""
        buf = self._buf
        buf += data
        spans, used = _frame_spans(buf)
        out = [(flags, bytes(buf[start:stop])) for flags, start, stop in spans]
        del buf[:used]
        return out

    def feed_records(self, data, t_recv_ns, records, offset, *, header_bytes, stride, t_kernel_ns=None):
        """Copy the header of every message frame's payload into ``records`` (the MQTT codec's contract).

        A message's body is ``topic NUL payload``; the first ``header_bytes``
        of the payload go to ``records[offset:offset + header_bytes]``, then
        the receive times (:func:`~pubsim.models.protocol.mqtt.record_stamp`).
        Command frames (a heartbeat) are skipped. Returns ``(new offset, [])``.
        """
        buf = self._buf
        buf += data
        stamp = record_stamp(t_recv_ns, t_kernel_ns)
        t_at, t_end = header_bytes, header_bytes + len(stamp)
        spans, used = _frame_spans(buf)
        find = buf.find
        for flags, start, stop in spans:
            if not flags & _COMMAND:
                p = find(0, start, stop) + 1
                if p == 0 or stop - p < header_bytes:
                    raise ZmtpError(
                        f"a ZMTP message of {stop - start} bytes without topic, NUL and a {header_bytes}-byte header"
                    )
                records[offset : offset + header_bytes] = buf[p : p + header_bytes]
                records[offset + t_at : offset + t_end] = stamp
                offset += stride
        del buf[:used]
        return offset, []


def _frame_spans(buf):
    """``([(flags, body start, body stop), ...], bytes used)`` of the complete frames at the start of ``buf``."""
    spans, pos, end = [], 0, len(buf)
    while end - pos >= 2:
        flags = buf[pos]
        if flags & _LONG:
            if end - pos < 9:
                break
            n, start = int.from_bytes(buf[pos + 1 : pos + 9], "big"), pos + 9
        else:
            n, start = buf[pos + 1], pos + 2
        if start + n > end:
            break
        spans.append((flags, start, start + n))
        pos = start + n
    return spans, pos


def _recv_exactly(sock, n, deadline):
    data = b""
    while len(data) < n:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ZmtpError("the peer closed the connection during the handshake")
        data += chunk
    return data


def connect(port, prefixes, *, host="127.0.0.1", timeout_s=10.0):
    """Connect as a SUB peer to a ZMTP 3 XPUB/PUB socket and subscribe to ``prefixes`` (bytes).

    Returns ``(socket, stream)``: the stream holds whatever followed the
    peer's READY. Raises :class:`ZmtpError` on a peer that is not ZMTP 3
    with NULL security, ``TimeoutError`` when it does not answer in time.
    """
    deadline = time.monotonic() + timeout_s
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(GREETING)
        peer = _recv_exactly(sock, 64, deadline)
        if peer[0] != 0xFF or peer[9] != 0x7F or peer[10] < 3:
            raise ZmtpError(f"not a ZMTP 3 greeting: {peer[:12].hex()}")
        if peer[12:32].rstrip(b"\x00") != b"NULL":
            raise ZmtpError(f"security mechanism {peer[12:32].rstrip(bytes(1))!r}, not NULL")
        sock.sendall(command(b"READY", {b"Socket-Type": b"SUB"}))
        stream = ZmtpStream()
        while True:
            sock.settimeout(max(deadline - time.monotonic(), 1e-3))
            data = sock.recv(65536)
            if not data:
                raise ZmtpError("the peer closed the connection before READY")
            got = stream.frames(data)
            ready = [b for f, b in got if f & _COMMAND and b[1 : 1 + b[0]] == b"READY"]
            if ready:
                break
        sock.sendall(b"".join(frame(b"\x01" + p) for p in prefixes))
        return sock, stream
    except BaseException:
        sock.close()
        raise
