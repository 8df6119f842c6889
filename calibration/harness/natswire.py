"""A minimal NATS client protocol codec for the load generator.

The NATS protocol is text lines ending in CRLF; a message body follows its
control line. The client sends ``CONNECT {json}``, ``PUB subject n`` +
payload, ``SUB subject sid``, ``PING``/``PONG``; the server sends ``INFO
{json}``, ``MSG subject sid [reply-to] n`` + payload, ``PING``/``PONG``,
``+OK`` (verbose mode only) and ``-ERR 'text'``.

:class:`NatsStream` decodes the server's byte stream incrementally (a
message may be split across reads, a read may hold several). The server
PINGs idle clients and closes the connection when they do not answer: the
caller must answer every ``PING`` event with :data:`PONG`
(:func:`connect` and :func:`subscribe` do it while they wait).

Subjects: NATS separates tokens with ``.``; the harness maps its MQTT-style
topic names with :func:`subject_for` (``pubsim/t3`` -> ``pubsim.t3``).
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import NamedTuple

from .mqttwire import record_stamp

__all__ = [
    "PING",
    "PONG",
    "NatsError",
    "NatsEvent",
    "subject_for",
    "encode_connect",
    "encode_pub",
    "encode_sub",
    "encode_unsub",
    "NatsPublishTemplate",
    "NatsStream",
    "connect",
    "subscribe",
    "flush",
]

PING = b"PING\r\n"
PONG = b"PONG\r\n"
DEFAULT_CONNECT = {"verbose": False, "pedantic": False}
_MAX_LINE = 64 * 1024


class NatsError(RuntimeError):
    """A ``-ERR`` from the server, a malformed line, or a closed connection."""


class NatsEvent(NamedTuple):
    """A decoded server operation.

    ``op`` is ``"MSG"``, ``"PING"``, ``"PONG"``, ``"+OK"``, ``"-ERR"`` or
    ``"INFO"``. For MSG: ``subject`` (str), ``sid`` (int), ``reply`` (str or
    None) and ``payload`` (bytes). For -ERR ``payload`` is the error text, for
    INFO the JSON document (bytes; :meth:`info` parses it).
    """

    op: str
    subject: str | None = None
    sid: int | None = None
    reply: str | None = None
    payload: bytes = b""

    def info(self):
        return json.loads(self.payload) if self.op == "INFO" else None


def subject_for(topic):
    """NATS subject of an MQTT-style topic name: ``/`` -> ``.``."""
    return topic.replace("/", ".")


def encode_connect(options=None):
    """``CONNECT {json}``; default options ``{"verbose": false, "pedantic": false}``."""
    opts = dict(DEFAULT_CONNECT if options is None else options)
    return b"CONNECT " + json.dumps(opts, separators=(",", ":")).encode() + b"\r\n"


def _check_subject(subject):
    s = subject.encode() if isinstance(subject, str) else bytes(subject)
    if not s or any(c in s for c in b" \t\r\n"):
        raise ValueError(f"bad NATS subject {subject!r}")
    return s


def encode_pub(subject, payload, reply=None):
    payload = bytes(payload)
    head = b"PUB " + _check_subject(subject)
    if reply:
        head += b" " + _check_subject(reply)
    return head + b" %d\r\n" % len(payload) + payload + b"\r\n"


def encode_sub(subject, sid, queue=None):
    line = b"SUB " + _check_subject(subject)
    if queue:
        line += b" " + _check_subject(queue)
    return line + b" %d\r\n" % int(sid)


def encode_unsub(sid, max_msgs=None):
    return b"UNSUB %d" % int(sid) + (b" %d" % max_msgs if max_msgs is not None else b"") + b"\r\n"


class NatsPublishTemplate:
    """One ``PUB`` operation encoded once, patched in place for every message.

    Same interface as :class:`pubsim.calibration.harness.mqttwire.PublishTemplate`:
    ``buf`` (``bytearray``), ``payload_offset``, :meth:`patch`.
    """

    def __init__(self, subject, payload_bytes):
        pkt = encode_pub(subject, bytes(payload_bytes))
        self.buf = bytearray(pkt)
        self.payload_offset = len(pkt) - 2 - payload_bytes

    def __len__(self):
        return len(self.buf)

    def patch(self, fmt, offset, *values):
        struct.pack_into(fmt, self.buf, self.payload_offset + offset, *values)


def _control(op, line):
    """The event of a control line other than MSG."""
    if op == b"PING":
        return NatsEvent("PING")
    if op == b"PONG":
        return NatsEvent("PONG")
    if op == b"+OK":
        return NatsEvent("+OK")
    if op == b"-ERR":
        return NatsEvent("-ERR", payload=line[4:].strip().strip(b"'"))
    if op == b"INFO":
        return NatsEvent("INFO", payload=line[5:].strip())
    raise NatsError(f"unknown operation {line[:40]!r}")


class NatsStream:
    """Incremental decoder of the server-to-client byte stream (see the module docstring)."""

    def __init__(self):
        self._buf = bytearray()
        #: events read by :func:`connect` / :func:`subscribe` while waiting for another one
        self.backlog = []

    @property
    def pending(self):
        return len(self._buf)

    def feed(self, data):
        """Complete operations in the stream so far, as :class:`NatsEvent` tuples."""
        buf = self._buf
        buf += data
        out = []
        pos, end = 0, len(buf)
        while pos < end:
            e = buf.find(b"\r\n", pos)
            if e < 0:
                if end - pos > _MAX_LINE:
                    raise NatsError("control line longer than 64 KiB")
                break
            line = bytes(buf[pos:e])
            op = line.split(b" ", 1)[0].upper()
            if op == b"MSG":
                parts = line.split()
                if len(parts) not in (4, 5):
                    raise NatsError(f"malformed MSG line {line!r}")
                n = int(parts[-1])
                stop = e + 2 + n
                if stop + 2 > end:
                    break
                if buf[stop] != 13 or buf[stop + 1] != 10:
                    raise NatsError(f"MSG payload of {n} bytes not followed by CRLF")
                out.append(
                    NatsEvent(
                        "MSG",
                        parts[1].decode(),
                        int(parts[2]),
                        parts[3].decode() if len(parts) == 5 else None,
                        bytes(buf[e + 2 : stop]),
                    )
                )
                pos = stop + 2
                continue
            pos = e + 2
            out.append(_control(op, line))
        del buf[:pos]
        return out

    def feed_records(self, data, t_recv_ns, records, offset, *, header_bytes, stride, t_kernel_ns=None):
        """Fast path for MSG: copy payload headers into a record buffer.

        Same contract as :meth:`MqttStream.feed_records
        <calibration.harness.mqttwire.MqttStream.feed_records>` (a message
        takes at least ``12 + header_bytes`` bytes of stream). Returns
        ``(new offset, other events)``.
        """
        buf = self._buf
        buf += data
        others = []
        pos, end = 0, len(buf)
        stamp = record_stamp(t_recv_ns, t_kernel_ns)
        t_at, t_end = header_bytes, header_bytes + len(stamp)
        find = buf.find
        while pos < end:
            e = find(b"\r\n", pos)
            if e < 0:
                if end - pos > _MAX_LINE:
                    raise NatsError("control line longer than 64 KiB")
                break
            if buf[pos] == 77 and buf[pos + 1] == 83:  # "MS"
                n = int(buf[buf.rfind(b" ", pos, e) + 1 : e])
                p = e + 2
                stop = p + n
                if stop + 2 > end:
                    break
                if buf[stop] != 13 or buf[stop + 1] != 10:
                    raise NatsError(f"MSG payload of {n} bytes not followed by CRLF")
                if n < header_bytes:
                    raise NatsError(f"MSG payload of {n} bytes, shorter than the {header_bytes}-byte header")
                records[offset : offset + header_bytes] = buf[p : p + header_bytes]
                records[offset + t_at : offset + t_end] = stamp
                offset += stride
                pos = stop + 2
                continue
            line = bytes(buf[pos:e])
            others.append(_control(line.split(b" ", 1)[0].upper(), line))
            pos = e + 2
        del buf[:pos]
        return offset, others


def _wait(sock, stream, want, deadline):
    while True:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise TimeoutError(f"no NATS {want} before the deadline")
        sock.settimeout(timeout)
        data = sock.recv(65536)
        if not data:
            raise NatsError("connection closed by the server")
        found = None
        for ev in stream.feed(data):
            if ev.op == "-ERR":
                raise NatsError(f"server error: {ev.payload.decode(errors='replace')}")
            if ev.op == "PING":
                sock.sendall(PONG)
            elif ev.op == want and found is None:
                found = ev
            else:
                stream.backlog.append(ev)
        if found is not None:
            return found


def connect(port, *, host="127.0.0.1", name=None, options=None, timeout_s=5.0):
    """A TCP socket (TCP_NODELAY) with a NATS session confirmed by PING/PONG.

    Reads the server's INFO, sends CONNECT (``options``, default
    verbose/pedantic off, plus ``name``) and PING, waits for PONG. Returns
    ``(socket, NatsStream, info dict)`` with the socket in blocking mode.
    """
    deadline = time.monotonic() + timeout_s
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = NatsStream()
        info = _wait(sock, stream, "INFO", deadline).info()
        opts = dict(DEFAULT_CONNECT if options is None else options)
        if name:
            opts["name"] = name
        sock.sendall(encode_connect(opts) + PING)
        _wait(sock, stream, "PONG", deadline)
        sock.settimeout(None)
        return sock, stream, info
    except BaseException:
        sock.close()
        raise


def flush(sock, stream, *, timeout_s=5.0):
    """PING and wait for the PONG: the server has processed everything sent before."""
    sock.sendall(PING)
    _wait(sock, stream, "PONG", time.monotonic() + timeout_s)
    sock.settimeout(None)


def subscribe(sock, stream, subjects, *, first_sid=1, timeout_s=5.0):
    """SUB each subject (sids ``first_sid``, ``first_sid + 1``, ...) and flush.

    Returns the sids. The PONG guarantees the server has registered the
    subscriptions.
    """
    subjects = [subjects] if isinstance(subjects, str) else list(subjects)
    sids = list(range(first_sid, first_sid + len(subjects)))
    sock.sendall(b"".join(encode_sub(s, sid) for s, sid in zip(subjects, sids)))
    flush(sock, stream, timeout_s=timeout_s)
    return sids
