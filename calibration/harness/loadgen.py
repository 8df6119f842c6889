"""Load generator for real brokers: raw MQTT / NATS / ZeroMQ, one process per client.

:func:`run_load` drives a broker with :class:`LoadSpec` and returns a
:class:`LoadResult` with every delivery of the measurement window (latency,
loss, duplicates). Client libraries (paho, pika) saturate before the brokers
on a small machine, so the clients here speak the wire protocols directly
(:mod:`.mqttwire`, :mod:`.natswire`; ZeroMQ through pyzmq) from pre-encoded
packets patched in place.

Workload (shared with the simulated twin, :mod:`pubsim.calibration.workload`)
---------------------------------------------------------------------
Topic ``k`` is ``pubsim/t{k}`` (NATS subject ``pubsim.t{k}``). Publisher
``i`` sends its message ``seq`` on topic ``(seq + i) mod topics``: every
publisher cycles over all topics. Topic ``k`` is subscribed by the
``fanout`` subscribers ``(k * fanout + m) mod subscribers``, ``m = 0 ..
fanout - 1``; so each topic has exactly ``fanout`` subscribers and a message
is owed ``fanout`` deliveries. A subscriber left without a topic subscribes
to ``pubsim/idle``, which nobody publishes.

Message payload
---------------
``payload_bytes`` (>= 20) bytes; the first 20 are a little-endian header
``<HQQH``: publisher id (u16), sequence number (u64, from 0 per publisher),
send time (u64 ns of ``time.monotonic_ns``, CLOCK_MONOTONIC: one clock for
all processes of the host), topic index (u16). The rest is zeros. Set-up
probes carry sequence number 2**64 - 1 and are never counted.

ZeroMQ framing
--------------
One frame per message: the topic name, a NUL byte, then the payload.
Subscribers subscribe to ``topic + b"\\0"``, so ZeroMQ's prefix matching is
exact (``pubsim/t1`` does not match ``pubsim/t10``). ``zmq_mode="proxy"``:
publishers connect to ``pub_port`` (the proxy's XSUB side), subscribers to
``sub_port`` (its XPUB side). ``zmq_mode="direct"`` (no broker): every
subscriber binds an ephemeral port and every publisher connects to all of
them (the publishers do the fan-out). ``zmq_hwm`` sets ZMQ_SNDHWM on
publishers and ZMQ_RCVHWM on subscribers; a full queue drops messages
(counted as lost).

Pacing
------
Publisher ``i`` offers ``rate_per_s / publishers`` msg/s in batches of
``b`` messages: ``b = round(rate_i x batch_interval_s)`` clipped to
``[1, max_batch]`` (and to 256 KiB of packets), then rounded to a multiple
of ``topics`` when ``b >= topics`` or down to a divisor of ``topics``
otherwise (the packets of a batch are pre-encoded). Batch ``n`` is due at
``t0 + n x b / rate_i``: the publisher sleeps until it is due, stamps all
its messages with one send time (read just before they are patched) and
writes them with one ``sendall`` (ZeroMQ: one ``send`` per message). A
publisher behind schedule sends the next batch at once without sleeping,
and stops at ``t0 + duration_s`` whatever it still owes. Its lag (send time
minus due time) is reported. Messages whose send time is in ``[t0 +
warmup_s, t0 + duration_s - cooldown_s)`` are the measurement window; the
others are sent but not counted.

Run sequence
------------
1. Subscriber processes start, connect and subscribe (MQTT: SUBACK
   received; NATS: PING/PONG after the SUBs; ZeroMQ: subscription set).
2. Publisher processes start and connect (MQTT: CONNACK; NATS: PONG), then
   send a probe on every topic every 20 ms.
3. A subscriber is ready when it has received a probe from every publisher
   on every one of its topics: routing works end to end (this also waits
   out ZeroMQ's slow joiner).
4. When all are ready the parent sends a common start time ``t0`` (now +
   0.1 s); publishers stop probing and start at ``t0``.
5. Each publisher stops at ``t0 + duration_s``, flushes (MQTT PINGREQ /
   PINGRESP, NATS PING / PONG: the broker has read everything before it)
   and reports its batch send times.
6. Drain: ``drain_s`` if given, else until every copy owed for the messages
   sent has arrived, or no copy arrived for 0.5 s, or ``max_drain_s``.
7. Subscribers stop and send their records (numpy arrays, one record per
   received message: header + receive time); duplicates (a ``(publisher,
   seq)`` seen before) and out-of-order arrivals (a ``seq`` below one seen
   before from the same publisher) are flagged by the subscriber.

Processes are started with the ``forkserver`` context (``spawn`` where it
is unavailable), so a script calling :func:`run_load` needs the usual
``if __name__ == "__main__":`` guard. Children ignore SIGINT; on any error
or Ctrl-C in the parent they are terminated and joined in a ``finally``.
Children exit by themselves when the parent's pipe closes.
"""
from __future__ import annotations

import array
import math
import multiprocessing as mp
import os
import signal
import socket
import struct
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from ...sim.errors import ConfigError

from ..workload import IDLE_TOPIC, topic_assignment, topic_name
from . import procfs

__all__ = ["PROTOCOLS", "HEADER", "HEADER_BYTES", "RECORD_DTYPE", "PROBE_SEQ", "LoadSpec", "LoadResult",
           "HarnessError", "run_load", "subscriber_topics", "topic_of"]

PROTOCOLS = ("mqtt", "nats", "zmq")
ZMQ_MODES = ("proxy", "direct")

HEADER = struct.Struct("<HQQH")  # publisher id, seq, t_send_ns, topic index
HEADER_BYTES = HEADER.size  # 20
RECORD_DTYPE = np.dtype({"names": ["pub", "seq", "t_send_ns", "topic", "t_recv_ns"],
                         "formats": ["<u2", "<u8", "<u8", "<u2", "<i8"],
                         "offsets": [0, 2, 10, 18, 20], "itemsize": 28})
STRIDE = RECORD_DTYPE.itemsize
PROBE_SEQ = 2**64 - 1
_SEQ_TIME = struct.Struct("<QQ")  # patched at header offset 2

_PROBE_PERIOD_NS = 20_000_000
_CONTROL_PERIOD_NS = 50_000_000
_START_LEAD_NS = 100_000_000
_READ_BYTES = 256 * 1024
_MAX_BATCH_BYTES = 256 * 1024
BATCH_INTERVAL_S = 0.001  # default pacing interval of a publisher, s
MAX_BATCH = 256  # default largest batch, messages
_FLUSH_TIMEOUT_S = 10.0
_QUIET_NS = 500_000_000


class HarnessError(RuntimeError):
    """A client process failed or did not get ready in time."""


# ----------------------------------------------------------------------------------------------
# Specification


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and math.isfinite(v)


@dataclass(frozen=True, kw_only=True)
class LoadSpec:
    """One load run (see the module docstring for the workload and the pacing).

    Parameters
    ----------
    protocol : str
        ``"mqtt"``, ``"nats"`` or ``"zmq"``.
    rate_per_s : float
        Offered load over all publishers, msg/s (split evenly).
    duration_s, warmup_s, cooldown_s : float
        Publishing time, s; messages sent in the first ``warmup_s`` and the
        last ``cooldown_s`` are not counted.
    pub_port, sub_port : int or None
        Broker ports for publishers and subscribers (MQTT / NATS: one port,
        ``sub_port`` defaults to ``pub_port``; ZeroMQ proxy: the XSUB and
        XPUB ports; ZeroMQ direct: unused).
    host : str
    publishers, subscribers : int
        Client processes (>= 1 each).
    topics, fanout : int
        Topic count and subscribers per topic (``fanout <= subscribers``).
    payload_bytes : int
        >= 20 (the header).
    qos : int
        MQTT QoS of publications and subscriptions (0 or 1; 0 for the others).
    pub_cpus, sub_cpus : tuple of int or None
        CPU sets (``os.sched_setaffinity``) of the publisher and subscriber
        processes.
    drain_s : float or None
        Fixed wait after the last send; None: adaptive (module docstring).
    max_drain_s : float
        Upper bound of the adaptive drain.
    batch_interval_s : float
        Target time between a publisher's batches (pacing granularity).
    max_batch : int
        Most messages per batch (a publisher behind schedule sends batches
        back to back).
    zmq_mode : str
        ``"proxy"`` or ``"direct"``.
    zmq_hwm : int
        ZMQ_SNDHWM / ZMQ_RCVHWM, messages (0: unlimited).
    setup_timeout_s : float
        Time allowed for connecting, subscribing and the probe round.
    mqtt_username, mqtt_password : str or None
        MQTT CONNECT credentials (None: none sent; ejabberd's mod_mqtt
        needs a password even for anonymous login).
    """

    protocol: str
    rate_per_s: float
    duration_s: float
    warmup_s: float = 0.0
    cooldown_s: float = 0.0
    pub_port: int | None = None
    sub_port: int | None = None
    host: str = "127.0.0.1"
    publishers: int = 1
    subscribers: int = 1
    topics: int = 1
    fanout: int = 1
    payload_bytes: int = 64
    qos: int = 0
    pub_cpus: tuple | None = None
    sub_cpus: tuple | None = None
    drain_s: float | None = None
    max_drain_s: float = 10.0
    batch_interval_s: float = BATCH_INTERVAL_S
    max_batch: int = MAX_BATCH
    zmq_mode: str = "proxy"
    zmq_hwm: int = 1000
    setup_timeout_s: float = 20.0
    mqtt_username: str | None = None
    mqtt_password: str | None = None

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise ConfigError("protocol", self.protocol, f"one of {', '.join(PROTOCOLS)}")
        for name in ("publishers", "subscribers", "topics", "fanout"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= 65535:
                raise ConfigError(name, v, "an integer in 1..65535")
        if self.fanout > self.subscribers:
            raise ConfigError("fanout", self.fanout, f"at most subscribers ({self.subscribers})")
        if not _is_int(self.payload_bytes) or not HEADER_BYTES <= self.payload_bytes <= 256 * 2**20:
            raise ConfigError("payload_bytes", self.payload_bytes,
                              f"an integer in {HEADER_BYTES}..{256 * 2**20} (the header takes {HEADER_BYTES})")
        if self.qos not in (0, 1) or isinstance(self.qos, bool):
            raise ConfigError("qos", self.qos, "0 or 1")
        if self.qos and self.protocol != "mqtt":
            raise ConfigError("qos", self.qos, f"0 for protocol {self.protocol} (QoS 1 is MQTT only)")
        if not _is_num(self.rate_per_s) or self.rate_per_s <= 0:
            raise ConfigError("rate_per_s", self.rate_per_s, "a finite rate > 0 msg/s")
        for name in ("duration_s", "warmup_s", "cooldown_s"):
            v = getattr(self, name)
            if not _is_num(v) or v < 0:
                raise ConfigError(name, v, "a finite number of seconds >= 0")
        if self.warmup_s + self.cooldown_s >= self.duration_s:
            raise ConfigError("warmup_s", self.warmup_s,
                              f"warmup + cooldown < duration ({self.duration_s} s)")
        if self.drain_s is not None and (not _is_num(self.drain_s) or self.drain_s < 0):
            raise ConfigError("drain_s", self.drain_s, "None or a finite number of seconds >= 0")
        for name in ("max_drain_s", "setup_timeout_s", "batch_interval_s"):
            v = getattr(self, name)
            if not _is_num(v) or v <= 0:
                raise ConfigError(name, v, "a finite number of seconds > 0")
        if not _is_int(self.max_batch) or self.max_batch < 1:
            raise ConfigError("max_batch", self.max_batch, "an integer >= 1")
        if self.zmq_mode not in ZMQ_MODES:
            raise ConfigError("zmq_mode", self.zmq_mode, "'proxy' or 'direct'")
        if not _is_int(self.zmq_hwm) or self.zmq_hwm < 0:
            raise ConfigError("zmq_hwm", self.zmq_hwm, "an integer >= 0 (0: no limit)")
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError("host", self.host, "a host name or address")
        for name in ("mqtt_username", "mqtt_password"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ConfigError(name, getattr(self, name), "a string or None")
        if self.mqtt_password is not None and self.mqtt_username is None:
            raise ConfigError("mqtt_password", "***", "only with mqtt_username (MQTT 3.1.1)")
        need = {"mqtt": ("pub_port",), "nats": ("pub_port",),
                "zmq": ("pub_port", "sub_port") if self.zmq_mode == "proxy" else ()}[self.protocol]
        for name in ("pub_port", "sub_port"):
            v = getattr(self, name)
            if v is None:
                if name in need:
                    raise ConfigError(name, v, f"a TCP port in 1..65535 for protocol {self.protocol}"
                                      + (f" ({self.zmq_mode} mode)" if self.protocol == "zmq" else ""))
            elif not _is_int(v) or not 1 <= v <= 65535:
                raise ConfigError(name, v, "a TCP port in 1..65535")
        try:
            allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):  # pragma: no cover - non-Linux
            allowed = None
        for name in ("pub_cpus", "sub_cpus"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, list):
                object.__setattr__(self, name, tuple(v))
                v = tuple(v)
            if not isinstance(v, tuple) or not v or not all(_is_int(c) and c >= 0 for c in v):
                raise ConfigError(name, v, "None or a non-empty tuple of CPU numbers")
            if allowed is not None and not set(v) <= allowed:
                raise ConfigError(name, v, f"CPUs this process may use: {sorted(allowed)}")

    @property
    def window_s(self):
        return self.duration_s - self.warmup_s - self.cooldown_s

    @property
    def sub_port_effective(self):
        return self.pub_port if self.sub_port is None and self.protocol != "zmq" else self.sub_port


def topic_of(publisher, seq, topics):
    """Topic index of message ``seq`` of ``publisher``."""
    return (seq + publisher) % topics


def subscriber_topics(spec):
    """Topic indices of every subscriber (``[]`` for an idle one)."""
    _, filters = topic_assignment(publishers=spec.publishers, subscribers=spec.subscribers,
                                  topics=spec.topics, fanout=spec.fanout)
    return [[int(f.rsplit("/t", 1)[1]) for f in fs if f != IDLE_TOPIC] for fs in filters]


def batch_size(spec):
    """Messages per batch of one publisher of ``spec`` (module docstring, Pacing)."""
    return pacing_batch(spec.rate_per_s / spec.publishers, spec.payload_bytes, spec.topics,
                        max_batch=spec.max_batch, batch_interval_s=spec.batch_interval_s)


def pacing_batch(rate_per_s, payload_bytes, topics, *, max_batch=MAX_BATCH, batch_interval_s=BATCH_INTERVAL_S):
    """Messages per batch of a publisher sending ``rate_per_s`` (module docstring, Pacing)."""
    pkt = payload_bytes + 64
    cap = max(1, min(max_batch, _MAX_BATCH_BYTES // pkt))
    b = int(min(max(1, round(rate_per_s * batch_interval_s)), cap))
    t = topics
    if b >= t:
        return b - b % t
    return max(d for d in range(1, b + 1) if t % d == 0)


# ----------------------------------------------------------------------------------------------
# Child process helpers


def _child_setup(cpus):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cpus is not None:
        os.sched_setaffinity(0, cpus)


_schedstat = procfs.thread_schedstat


def _report_error(conn, role, index):
    try:
        conn.send(("error", f"{role} {index}: {traceback.format_exc()}"))
    except Exception:  # noqa: BLE001 - the parent is gone
        pass


class _Records:
    """Growable record buffer: ``bytearray`` chunks of :data:`RECORD_DTYPE` records."""

    def __init__(self, first_records):
        self.chunk_records = int(first_records)
        self.done = []
        self.buf = bytearray(self.chunk_records * STRIDE)
        self.off = 0
        self.count_before = 0  # records in finished chunks

    def ensure(self, n_records):
        if self.off + n_records * STRIDE > len(self.buf):
            self.done.append(self.buf[:self.off])
            self.count_before += self.off // STRIDE
            self.chunk_records = max(min(self.chunk_records * 2, 4_000_000), n_records)
            self.buf = bytearray(self.chunk_records * STRIDE)
            self.off = 0

    @property
    def count(self):
        return self.count_before + self.off // STRIDE

    def record_at(self, k):
        """``HEADER`` fields of record ``k`` of the current chunk."""
        return HEADER.unpack_from(self.buf, k * STRIDE)

    def array(self):
        parts = [np.frombuffer(bytes(c), dtype=RECORD_DTYPE) for c in self.done + [self.buf[:self.off]]]
        return np.concatenate(parts) if parts else np.zeros(0, RECORD_DTYPE)


def _flag_records(rec):
    """(duplicate, out_of_order) boolean arrays, in arrival order."""
    n = len(rec)
    dup = np.zeros(n, bool)
    ooo = np.zeros(n, bool)
    if n == 0:
        return dup, ooo
    pub = rec["pub"]
    seq = rec["seq"]
    order = np.lexsort((np.arange(n), seq, pub))
    same = (pub[order][1:] == pub[order][:-1]) & (seq[order][1:] == seq[order][:-1])
    dup[order[1:][same]] = True
    for p in np.unique(pub):
        idx = np.flatnonzero(pub == p)
        s = seq[idx]
        prev_max = np.maximum.accumulate(s)[:-1]
        ooo[idx[1:]] = s[1:] < prev_max
    return dup, ooo


# ----------------------------------------------------------------------------------------------
# Subscriber process


def _subscriber_main(spec, index, topics, counters, conn):
    try:
        _child_setup(spec.sub_cpus)
        if spec.protocol == "zmq":
            _zmq_subscriber(spec, index, topics, conn, counters)
        else:
            _stream_subscriber(spec, index, topics, conn, counters)
    except BaseException:
        _report_error(conn, "subscriber", index)
    finally:
        conn.close()


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
                    self.sched0 = (time.monotonic_ns(), *_schedstat())
                elif msg[0] == "stop":
                    self.stop = True
        except (EOFError, OSError):
            raise SystemExit(0) from None  # the parent is gone

    def finish(self, extra=None):
        rec = self.rec.array()
        rec = rec[rec["seq"] != np.uint64(PROBE_SEQ)]
        dup, ooo = _flag_records(rec)
        t1, run1, wait1 = time.monotonic_ns(), *_schedstat()
        if self.sched0 is not None:
            t0, run0, wait0 = self.sched0
            wall = max(t1 - t0, 1)
            cpu, runnable = (run1 - run0) / wall, (run1 - run0 + wait1 - wait0) / wall
        else:
            cpu = runnable = math.nan
        out = {"index": self.index, "records": rec, "duplicate": dup, "out_of_order": ooo,
               "disconnected": self.disconnected, "cpu_fraction": cpu, "runnable_fraction": runnable}
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


def _stream_subscriber(spec, index, topics, conn, counters):
    from . import mqttwire as mw
    from . import natswire as nw

    port = spec.sub_port_effective
    names = [topic_name(k) for k in topics] or [IDLE_TOPIC]
    keepalive = int(min(65535, max(60, 3 * (spec.duration_s + spec.setup_timeout_s + spec.max_drain_s))))
    if spec.protocol == "mqtt":
        sock, stream = mw.connect(port, f"pubsim-sub{index}-{os.getpid()}", host=spec.host,
                                  keepalive=keepalive, timeout_s=spec.setup_timeout_s,
                                  username=spec.mqtt_username, password=spec.mqtt_password)
        mw.subscribe(sock, stream, names, qos=spec.qos, timeout_s=spec.setup_timeout_s)
        min_msg = 4 + HEADER_BYTES
    else:
        sock, stream, _ = nw.connect(port, host=spec.host, name=f"pubsim-sub{index}",
                                     timeout_s=spec.setup_timeout_s)
        nw.subscribe(sock, stream, [nw.subject_for(n) for n in names], timeout_s=spec.setup_timeout_s)
        min_msg = 12 + HEADER_BYTES
    conn.send(("subscribed", index, None))
    rec = _Records(_expected_records(spec, topics))
    st = _SubState(spec, index, topics, conn, counters, rec)
    sock.settimeout(_CONTROL_PERIOD_NS / 1e9)
    ack_ids = [] if spec.qos else None
    is_mqtt = spec.protocol == "mqtt"
    recv = sock.recv
    clock = time.monotonic_ns
    try:
        while not st.stop:
            data = None
            if st.disconnected is None:
                try:
                    data = recv(_READ_BYTES)
                except socket.timeout:
                    pass
                except OSError as e:
                    st.disconnected = f"{type(e).__name__}: {e}"
            now = clock()
            if data is not None:
                if not data:
                    st.disconnected = "closed by the broker"
                else:
                    rec.ensure((stream.pending + len(data)) // min_msg + 1)
                    if is_mqtt:
                        rec.off, others = stream.feed_records(data, now, rec.buf, rec.off,
                                                              header_bytes=HEADER_BYTES, stride=STRIDE,
                                                              ack_ids=ack_ids)
                        if ack_ids:
                            _send_blocking(sock, b"".join(mw.encode_puback(p) for p in ack_ids))
                            ack_ids.clear()
                    else:
                        rec.off, others = stream.feed_records(data, now, rec.buf, rec.off,
                                                              header_bytes=HEADER_BYTES, stride=STRIDE)
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


def _zmq_subscriber(spec, index, topics, conn, counters):
    import zmq

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
    for n in names:
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
                    buf[off:off + HEADER_BYTES] = frame[p:p + HEADER_BYTES]
                    pack_t(buf, off + HEADER_BYTES, t)
                    off += STRIDE
                rec.off = off
                st.after_read()
            st.control(clock())
    finally:
        sub.close(0)
    st.finish()


# ----------------------------------------------------------------------------------------------
# Publisher process


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
        self.slot_views = [self.view[bounds[s]:bounds[s + 1]] for s in range(self.slots)]
        self.slot_headers = [self.header_offsets[s * b:(s + 1) * b] for s in range(self.slots)]
        self.slot_pids = ([self.packet_id_offsets[s * b:(s + 1) * b] for s in range(self.slots)]
                          if self.packet_id_offsets else None)


def _stamp_templates(templates, index):
    for k, tmpl in enumerate(templates):
        tmpl.patch("<H", 0, index)
        tmpl.patch("<H", 18, k)


class _PubControl:
    def __init__(self, conn):
        self.conn = conn
        self.start_ns = None
        self.abort = False

    def poll(self):
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if msg[0] == "start":
                    self.start_ns = msg[1]
                elif msg[0] == "stop":
                    self.abort = True
        except (EOFError, OSError):
            raise SystemExit(0) from None


def _wait_start(ctl, send_probes, drain):
    """Send a probe round every 20 ms until the parent sends the start time."""
    next_probe = 0
    while ctl.start_ns is None and not ctl.abort:
        now = time.monotonic_ns()
        if now >= next_probe:
            send_probes(now)
            next_probe = now + _PROBE_PERIOD_NS
        drain()
        ctl.conn.poll(0.005)
        ctl.poll()


def _sleep_until(t_ns):
    d = t_ns - time.monotonic_ns()
    if d > 0:
        time.sleep(d / 1e9)


def _pace(spec, index, ctl, b, send_batch, drain):
    """The publishing loop; returns the publisher's report (module docstring, Pacing)."""
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
            time.sleep((due - now) / 1e9)
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
    return {"index": index, "batch": b, "interval_ns": interval, "t0_ns": t0,
            "batch_t_send_ns": np.frombuffer(sent_at, dtype=np.int64).copy(), "sent": n * b,
            "lag_max_ns": lag_max, "cpu_fraction": (run1 - run0) / wall,
            "runnable_fraction": (run1 - run0 + wait1 - wait0) / wall, "loop_wall_ns": wall}


def _stream_publisher(spec, index, conn):
    from . import mqttwire as mw
    from . import natswire as nw

    is_mqtt = spec.protocol == "mqtt"
    keepalive = int(min(65535, max(60, 3 * (spec.duration_s + spec.setup_timeout_s + spec.max_drain_s))))
    if is_mqtt:
        sock, stream = mw.connect(spec.pub_port, f"pubsim-pub{index}-{os.getpid()}", host=spec.host,
                                  keepalive=keepalive, timeout_s=spec.setup_timeout_s,
                                  username=spec.mqtt_username, password=spec.mqtt_password)
        templates = [mw.PublishTemplate(topic_name(k), spec.payload_bytes, qos=spec.qos)
                     for k in range(spec.topics)]
    else:
        sock, stream, _ = nw.connect(spec.pub_port, host=spec.host, name=f"pubsim-pub{index}",
                                     timeout_s=spec.setup_timeout_s)
        templates = [nw.NatsPublishTemplate(nw.subject_for(topic_name(k)), spec.payload_bytes)
                     for k in range(spec.topics)]
    _stamp_templates(templates, index)
    b = batch_size(spec)
    ring = _Ring(templates, index, b)
    probe = _Ring(templates, 0, spec.topics)  # one message per topic, in topic order
    sendall = sock.sendall
    acks = [0]
    pings = [0]
    pid = [0]

    def drain():
        while True:
            try:
                data = sock.recv(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                raise HarnessError("connection closed by the broker")
            for item in stream.feed(data):
                if is_mqtt:
                    acks[0] += item.type == mw.PUBACK
                elif item.op == "PING":
                    pings[0] += 1
                    sendall(nw.PONG)
                elif item.op == "-ERR":
                    raise HarnessError(f"NATS error: {item.payload.decode(errors='replace')}")

    def patch_ids(buf, offsets):
        pid[0] = mw.patch_packet_ids(buf, offsets, pid[0])

    def send_probes(now):
        for o in probe.slot_headers[0]:
            _SEQ_TIME.pack_into(probe.buf, o + 2, PROBE_SEQ, now)
        if probe.slot_pids:
            patch_ids(probe.buf, probe.slot_pids[0])
        sendall(probe.slot_views[0])

    slot_headers, slot_views, slot_pids, slots = ring.slot_headers, ring.slot_views, ring.slot_pids, ring.slots
    rbuf = ring.buf
    pack = _SEQ_TIME.pack_into

    def send_batch(n, now):
        s = n % slots
        seq = n * b
        for o in slot_headers[s]:
            pack(rbuf, o + 2, seq, now)
            seq += 1
        if slot_pids is not None:
            patch_ids(rbuf, slot_pids[s])
        sendall(slot_views[s])

    ctl = _PubControl(conn)
    conn.send(("connected", index))
    _wait_start(ctl, send_probes, drain)
    report = None
    try:
        if not ctl.abort:
            report = _pace(spec, index, ctl, b, send_batch, drain)
        t = time.monotonic()
        try:
            if is_mqtt:
                sendall(mw.encode_pingreq())
                mw._recv_packet(sock, stream, mw.PINGRESP, t + _FLUSH_TIMEOUT_S)
                acks[0] += sum(p.type == mw.PUBACK for p in stream.backlog)
                stream.backlog.clear()
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
        report.update(flushed=flushed, flush_s=flush_s, acks=acks[0] if spec.qos else None)
        conn.send(("result", report))


def _zmq_publisher(spec, index, conn, endpoints):
    import zmq

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


# ----------------------------------------------------------------------------------------------
# Parent


def _context():
    methods = mp.get_all_start_methods()
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        return ctx
    return mp.get_context("spawn")


class _Child:
    def __init__(self, ctx, role, index, target, args):
        self.role, self.index = role, index
        self.conn, child_conn = ctx.Pipe()
        spec, *extra = args
        self.proc = ctx.Process(target=target, args=(spec, index, *extra, child_conn),
                                name=f"pubsim-{role}{index}", daemon=True)
        self._child_conn = child_conn

    def start(self):
        self.proc.start()
        self._child_conn.close()

    def recv(self, expect, deadline):
        """The next message, which must be ``expect``; raises :class:`HarnessError` otherwise."""
        while True:
            if self.conn.poll(0.05):
                try:
                    msg = self.conn.recv()
                except EOFError:
                    msg = None
                if msg is None:
                    raise HarnessError(f"{self.role} {self.index} exited (code {self.proc.exitcode}) "
                                       f"while the harness waited for '{expect}'")
                if msg[0] == "error":
                    raise HarnessError(msg[1])
                if msg[0] != expect:
                    raise HarnessError(f"{self.role} {self.index}: expected '{expect}', got '{msg[0]}'")
                return msg
            if not self.proc.is_alive() and not self.conn.poll():
                raise HarnessError(f"{self.role} {self.index} exited (code {self.proc.exitcode}) "
                                   f"while the harness waited for '{expect}'")
            if time.monotonic() > deadline:
                raise HarnessError(f"{self.role} {self.index}: no '{expect}' within the time allowed")

    def send(self, msg):
        try:
            self.conn.send(msg)
        except (BrokenPipeError, OSError):
            pass


def _stop_children(children):
    for c in children:
        c.send(("stop",))
    for c in children:
        if c.proc.pid is None:
            continue
        c.proc.join(timeout=0)
    for c in children:
        if c.proc.pid is not None and c.proc.is_alive():
            c.proc.terminate()
    for c in children:
        if c.proc.pid is None:
            continue
        c.proc.join(timeout=3)
        if c.proc.is_alive():
            c.proc.kill()
            c.proc.join(timeout=3)
        c.conn.close()


def run_load(spec):
    """Run ``spec`` against a broker (or ZeroMQ direct); see the module docstring.

    Raises :class:`HarnessError` when a client fails (connection refused,
    subscription refused, set-up timeout).
    """
    if not isinstance(spec, LoadSpec):
        raise TypeError("run_load needs a LoadSpec")
    ctx = _context()
    sub_topics = subscriber_topics(spec)
    counters = ctx.RawArray("q", spec.subscribers)
    children = []
    wall = {}
    t_begin = time.monotonic()
    try:
        deadline = t_begin + spec.setup_timeout_s
        subs = [_Child(ctx, "subscriber", j, _subscriber_main, (spec, sub_topics[j], counters))
                for j in range(spec.subscribers)]
        children += subs
        for c in subs:
            c.start()
        endpoints = [c.recv("subscribed", deadline)[2] for c in subs]
        pubs = [_Child(ctx, "publisher", i, _publisher_main, (spec, endpoints))
                for i in range(spec.publishers)]
        children += pubs
        for c in pubs:
            c.start()
        for c in pubs:
            c.recv("connected", deadline)
        for c in subs:
            c.recv("ready", deadline)
        t0 = time.monotonic_ns() + _START_LEAD_NS
        for c in subs + pubs:
            c.send(("start", t0))
        t_ready = time.monotonic()
        wall["setup_s"] = t_ready - t_begin
        run_deadline = time.monotonic() + spec.duration_s + _FLUSH_TIMEOUT_S + 30.0
        pub_reports = [c.recv("result", run_deadline)[1] for c in pubs]
        t_sent = time.monotonic()
        wall["run_s"] = t_sent - t_ready
        owed = sum(r["sent"] for r in pub_reports) * spec.fanout
        drain_complete = _drain(spec, counters, owed)
        wall["drain_s"] = time.monotonic() - t_sent
        for c in subs:
            c.send(("stop",))
        collect_deadline = time.monotonic() + 60.0
        sub_reports = [c.recv("result", collect_deadline)[1] for c in subs]
        for c in children:
            c.proc.join(timeout=5)
        wall["total_s"] = time.monotonic() - t_begin
    finally:
        _stop_children(children)
    return LoadResult._build(spec, t0, pub_reports, sub_reports, wall, drain_complete, sub_topics)


def _drain(spec, counters, owed):
    """Wait after the last send; whether every owed copy arrived."""
    t_start = time.monotonic_ns()
    if spec.drain_s is not None:
        time.sleep(spec.drain_s)
        return sum(counters) >= owed
    t_max = t_start + int(spec.max_drain_s * 1e9)
    last, last_change = sum(counters), t_start
    while True:
        got = sum(counters)
        now = time.monotonic_ns()
        if got >= owed:
            return True
        if got != last:
            last, last_change = got, now
        if now - last_change >= _QUIET_NS or now >= t_max:
            return False
        time.sleep(0.01)


# ----------------------------------------------------------------------------------------------
# Results


@dataclass
class LoadResult:
    """What one :func:`run_load` measured.

    Attributes
    ----------
    spec : LoadSpec
    offered_per_s : float
        ``spec.rate_per_s``.
    t0_ns : int
        Common start time (CLOCK_MONOTONIC ns); times in seconds below are
        relative to it.
    window_s : (float, float)
        Measurement window of send times, s after ``t0``.
    sent : numpy.ndarray
        Messages sent per publisher (whole run).
    sent_in_window : numpy.ndarray
        Messages sent per publisher with a send time in the window.
    send_windows : list of (float, float)
        First and last send time of each publisher, s after ``t0`` (NaN when
        it sent nothing).
    deliveries : pandas.DataFrame
        One row per received copy of a message sent in the window:
        ``subscriber``, ``publisher``, ``seq``, ``topic``, ``t_send_s``,
        ``t_recv_s`` (s after ``t0``), ``latency_s``, ``duplicate`` (a
        second or later copy), ``out_of_order``.
    publishers, subscribers : list of dict
        Per-client figures (batch size, lag, CPU; received, duplicates,
        out-of-order, disconnection).
    wall : dict
        Wall times, s: ``setup_s``, ``run_s``, ``drain_s``, ``total_s``.
    drain_complete : bool
        Every copy owed for every message sent (whole run) arrived before
        the drain ended.
    """

    spec: LoadSpec
    offered_per_s: float
    t0_ns: int
    window_s: tuple
    sent: np.ndarray
    sent_in_window: np.ndarray
    send_windows: list
    deliveries: object
    publishers: list
    subscribers: list
    wall: dict
    drain_complete: bool
    _scheduled_in_window: int = field(default=0, repr=False)

    @classmethod
    def _build(cls, spec, t0, pub_reports, sub_reports, wall, drain_complete, sub_topics):
        import pandas as pd

        w0 = t0 + int(round(spec.warmup_s * 1e9))
        w1 = t0 + int(round((spec.duration_s - spec.cooldown_s) * 1e9))
        sent, in_window, send_windows, publishers = [], [], [], []
        scheduled = 0
        for r in sorted(pub_reports, key=lambda r: r["index"]):
            ts = r["batch_t_send_ns"]
            lo, hi = np.searchsorted(ts, [w0, w1], side="left")
            sent.append(r["sent"])
            in_window.append(int(hi - lo) * r["batch"])
            send_windows.append(((ts[0] - t0) / 1e9, (ts[-1] - t0) / 1e9) if len(ts) else (math.nan, math.nan))
            due = t0 + (np.arange(len(ts)) * r["interval_ns"]).astype(np.int64)
            lag = ts - due
            # batches due in the window, whether sent or not
            n_lo = math.ceil((w0 - t0) / r["interval_ns"])
            n_hi = math.ceil((w1 - t0) / r["interval_ns"])
            scheduled += (n_hi - n_lo) * r["batch"]
            publishers.append({
                "index": r["index"], "batch": r["batch"], "batch_interval_s": r["interval_ns"] / 1e9,
                "sent": r["sent"], "sent_in_window": in_window[-1],
                "lag_max_s": r["lag_max_ns"] / 1e9,
                "lag_end_s": float(lag[hi - 1]) / 1e9 if hi > 0 else math.nan,
                "cpu_fraction": r["cpu_fraction"], "runnable_fraction": r["runnable_fraction"],
                "flushed": r["flushed"], "flush_s": r["flush_s"], "acks": r["acks"]})
        frames, subscribers = [], []
        for r in sorted(sub_reports, key=lambda r: r["index"]):
            rec = r["records"]
            ts = rec["t_send_ns"].astype(np.int64)
            m = (ts >= w0) & (ts < w1)
            sel = rec[m]
            tr = sel["t_recv_ns"].astype(np.int64)
            tsw = ts[m]
            frames.append(pd.DataFrame({
                "subscriber": np.full(len(sel), r["index"], np.int32),
                "publisher": sel["pub"].astype(np.int32), "seq": sel["seq"].astype(np.int64),
                "topic": sel["topic"].astype(np.int32),
                "t_send_s": (tsw - t0) / 1e9, "t_recv_s": (tr - t0) / 1e9, "latency_s": (tr - tsw) / 1e9,
                "duplicate": r["duplicate"][m], "out_of_order": r["out_of_order"][m]}))
            subscribers.append({"index": r["index"], "topics": sub_topics[r["index"]],
                                "received": len(rec), "duplicates": int(r["duplicate"].sum()),
                                "out_of_order": int(r["out_of_order"].sum()),
                                "disconnected": r["disconnected"], "cpu_fraction": r["cpu_fraction"],
                                "runnable_fraction": r["runnable_fraction"]})
        deliveries = pd.concat(frames, ignore_index=True)
        return cls(spec=spec, offered_per_s=float(spec.rate_per_s), t0_ns=t0,
                   window_s=(spec.warmup_s, spec.duration_s - spec.cooldown_s),
                   sent=np.array(sent, np.int64), sent_in_window=np.array(in_window, np.int64),
                   send_windows=send_windows, deliveries=deliveries, publishers=publishers,
                   subscribers=subscribers, wall=dict(wall), drain_complete=drain_complete,
                   _scheduled_in_window=scheduled)

    def latencies_s(self):
        """Latency of the first copy of every delivery in the window, s."""
        d = self.deliveries
        return d.loc[~d["duplicate"], "latency_s"].to_numpy()

    def summary(self):
        """Headline figures over the measurement window.

        ``published_in_window`` messages sent in the window (send time);
        ``expected_deliveries`` = that x fanout; ``delivered`` distinct
        (subscriber, publisher, seq) copies received; ``lost`` = expected -
        delivered; ``duplicates`` extra copies; ``ingress_rate_per_s`` =
        published in window / window; ``egress_rate_per_s`` = delivered /
        window (copies of messages SENT in the window, whenever received);
        ``sustainability`` = egress / (ingress x fanout); ``delivery_ratio``
        = egress / (offered x fanout). Latency figures use first copies.
        ``generator_behind``: fewer than 98 % of the messages due in the
        window were sent in it (less two batches per publisher);
        ``generator_saturated``: behind while the publishers were runnable
        (on a CPU or waiting for one) >= 90 % of their sending time, i.e. the
        generator itself could not keep up; behind but not saturated means
        the publishers were blocked by the broker (TCP back-pressure).
        ``subscriber_saturated``: a subscriber was runnable >= 90 % of the
        run.
        """
        span = self.window_s[1] - self.window_s[0]
        d = self.deliveries
        dup = d["duplicate"].to_numpy()
        lat = self.latencies_s()
        published = int(self.sent_in_window.sum())
        expected = published * self.spec.fanout
        delivered = int((~dup).sum())
        ingress = published / span
        egress = delivered / span
        offered = self.offered_per_s
        # two batches per publisher of slack: a late batch can cross a window edge
        slack = 2 * sum(p["batch"] for p in self.publishers)
        behind = published + slack < 0.98 * self._scheduled_in_window
        runnable = float(np.mean([p["runnable_fraction"] for p in self.publishers]))
        sub_runnable = [s["runnable_fraction"] for s in self.subscribers]
        sub_runnable = float(np.nanmax(sub_runnable)) if not all(map(math.isnan, sub_runnable)) else math.nan
        out = {
            "protocol": self.spec.protocol,
            "offered_per_s": offered,
            "window_s": span,
            "scheduled_in_window": self._scheduled_in_window,
            "published_in_window": published,
            "expected_deliveries": expected,
            "delivered": delivered,
            "lost": expected - delivered,
            "duplicates": int(dup.sum()),
            "out_of_order": int(d["out_of_order"].sum()),
            "loss_rate": (expected - delivered) / expected if expected else math.nan,
            "ingress_rate_per_s": ingress,
            "egress_rate_per_s": egress,
            "sustainability": egress / (ingress * self.spec.fanout) if ingress else math.nan,
            "delivery_ratio": egress / (offered * self.spec.fanout),
        }
        if len(lat):
            q = np.quantile(lat, [0.01, 0.5, 0.9, 0.99])
            out.update(latency_mean_s=float(lat.mean()), latency_std_s=float(lat.std()),
                       latency_p01_s=float(q[0]), latency_p50_s=float(q[1]), latency_p90_s=float(q[2]),
                       latency_p99_s=float(q[3]), latency_max_s=float(lat.max()))
        else:
            out.update({f"latency_{k}_s": math.nan for k in ("mean", "std", "p01", "p50", "p90", "p99", "max")})
        out.update({
            "publisher_lag_max_s": max(p["lag_max_s"] for p in self.publishers),
            "publisher_lag_end_s": max((p["lag_end_s"] for p in self.publishers if not math.isnan(p["lag_end_s"])),
                                       default=math.nan),
            "publisher_runnable_fraction": runnable,
            "publisher_cpu_fraction": float(np.mean([p["cpu_fraction"] for p in self.publishers])),
            "generator_behind": bool(behind),
            "generator_saturated": bool(behind and runnable >= 0.9),
            "subscriber_runnable_fraction": sub_runnable,
            "subscriber_saturated": bool(sub_runnable >= 0.9),
            "subscriber_disconnects": sum(s["disconnected"] is not None for s in self.subscribers),
            "sent_total": int(self.sent.sum()),
            "received_total": int(sum(s["received"] for s in self.subscribers)),
            "drain_complete": self.drain_complete,
            "batch": self.publishers[0]["batch"],
            "wall_setup_s": self.wall.get("setup_s", math.nan),
            "wall_run_s": self.wall.get("run_s", math.nan),
            "wall_drain_s": self.wall.get("drain_s", math.nan),
            "wall_total_s": self.wall.get("total_s", math.nan),
        })
        return out
