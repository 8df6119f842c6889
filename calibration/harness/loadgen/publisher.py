"""The publisher role: one process per publisher, pacing pre-encoded batches.

:func:`_publisher_main` is the process target. MQTT and NATS publishers
write a ring of pre-encoded packets (the codecs' publish templates) patched
in place; ZeroMQ publishers send one frame per message.
"""

from __future__ import annotations

import array
import os
import select
import socket
import struct
import time

import numpy as np

from .. import mqttwire as mw
from .. import natswire as nw
from ..rxstamp import RealToMonotonic
from ..txstamp import TxStamps
from .child import _CONTROL_PERIOD_NS, _FLUSH_TIMEOUT_S, _PROBE_PERIOD_NS, _child_setup, _report_error, _schedstat
from .records import _SEQ_TIME, PROBE_SEQ
from .spec import QOS2_WINDOW, HarnessError, batch_size, topic_name

_COLLECT_EVERY = 16  # batches between reads of the transmit stamps (the error queue fills the receive buffer)


def _publisher_main(spec, index, endpoints, conn):
    try:
        _child_setup(spec.pub_cpus)
        if spec.protocol == "zmq":
            _zmq_publisher(spec, index, conn, endpoints)
        else:
            _stream_publisher(spec, index, conn)
    except BaseException:
        _report_error(conn, "publisher", index)
    finally:
        conn.close()


class _Ring:
    """Pre-encoded packets of ``ring_len`` consecutive messages of one publisher.

    Ring message ``j`` is on topic ``(j + index) mod topics``; batch ``n``
    (messages ``n*b .. n*b + b - 1``) is ring slot ``n mod slots``.
    """

    def __init__(self, templates, index, b):
        t = len(templates)
        ring_len = max(b, t)
        self.b = b
        self.slots = ring_len // b
        parts, self.header_offsets, self.packet_id_offsets = [], [], []
        pos = 0
        for j in range(ring_len):
            tmpl = templates[(j + index) % t]
            self.header_offsets.append(pos + tmpl.payload_offset)
            if getattr(tmpl, "packet_id_offset", None) is not None:
                self.packet_id_offsets.append(pos + tmpl.packet_id_offset)
            parts.append(bytes(tmpl.buf))
            pos += len(tmpl.buf)
        self.buf = bytearray(b"".join(parts))
        self.view = memoryview(self.buf)
        bounds = [0]
        pos = 0
        for j in range(ring_len):
            pos += len(parts[j])
            if (j + 1) % b == 0:
                bounds.append(pos)
        self.slot_views = [self.view[bounds[s] : bounds[s + 1]] for s in range(self.slots)]
        self.slot_headers = [self.header_offsets[s * b : (s + 1) * b] for s in range(self.slots)]
        self.slot_pids = (
            [self.packet_id_offsets[s * b : (s + 1) * b] for s in range(self.slots)] if self.packet_id_offsets else None
        )


def _stamp_templates(templates, index):
    for k, tmpl in enumerate(templates):
        tmpl.patch("<H", 0, index)
        tmpl.patch("<H", 18, k)


class _PubControl:
    def __init__(self, conn):
        self.conn = conn
        self.start_ns = None
        self.quiet = False
        self.abort = False

    def poll(self):
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if msg[0] == "start":
                    self.start_ns = msg[1]
                elif msg[0] == "quiet":
                    self.quiet = True
                elif msg[0] == "stop":
                    self.abort = True
        except (EOFError, OSError):
            raise SystemExit(0) from None


def _finish_exchanges(sock, stream, on_packet, deadline):
    """Hand the broker's packets before a PINGRESP to ``on_packet`` (which counts completed
    exchanges and answers PUBRECs, QoS 2), asking again until no PUBREC is left: a broker
    handles a connection's packets in order, so the PUBCOMPs of the PUBRELs sent come before
    the next PINGRESP."""
    while True:
        sock.sendall(mw.encode_pingreq())
        mw.recv_packet(sock, stream, mw.PINGRESP, deadline)
        packets = list(stream.backlog)
        stream.backlog.clear()
        for pkt in packets:
            on_packet(pkt)
        if not any(pkt.type == mw.PUBREC for pkt in packets):
            return


def _wait_start(ctl, send_probes, drain):
    """Send a probe round every 20 ms until the parent says ``quiet`` (every
    subscriber is ready), answer ``quiet`` once the probes have stopped, and
    wait for the start time."""
    next_probe = 0
    told = False
    while ctl.start_ns is None and not ctl.abort:
        now = time.monotonic_ns()
        if ctl.quiet:
            if not told:
                ctl.conn.send(("quiet",))
                told = True
        elif now >= next_probe:
            send_probes(now)
            next_probe = now + _PROBE_PERIOD_NS
        drain()
        ctl.conn.poll(0.005)
        ctl.poll()


def _sleep_until(t_ns):
    d = t_ns - time.monotonic_ns()
    if d > 0:
        time.sleep(d / 1e9)


def _pace(spec, index, ctl, b, send_batch, drain, wait=None):
    """The publishing loop; returns the publisher's report (module docstring, Pacing).

    ``wait(seconds)``: how the loop passes the time until a batch is due (default
    ``time.sleep``); a QoS 2 publisher answers the broker's PUBRECs meanwhile."""
    wait = time.sleep if wait is None else wait
    rate = spec.rate_per_s / spec.publishers
    interval = b * 1e9 / rate
    t0 = ctl.start_ns
    t_end = t0 + int(spec.duration_s * 1e9)
    sent_at = array.array("q")
    clock = time.monotonic_ns
    _sleep_until(t0)
    wall0, (run0, wait0) = clock(), _schedstat()
    next_check = wall0 + _CONTROL_PERIOD_NS
    n = 0
    lag_max = 0
    while True:
        due = t0 + int(n * interval)
        if due >= t_end:
            break
        now = clock()
        if now < due:
            wait((due - now) / 1e9)
            now = clock()
        if now >= t_end:
            break
        send_batch(n, now)
        sent_at.append(now)
        if now - due > lag_max:
            lag_max = now - due
        n += 1
        if now >= next_check:
            next_check = now + _CONTROL_PERIOD_NS
            drain()
            ctl.poll()
            if ctl.abort:
                break
    wall1, (run1, wait1) = clock(), _schedstat()
    wall = max(wall1 - wall0, 1)
    return {
        "index": index,
        "batch": b,
        "interval_ns": interval,
        "t0_ns": t0,
        "batch_t_send_ns": np.frombuffer(sent_at, dtype=np.int64).copy(),
        "sent": n * b,
        "lag_max_ns": lag_max,
        "cpu_fraction": (run1 - run0) / wall,
        "runnable_fraction": (run1 - run0 + wait1 - wait0) / wall,
        "loop_wall_ns": wall,
    }


def _stream_publisher(spec, index, conn):
    is_mqtt = spec.protocol == "mqtt"
    keepalive = int(min(65535, max(60, 3 * (spec.duration_s + spec.setup_timeout_s + spec.max_drain_s))))
    if is_mqtt:
        sock, stream = mw.connect(
            spec.pub_port,
            f"pubsim-pub{index}-{os.getpid()}",
            host=spec.host,
            keepalive=keepalive,
            timeout_s=spec.setup_timeout_s,
            username=spec.mqtt_username,
            password=spec.mqtt_password,
        )
        templates = [mw.PublishTemplate(topic_name(k), spec.payload_bytes, qos=spec.qos) for k in range(spec.topics)]
    else:
        sock, stream, _ = nw.connect(
            spec.pub_port, host=spec.host, name=f"pubsim-pub{index}", timeout_s=spec.setup_timeout_s
        )
        templates = [
            nw.NatsPublishTemplate(nw.subject_for(topic_name(k)), spec.payload_bytes) for k in range(spec.topics)
        ]
    _stamp_templates(templates, index)
    b = batch_size(spec)
    ring = _Ring(templates, index, b)
    probe = _Ring(templates, 0, spec.topics)  # one message per topic, in topic order
    sendall = sock.sendall
    tx = TxStamps(sock)
    offset = RealToMonotonic()
    acks = [0]
    pings = [0]
    pid = [0]

    def realtime_offset_ns():
        offset.refresh(time.monotonic_ns())
        return offset.offset_ns

    def collect():
        tx.collect(realtime_offset_ns())

    def drain():
        collect()
        while True:
            try:
                data = sock.recv(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                raise HarnessError("connection closed by the broker")
            for item in stream.feed(data):
                if is_mqtt:
                    on_packet(item)
                elif item.op == "PING":
                    pings[0] += 1
                    sendall(nw.PONG)
                    tx.other(len(nw.PONG))
                elif item.op == "-ERR":
                    raise HarnessError(f"NATS error: {item.payload.decode(errors='replace')}")

    done = mw.PUBCOMP if spec.qos == 2 else mw.PUBACK  # the packet that completes an exchange

    window = QOS2_WINDOW if is_mqtt and spec.qos == 2 else None
    open_ = [0]  # QoS 2 exchanges sent and not yet released

    def on_packet(pkt):
        """An MQTT packet from the broker: count a completed exchange; answer a PUBREC with its
        PUBREL (QoS 2, MQTT 3.1.1 section 4.3.3)."""
        acks[0] += pkt.type == done
        if pkt.type == mw.PUBREC:
            rel = mw.encode_pubrel(pkt.packet_id)
            sendall(rel)
            tx.other(len(rel))
            open_[0] -= 1

    def answer_while(seconds):
        """QoS 2: wait ``seconds`` answering PUBRECs as they come, as a client's network loop does:
        the broker releases a QoS 2 message to its subscribers only on its PUBREL."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            if select.select([sock], [], [], left)[0]:
                drain()

    def wait_window(n):
        """QoS 2: block until ``n`` more exchanges fit the broker's window (:data:`QOS2_WINDOW`),
        as a client library queues publications while its in-flight window is full."""
        deadline = time.monotonic() + _FLUSH_TIMEOUT_S
        while open_[0] + n > window:
            if time.monotonic() > deadline:
                raise HarnessError(f"QoS 2: no PUBREC from the broker for {_FLUSH_TIMEOUT_S:g} s")
            select.select([sock], [], [], 0.01)
            drain()

    def patch_ids(buf, offsets):
        pid[0] = mw.patch_packet_ids(buf, offsets, pid[0])

    def send_probes(now):
        if window is not None:
            wait_window(len(probe.slot_headers[0]))
            open_[0] += len(probe.slot_headers[0])
        for o in probe.slot_headers[0]:
            _SEQ_TIME.pack_into(probe.buf, o + 2, PROBE_SEQ, now)
        if probe.slot_pids:
            patch_ids(probe.buf, probe.slot_pids[0])
        sendall(probe.slot_views[0])

    slot_headers, slot_views, slot_pids, slots = ring.slot_headers, ring.slot_views, ring.slot_pids, ring.slots
    rbuf = ring.buf
    pack = _SEQ_TIME.pack_into
    clock = time.monotonic_ns
    writes = array.array("q")  # each batch's clock read just before its sendall

    def send_batch(n, now):
        if window is not None:
            wait_window(b)
            open_[0] += b
        s = n % slots
        seq = n * b
        for o in slot_headers[s]:
            pack(rbuf, o + 2, seq, now)
            seq += 1
        if slot_pids is not None:
            patch_ids(rbuf, slot_pids[s])
        view = slot_views[s]
        writes.append(clock())
        sendall(view)
        tx.batch(len(view))
        if n % _COLLECT_EVERY == _COLLECT_EVERY - 1:
            collect()

    ctl = _PubControl(conn)
    conn.send(("connected", index))
    _wait_start(ctl, send_probes, drain)
    report = None
    try:
        if not ctl.abort:
            if spec.kernel_timestamps:
                tx.start()
            report = _pace(spec, index, ctl, b, send_batch, drain, None if window is None else answer_while)
        tx.finish(realtime_offset_ns(), _FLUSH_TIMEOUT_S)
        t = time.monotonic()
        try:
            if is_mqtt:
                _finish_exchanges(sock, stream, on_packet, t + _FLUSH_TIMEOUT_S)
                sendall(mw.encode_disconnect())
            else:
                nw.flush(sock, stream, timeout_s=_FLUSH_TIMEOUT_S)
            flushed = True
        except TimeoutError:
            flushed = False
        flush_s = time.monotonic() - t
    finally:
        sock.close()
    if report is not None:
        tx_ns = np.array(tx.batch_ns(), dtype=np.int64) if tx.started else None
        report.update(
            flushed=flushed,
            flush_s=flush_s,
            acks=acks[0] if spec.qos else None,
            batch_write_ns=np.frombuffer(writes, dtype=np.int64).copy(),
            batch_tx_ns=tx_ns,
        )
        conn.send(("result", report))


def _zmq_publisher(spec, index, conn, endpoints):
    import zmq  # optional heavy dependency: pyzmq, needed only for protocol "zmq"

    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, spec.zmq_hwm)
    pub.setsockopt(zmq.LINGER, int(_FLUSH_TIMEOUT_S * 1000))
    if spec.zmq_mode == "direct":
        for ep in endpoints:
            pub.connect(ep)
    else:
        pub.connect(f"tcp://{spec.host}:{spec.pub_port}")

    class _Tmpl:
        def __init__(self, k):
            head = topic_name(k).encode() + b"\0"
            self.buf = bytearray(head + bytes(spec.payload_bytes))
            self.payload_offset = len(head)

        def patch(self, fmt, offset, *values):
            struct.pack_into(fmt, self.buf, self.payload_offset + offset, *values)

    templates = [_Tmpl(k) for k in range(spec.topics)]
    _stamp_templates(templates, index)
    b = batch_size(spec)
    t = spec.topics
    order = [templates[(j + index) % t] for j in range(t)]  # order[seq % t] is message seq's template
    bufs = [(tm.buf, tm.payload_offset + 2) for tm in order]
    send = pub.send
    pack = _SEQ_TIME.pack_into

    def send_probes(now):
        for tm in templates:
            pack(tm.buf, tm.payload_offset + 2, PROBE_SEQ, now)
            send(tm.buf, copy=True)

    def send_batch(n, now):
        seq = n * b
        j = seq % t
        for _ in range(b):
            buf, o = bufs[j]
            pack(buf, o, seq, now)
            send(buf, copy=True)
            seq += 1
            j += 1
            if j == t:
                j = 0

    def drain():
        pass

    ctl = _PubControl(conn)
    conn.send(("connected", index))
    report = None
    try:
        _wait_start(ctl, send_probes, drain)
        if not ctl.abort:
            report = _pace(spec, index, ctl, b, send_batch, drain)
    finally:
        t1 = time.monotonic()
        pub.close()
        ctx.term()
    if report is not None:
        report.update(flushed=True, flush_s=time.monotonic() - t1, acks=None)
        conn.send(("result", report))
