"""The subscriber role: one process per subscriber, receiving into a record buffer.

:func:`_subscriber_main` is the process target; MQTT and NATS read the
socket with the codecs' ``feed_records`` fast path, ZeroMQ with ``recv_into``.

Two receive times per message (issue 18, "the clients add latency"): the
time the subscriber's code read it (``t_recv_ns``, after ``recvmsg``
returned) and the kernel's receive time of that read (``t_kernel_ns``,
``SO_TIMESTAMPNS``, Linux ``Documentation/networking/timestamping.rst``:
for TCP, ``tcp_recvmsg`` returns the stamp of the last segment the read
consumed, and ``tcp_try_coalesce`` gives a segment merged into a queued one
the later stamp, so a message read together with later ones gets that later
arrival, never a time after ``t_recv_ns``). Their difference is the subscriber's own delay: its
wake-up and its wait for the shared client core, which with tens of Python
clients on one core dominates the light-load latency. ZeroMQ's socket is
read by libzmq's I/O thread, so a subscriber of the ZeroMQ proxy speaks ZMTP
itself (:mod:`..zmtpwire`) to have them; in direct mode (pyzmq SUB sockets
that bind) ZeroMQ records have no kernel time (0).
"""

from __future__ import annotations

import math
import os
import struct
import time

import numpy as np

from .. import mqttwire as mw
from .. import natswire as nw
from .. import zmtpwire as zw
from ..rxstamp import ANCILLARY_BYTES, RealToMonotonic, enable_kernel_stamps, kernel_time_ns
from .child import _CONTROL_PERIOD_NS, _READ_BYTES, _child_setup, _report_error, _schedstat, _switches
from .records import HEADER_BYTES, PROBE_SEQ, STRIDE, _flag_records, _Records
from .spec import IDLE_TOPIC, HarnessError, idle_filter_names, topic_name

_SUBSCRIBE_CHUNK = 1000  # topic filters per MQTT SUBSCRIBE of the idle subscriptions


def _subscriber_main(spec, index, topics, counters, conn):
    try:
        _child_setup(spec.sub_cpus)
        if spec.protocol == "zmq" and not _raw_zmtp(spec):
            _zmq_subscriber(spec, index, topics, conn, counters)
        else:
            _stream_subscriber(spec, index, topics, conn, counters)
    except BaseException:
        _report_error(conn, "subscriber", index)
    finally:
        conn.close()


def _raw_zmtp(spec):
    """A ZeroMQ subscriber of the proxy speaks ZMTP itself (:mod:`..zmtpwire`) to read the kernel's receive
    times; direct mode (the SUB binds, the publishers connect) and ``kernel_timestamps=False`` keep pyzmq."""
    return spec.protocol == "zmq" and spec.zmq_mode == "proxy" and spec.kernel_timestamps


def _expected_records(spec, topics):
    per_topic = spec.rate_per_s * (spec.duration_s + 1.0) / spec.topics
    return int(min(max(per_topic * max(len(topics), 1) * 1.1, 65536), 2_000_000))


class _SubState:
    """Probe bookkeeping and control messages shared by the subscriber loops."""

    def __init__(self, spec, index, topics, conn, counters, records):
        self.conn = conn
        self.index = index
        self.counters = counters
        self.rec = records
        self.missing = {(p, k) for p in range(spec.publishers) for k in topics}
        self.scanned = 0  # next record of the current chunk to scan for probes
        self.chunk_id = 0
        self.probing = True
        self.base = 0
        self.stop = False
        self.disconnected = None
        self.t_start_ns = None
        self.next_control = 0
        self.sched0 = None
        if not self.missing:
            conn.send(("ready", index))

    def scan_probes(self):
        rec = self.rec
        if len(rec.done) != self.chunk_id:
            self.chunk_id, self.scanned = len(rec.done), 0
        n = rec.off // STRIDE
        for k in range(self.scanned, n):
            pub, seq, _, topic = rec.record_at(k)
            if seq == PROBE_SEQ:
                self.missing.discard((pub, topic))
        self.scanned = n
        if not self.missing:
            self.probing = False
            self.conn.send(("ready", self.index))

    def after_read(self):
        if self.probing and self.missing:
            self.scan_probes()
        if self.t_start_ns is not None:
            self.counters[self.index] = self.rec.count - self.base

    def control(self, now):
        if now < self.next_control:
            return
        self.next_control = now + _CONTROL_PERIOD_NS
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if msg[0] == "start":
                    self.t_start_ns = msg[1]
                    self.probing = False
                    self.base = self.rec.count
                    self.sched0 = (time.monotonic_ns(), *_schedstat(), _switches()[0])
                elif msg[0] == "stop":
                    self.stop = True
        except (EOFError, OSError):
            raise SystemExit(0) from None  # the parent is gone

    def finish(self, extra=None):
        rec = self.rec.array()
        rec = rec[rec["seq"] != np.uint64(PROBE_SEQ)]
        dup, ooo = _flag_records(rec)
        t1, run1, wait1 = time.monotonic_ns(), *_schedstat()
        sleeps = cpu_s = math.nan
        counted = 0
        if self.sched0 is not None:
            t0, run0, wait0, sleeps0 = self.sched0
            wall = max(t1 - t0, 1)
            cpu, runnable = (run1 - run0) / wall, (run1 - run0 + wait1 - wait0) / wall
            sleeps, cpu_s, counted = _switches()[0] - sleeps0, (run1 - run0) / 1e9, self.rec.count - self.base
        else:
            cpu = runnable = math.nan
        out = {
            "index": self.index,
            "records": rec,
            "duplicate": dup,
            "out_of_order": ooo,
            "disconnected": self.disconnected,
            "cpu_fraction": cpu,
            "runnable_fraction": runnable,
            "sleeps": sleeps,  # voluntary switches from the start to the end: each one a wake-up
            "cpu_s": cpu_s,
            "counted": counted,  # messages read over the same time
        }
        out.update(extra or {})
        self.conn.send(("result", out))


def _send_blocking(sock, data):
    """``sendall`` without the read timeout (a timed-out sendall may have sent part of ``data``)."""
    timeout = sock.gettimeout()
    sock.settimeout(None)
    try:
        sock.sendall(data)
    finally:
        sock.settimeout(timeout)


def _idle_filters(spec, index):
    """The idle subscriptions a subscriber installs: all of them on subscriber 0, none elsewhere."""
    return idle_filter_names(spec.idle_filters) if index == 0 else []


def _stream_subscriber(spec, index, topics, conn, counters):
    port = spec.sub_port_effective
    names = [topic_name(k) for k in topics] or [IDLE_TOPIC]
    idle = _idle_filters(spec, index)
    keepalive = int(min(65535, max(60, 3 * (spec.duration_s + spec.setup_timeout_s + spec.max_drain_s))))
    if spec.protocol == "mqtt":
        sock, stream = mw.connect(
            port,
            f"pubsim-sub{index}-{os.getpid()}",
            host=spec.host,
            keepalive=keepalive,
            timeout_s=spec.setup_timeout_s,
            username=spec.mqtt_username,
            password=spec.mqtt_password,
        )
        filters = names + idle
        for k in range(0, len(filters), _SUBSCRIBE_CHUNK):  # one SUBSCRIBE (and SUBACK) per chunk
            chunk = filters[k : k + _SUBSCRIBE_CHUNK]
            mw.subscribe(
                sock, stream, chunk, qos=spec.qos, packet_id=1 + k // _SUBSCRIBE_CHUNK, timeout_s=spec.setup_timeout_s
            )
        min_msg = 4 + HEADER_BYTES
    elif spec.protocol == "zmq":
        prefixes = [n.encode() + b"\0" for n in names + idle]
        sock, stream = zw.connect(port, prefixes, host=spec.host, timeout_s=spec.setup_timeout_s)
        min_msg = 2 + 1 + HEADER_BYTES
    else:
        sock, stream, _ = nw.connect(port, host=spec.host, name=f"pubsim-sub{index}", timeout_s=spec.setup_timeout_s)
        nw.subscribe(sock, stream, [nw.subject_for(n) for n in names + idle], timeout_s=spec.setup_timeout_s)
        min_msg = 12 + HEADER_BYTES
    conn.send(("subscribed", index, None))
    rec = _Records(_expected_records(spec, topics))
    st = _SubState(spec, index, topics, conn, counters, rec)
    sock.settimeout(_CONTROL_PERIOD_NS / 1e9)
    ack_ids = [] if spec.qos else None
    is_mqtt = spec.protocol == "mqtt"
    stamped = spec.kernel_timestamps and enable_kernel_stamps(sock)
    recvmsg = sock.recvmsg
    anc_bytes = ANCILLARY_BYTES if stamped else 0
    clock = time.monotonic_ns
    offset = RealToMonotonic()
    try:
        while not st.stop:
            data = None
            ancillary = ()
            if st.disconnected is None:
                try:
                    data, ancillary, _, _ = recvmsg(_READ_BYTES, anc_bytes)
                except TimeoutError:
                    pass
                except OSError as e:
                    st.disconnected = f"{type(e).__name__}: {e}"
            now = clock()
            t_kernel = None
            if ancillary:
                offset.refresh(now)
                t_kernel = kernel_time_ns(ancillary, offset.offset_ns)
            if data is not None:
                if not data:
                    st.disconnected = "closed by the broker"
                else:
                    rec.ensure((stream.pending + len(data)) // min_msg + 1)
                    if is_mqtt:
                        rec.off, others = stream.feed_records(
                            data,
                            now,
                            rec.buf,
                            rec.off,
                            header_bytes=HEADER_BYTES,
                            stride=STRIDE,
                            ack_ids=ack_ids,
                            t_kernel_ns=t_kernel,
                        )
                        if ack_ids or others:
                            _acknowledge(sock, ack_ids, others, spec.qos)
                    else:
                        rec.off, others = stream.feed_records(
                            data, now, rec.buf, rec.off, header_bytes=HEADER_BYTES, stride=STRIDE, t_kernel_ns=t_kernel
                        )
                        for ev in others:
                            if ev.op == "PING":
                                _send_blocking(sock, nw.PONG)
                            elif ev.op == "-ERR":
                                st.disconnected = f"-ERR {ev.payload.decode(errors='replace')}"
                    st.after_read()
            else:
                if st.disconnected is not None:
                    time.sleep(_CONTROL_PERIOD_NS / 1e9)
            st.control(now)
    finally:
        try:
            if is_mqtt and st.disconnected is None:
                sock.sendall(mw.encode_disconnect())
        except OSError:
            pass
        sock.close()
    st.finish()


def _acknowledge(sock, ack_ids, others, qos):
    """Answer the deliveries of one read (MQTT 3.1.1 section 4.3): a PUBACK per QoS 1 PUBLISH,
    a PUBREC per QoS 2 one and a PUBCOMP per PUBREL, in one write; ``ack_ids`` is cleared."""
    encode = mw.encode_pubrec if qos == 2 else mw.encode_puback
    out = [encode(p) for p in ack_ids or ()]
    out += [mw.encode_pubcomp(p.packet_id) for p in others if p.type == mw.PUBREL]
    if out:
        _send_blocking(sock, b"".join(out))
    if ack_ids:
        ack_ids.clear()


def _zmq_subscriber(spec, index, topics, conn, counters):
    import zmq  # optional heavy dependency: pyzmq, needed only for protocol "zmq"

    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, spec.zmq_hwm)
    sub.setsockopt(zmq.LINGER, 0)
    endpoint = None
    if spec.zmq_mode == "direct":
        sub.bind(f"tcp://{spec.host}:*")
        endpoint = sub.getsockopt_string(zmq.LAST_ENDPOINT)
    else:
        sub.connect(f"tcp://{spec.host}:{spec.sub_port}")
    names = [topic_name(k) for k in topics] or [IDLE_TOPIC]
    for n in names + _idle_filters(spec, index):
        sub.setsockopt(zmq.SUBSCRIBE, n.encode() + b"\0")
    conn.send(("subscribed", index, endpoint))
    rec = _Records(_expected_records(spec, topics))
    st = _SubState(spec, index, topics, conn, counters, rec)
    maxlen = max(len(topic_name(spec.topics - 1)), len(IDLE_TOPIC)) + 1 + HEADER_BYTES
    scratch = bytearray(maxlen)
    clock = time.monotonic_ns
    pack_t = struct.Struct("<q").pack_into
    noblock = zmq.NOBLOCK
    again = zmq.Again
    recv_into = getattr(sub, "recv_into", None)
    poll_ms = _CONTROL_PERIOD_NS // 1_000_000
    try:
        while not st.stop:
            if sub.poll(poll_ms):
                rec.ensure(4096)
                buf = rec.buf
                off, limit = rec.off, len(buf) - STRIDE
                while off <= limit:
                    try:
                        if recv_into is not None:
                            n = recv_into(scratch, flags=noblock)
                            frame = scratch
                        else:
                            frame = sub.recv(noblock)
                            n = len(frame)
                    except again:
                        break
                    t = clock()
                    p = frame.find(0, 0, maxlen) + 1
                    if p == 0 or n - p < HEADER_BYTES:
                        raise HarnessError(f"ZeroMQ message of {n} bytes without a {HEADER_BYTES}-byte header")
                    buf[off : off + HEADER_BYTES] = frame[p : p + HEADER_BYTES]
                    pack_t(buf, off + HEADER_BYTES, t)
                    off += STRIDE
                rec.off = off
                st.after_read()
            st.control(clock())
    finally:
        sub.close(0)
    st.finish()
