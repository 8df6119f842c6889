"""Readers of real IoT traces into :class:`~pubsim.models.loads.trace.Trace`.

Two sources (see ``../shared/traces/README.md``):

- :func:`read_campusiot`: CampusIoT LoRaWAN uplinks, gzip'd NDJSON, one frame
  per line as the network server published it over MQTT.
- :func:`read_mqtt_pcap`: MQTT packet captures (pcap or pcapng, read with
  dpkt), PUBLISH packets reassembled from the TCP byte stream of each flow.

Both return ``(trace, summary)``. Bad input inside a file (a line that is not
JSON, a malformed MQTT packet, a truncated frame) is counted in the summary
and skipped, never fatal; only a file that cannot be opened at all raises a
:class:`~pubsim.sim.errors.ConfigError`.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...sim.errors import ConfigError
from ..protocol import mqtt
from ..protocol.mqtt import MqttError
from .trace import DAY_S, Trace

__all__ = [
    "read_campusiot",
    "CampusIoTSummary",
    "read_mqtt_pcap",
    "PcapSummary",
    "DEFAULT_CAMPUSIOT_TOPIC",
    "MQTT_TYPES",
]

DEFAULT_CAMPUSIOT_TOPIC = "application/rx"
"""Topic given to CampusIoT frames without ``_topic`` (the Helium and TTN exports).

It is the ChirpStack uplink topic that the Saint Eynard files carry for their
data frames, so frames of every file share one topic name."""

_EXAMPLES = 5
_HEX = re.compile(r"\A(?:[0-9a-fA-F]{2})*\Z")


def _add_example(examples, item):
    if len(examples) < _EXAMPLES:
        examples.append(item)


# =========================================================================== CampusIoT


@dataclass
class CampusIoTSummary:
    """What :func:`read_campusiot` found.

    ``upstream_lost`` counts frames missing from each device's frame counter
    sequence (``fCnt`` gaps: lost on the radio side before the network server
    published them); ``counter_resets`` counts decreases of the counter
    (device rejoined or rebooted: no loss is inferred across a reset);
    ``duplicates`` repeated counter values. ``bad_lines`` are lines that are
    not a JSON object with a timestamp and a device id; they are skipped.
    """

    source: str
    lines: int = 0
    records: int = 0
    bad_lines: int = 0
    bad_reasons: Counter = field(default_factory=Counter)
    bad_examples: list = field(default_factory=list)
    no_payload: int = 0
    devices: dict = field(default_factory=dict)

    @property
    def upstream_lost(self) -> int:
        return sum(d["lost"] for d in self.devices.values())

    @property
    def upstream_loss_rate(self) -> float:
        got = sum(d["frames"] - d["duplicates"] for d in self.devices.values())
        lost = self.upstream_lost
        return lost / (got + lost) if got + lost else 0.0

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "lines": self.lines,
            "records": self.records,
            "bad_lines": self.bad_lines,
            "bad_reasons": dict(self.bad_reasons),
            "bad_examples": list(self.bad_examples),
            "no_payload": self.no_payload,
            "upstream_lost": self.upstream_lost,
            "upstream_loss_rate": self.upstream_loss_rate,
            "devices": self.devices,
        }

    def __str__(self):
        text = (
            f"{self.source}: {self.records} frames from {len(self.devices)} devices in {self.lines} lines; "
            f"{self.bad_lines} bad lines skipped"
        )
        if self.bad_reasons:
            text += " (" + ", ".join(f"{k}: {v}" for k, v in self.bad_reasons.most_common()) + ")"
        return text + (
            f"; upstream loss {self.upstream_lost} frames "
            f"({100 * self.upstream_loss_rate:.2f} %) from frame-counter gaps"
        )


def _payload_size(rec, encoding):
    """Application payload bytes of one record; None when it has no payload field."""
    data = rec.get("data")
    if data is None:
        data = rec.get("payload")
    if isinstance(data, str):
        if encoding == "hex" or (encoding == "auto" and _HEX.match(data)):
            return len(data) // 2
        # base64: decoded length without trusting padding-free input
        return len(base64.b64decode(data + "=" * (-len(data) % 4), validate=True))
    if data is not None:
        raise ValueError("payload is not a string")
    size = rec.get("payload_size")
    if size is None:
        return None
    size = int(size)
    if size < 0:
        raise ValueError("negative payload_size")
    return size


def read_campusiot(path, *, default_topic: str = DEFAULT_CAMPUSIOT_TOPIC, payload_encoding: str = "auto"):
    """Read a CampusIoT NDJSON(.gz) file.

    Parameters
    ----------
    path : path-like
        ``*.ndjson.gz`` (or plain ``*.ndjson``).
    default_topic : str
        Topic of frames without ``_topic``.
    payload_encoding : {"auto", "base64", "hex"}
        Encoding of ``data``/``payload``. The README says base64, but the
        Saint Eynard files carry hex strings (median 64 characters for the
        documented 32-byte median); ``auto`` reads an even-length string of
        hex digits as hex, anything else as base64. Records with neither
        field use ``payload_size``, else size 0 (counted as ``no_payload``).

    Returns
    -------
    (Trace, CampusIoTSummary)
        Time from ``_timestamp`` (ms; ``t_s = 0`` at the first frame,
        ``origin_epoch_s`` and ``t0_of_day_s`` in UTC), publisher from
        ``devEUI``/``dev_eui``, topic from ``_topic``, size from the decoded
        payload.
    """
    if payload_encoding not in ("auto", "base64", "hex"):
        raise ConfigError("payload_encoding", payload_encoding, "auto, base64 or hex")
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    summary = CampusIoTSummary(source=path.name)
    ts, devs, topics, sizes, fcnts = [], [], [], [], []
    try:
        fh = opener(path, "rt", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(str(path), "unreadable", f"a readable NDJSON file ({exc})") from None
    with fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                summary.lines += 1
                reason = None
                try:
                    rec = json.loads(line)
                except ValueError:
                    reason = "not JSON"
                else:
                    if not isinstance(rec, dict):
                        reason = "not a JSON object"
                    else:
                        stamp = rec.get("_timestamp")
                        dev = rec.get("devEUI", rec.get("dev_eui"))
                        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not np.isfinite(stamp):
                            reason = "no numeric _timestamp"
                        elif not isinstance(dev, str) or not dev:
                            reason = "no devEUI"
                        else:
                            try:
                                size = _payload_size(rec, payload_encoding)
                            except (ValueError, binascii.Error, TypeError):
                                reason = "undecodable payload"
                if reason:
                    summary.bad_lines += 1
                    summary.bad_reasons[reason] += 1
                    _add_example(summary.bad_examples, (lineno, reason, line[:80].rstrip()))
                    continue
                if size is None:
                    summary.no_payload += 1
                    size = 0
                topic = rec.get("_topic")
                fc = rec.get("fCnt", rec.get("fcnt"))
                ts.append(float(stamp))
                devs.append(dev.lower())
                topics.append(topic if isinstance(topic, str) and topic else default_topic)
                sizes.append(size)
                fcnts.append(int(fc) if isinstance(fc, (int, float)) and not isinstance(fc, bool) else -1)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:  # truncated gzip: keep what was read
            summary.bad_reasons[f"file truncated ({type(exc).__name__})"] += 1
            _add_example(summary.bad_examples, (lineno, "file truncated", str(exc)[:80]))
    summary.records = len(ts)
    if not ts:
        raise ConfigError(
            str(path),
            f"{summary.bad_lines} bad of {summary.lines} lines",
            "at least one uplink frame with _timestamp and devEUI",
        )
    ms = np.asarray(ts)
    origin_ms = ms.min()
    t_s = (ms - origin_ms) / 1000.0
    origin = origin_ms / 1000.0
    trace = Trace.from_arrays(
        t_s,
        np.asarray(devs),
        np.asarray(topics),
        np.asarray(sizes, dtype=np.int64),
        t0_of_day_s=origin % DAY_S,
        origin_epoch_s=origin,
        where=path.name,
    )
    summary.devices = _fcnt_gaps(t_s, np.asarray(devs), np.asarray(fcnts, dtype=np.int64))
    return trace, summary


def _fcnt_gaps(t_s, devs, fcnt):
    out = {}
    order = np.lexsort((fcnt, t_s, devs))  # by device, then time
    devs, fcnt = devs[order], fcnt[order]
    for dev in np.unique(devs):
        sel = devs == dev
        fc = fcnt[sel]
        frames = int(sel.sum())
        fc = fc[fc >= 0]
        d = np.diff(fc)
        out[str(dev)] = {
            "frames": frames,
            "with_counter": int(len(fc)),
            "lost": int(np.sum(d[d > 1] - 1)),
            "gaps": int(np.sum(d > 1)),
            "duplicates": int(np.sum(d == 0)),
            "counter_resets": int(np.sum(d < 0)),
        }
    return out


# =========================================================================== MQTT pcap

MQTT_TYPES = mqtt.TYPE_NAMES  # the codec's table, kept under its old name
_SEQ = 1 << 32
_HALF = 1 << 31


@dataclass
class PcapSummary:
    """What :func:`read_mqtt_pcap` found.

    ``malformed`` counts MQTT packets that break the framing or the PUBLISH
    layout (reserved type, wrong fixed-header flags, QoS 3, a remaining length
    longer than four bytes or than ``max_packet_bytes``, a topic longer than
    the packet, a wildcard or invalid UTF-8 in the topic, a bad CONNECT
    protocol name); the rest of that flow's buffered bytes is discarded and
    parsing resumes at the next segment. ``bad_frames`` are link/IP/TCP frames
    dpkt could not decode. ``gaps`` are holes in a TCP stream (bytes never
    captured): the flow is resynchronised at the next segment. ``pending_bytes``
    are bytes of packets still incomplete at the end of the capture.
    """

    source: str
    packets: int = 0
    bytes: int = 0
    tcp_segments: int = 0
    mqtt_packets: Counter = field(default_factory=Counter)
    publishes: int = 0
    malformed: int = 0
    malformed_reasons: Counter = field(default_factory=Counter)
    malformed_examples: list = field(default_factory=list)
    bad_frames: int = 0
    non_tcp: int = 0
    other_ports: int = 0
    retransmitted_bytes: int = 0
    gaps: int = 0
    pending_bytes: int = 0
    flows: int = 0
    read_s: float = 0.0

    @property
    def packets_per_s(self) -> float:
        """Capture records read per second of wall time."""
        return self.packets / self.read_s if self.read_s > 0 else float("inf")

    @property
    def mqtt_packets_per_s(self) -> float:
        """MQTT packets parsed per second of wall time (a flood packs many per segment)."""
        return sum(self.mqtt_packets.values()) / self.read_s if self.read_s > 0 else float("inf")

    @property
    def megabytes_per_s(self) -> float:
        return self.bytes / 1e6 / self.read_s if self.read_s > 0 else float("inf")

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["mqtt_packets"] = dict(self.mqtt_packets)
        d["malformed_reasons"] = dict(self.malformed_reasons)
        d["packets_per_s"] = self.packets_per_s
        d["mqtt_packets_per_s"] = self.mqtt_packets_per_s
        d["megabytes_per_s"] = self.megabytes_per_s
        return d

    def __str__(self):
        text = (
            f"{self.source}: {self.packets} packets, {self.publishes} PUBLISH in {self.flows} flows, "
            f"{self.malformed} malformed MQTT packets skipped"
        )
        if self.malformed_reasons:
            text += " (" + ", ".join(f"{k}: {v}" for k, v in self.malformed_reasons.most_common(4)) + ")"
        return text + (
            f", {self.bad_frames} undecodable frames, {self.gaps} stream gaps; "
            f"read at {self.packets_per_s:,.0f} packets/s "
            f"({self.mqtt_packets_per_s:,.0f} MQTT packets/s, {self.megabytes_per_s:.1f} MB/s)"
        )


class _Flow:
    __slots__ = ("buf", "next_seq", "synced", "ts", "pending")

    def __init__(self):
        self.buf = bytearray()
        self.next_seq = None
        self.synced = False
        self.pending = {}


def _link_decoder(datalink):
    import dpkt  # optional heavy dependency: dpkt, needed only to read captures

    if datalink == dpkt.pcap.DLT_EN10MB:
        return dpkt.ethernet.Ethernet
    if datalink == dpkt.pcap.DLT_LINUX_SLL:
        return dpkt.sll.SLL
    if datalink == 276:  # LINUX_SLL2
        return dpkt.sll2.SLL2
    if datalink in (dpkt.pcap.DLT_RAW, 12, 14, 228):  # raw IPv4 (or 6, probed below)
        return lambda buf: _Raw(buf)
    if datalink in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
        return dpkt.loopback.Loopback
    raise ConfigError("pcap.linktype", datalink, "Ethernet, Linux cooked (v1/v2), raw IP or loopback")


class _Raw:
    def __init__(self, buf):
        import dpkt  # optional heavy dependency: dpkt, needed only to read captures

        self.data = dpkt.ip6.IP6(buf) if buf and buf[0] >> 4 == 6 else dpkt.ip.IP(buf)


def read_mqtt_pcap(
    path, *, ports=(1883,), direction: str = "to_broker", max_packet_bytes: int = 16 << 20, max_out_of_order: int = 64
):
    """Read the MQTT PUBLISH packets of a pcap or pcapng capture.

    Parameters
    ----------
    path : path-like
    ports : tuple of int
        Broker TCP ports (plain MQTT; TLS on 8883 cannot be read).
    direction : {"to_broker", "from_broker", "both"}
        PUBLISH sent by clients (the offered load, default), by the broker
        (deliveries to subscribers), or both.
    max_packet_bytes : int
        A remaining length above this is treated as malformed (it would
        otherwise make the reader buffer the rest of the stream).
    max_out_of_order : int
        Segments held per flow while waiting for a hole to fill; beyond it the
        hole counts as a gap and the flow resynchronises.

    Returns
    -------
    (Trace, PcapSummary)
        One row per PUBLISH, at the capture time of the segment that
        completed it: ``publisher`` is the client endpoint ``ip:port``,
        ``connection`` ``src:port->dst:port``, ``size_bytes`` the application
        payload, plus ``qos`` and ``retain``. ``t_s = 0`` at the first packet
        of the capture.
    """
    import dpkt  # optional heavy dependency: dpkt, needed only to read captures

    if direction not in ("to_broker", "from_broker", "both"):
        raise ConfigError("direction", direction, "to_broker, from_broker or both")
    ports = frozenset(int(p) for p in ports)
    path = Path(path)
    summary = PcapSummary(source=path.name)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise ConfigError(str(path), "unreadable", f"a readable capture ({exc})") from None
    start = time.perf_counter()
    out_t, out_pub, out_conn, out_topic, out_size, out_qos, out_retain = [], [], [], [], [], [], []
    flows: dict = {}
    versions: dict = {}
    names: dict = {}
    first_ts = None
    with fh:
        try:
            reader = dpkt.pcap.UniversalReader(fh)
        except (ValueError, dpkt.dpkt.Error) as exc:
            raise ConfigError(str(path), "not a capture", f"a pcap or pcapng file ({exc})") from None
        decode = _link_decoder(reader.datalink())
        IP, IP6, TCP = dpkt.ip.IP, dpkt.ip6.IP6, dpkt.tcp.TCP
        it = iter(reader)
        while True:
            try:
                ts, buf = next(it)
            except StopIteration:
                break
            except (dpkt.dpkt.Error, ValueError, struct.error) as exc:  # truncated file
                summary.bad_frames += 1
                summary.malformed_reasons[f"capture truncated ({type(exc).__name__})"] += 1
                break
            summary.packets += 1
            summary.bytes += len(buf)
            if first_ts is None:
                first_ts = float(ts)
            try:
                ip = decode(buf).data
                if not isinstance(ip, (IP, IP6)):
                    summary.non_tcp += 1
                    continue
                tcp = ip.data
                if not isinstance(tcp, TCP):
                    summary.non_tcp += 1
                    continue
            except (dpkt.dpkt.Error, ValueError, IndexError, struct.error):
                summary.bad_frames += 1
                continue
            sport, dport = tcp.sport, tcp.dport
            to_broker = dport in ports
            if not to_broker and sport not in ports:
                summary.other_ports += 1
                continue
            summary.tcp_segments += 1
            key = (ip.src, sport, ip.dst, dport)
            client = (ip.src, sport) if to_broker else (ip.dst, dport)
            conn = (client, (ip.dst, dport) if to_broker else (ip.src, sport))
            flags = tcp.flags
            flow = flows.get(key)
            if flow is None:
                flow = flows[key] = _Flow()
                summary.flows += 1
            if flags & dpkt.tcp.TH_SYN:
                flow.buf.clear()
                flow.pending.clear()
                flow.next_seq = (tcp.seq + 1) % _SEQ
                flow.synced = True
                if to_broker:
                    versions.pop(conn, None)
                continue
            data = tcp.data
            if data:
                _feed(flow, tcp.seq, bytes(data), summary, max_out_of_order)
                if flow.buf:
                    _drain(
                        flow,
                        float(ts),
                        to_broker,
                        conn,
                        versions,
                        summary,
                        max_packet_bytes,
                        direction,
                        names,
                        out_t,
                        out_pub,
                        out_conn,
                        out_topic,
                        out_size,
                        out_qos,
                        out_retain,
                    )
            if flags & (dpkt.tcp.TH_FIN | dpkt.tcp.TH_RST):
                summary.pending_bytes += len(flow.buf)
                del flows[key]
    for flow in flows.values():
        summary.pending_bytes += len(flow.buf) + sum(len(d) for d in flow.pending.values())
    summary.publishes = len(out_t)
    summary.read_s = time.perf_counter() - start
    t = np.asarray(out_t, dtype=float) - (first_ts or 0.0)
    origin = first_ts or 0.0

    def strings(values):
        return np.asarray(values, dtype=object).astype(str) if values else np.empty(0, str)

    trace = Trace.from_arrays(
        t,
        strings(out_pub),
        strings(out_topic),
        np.asarray(out_size, dtype=np.int64),
        qos=np.asarray(out_qos, dtype=np.int8),
        retain=np.asarray(out_retain, dtype=bool),
        connection=strings(out_conn),
        t0_of_day_s=origin % DAY_S,
        origin_epoch_s=origin,
        where=path.name,
    )
    return trace, summary


def _feed(flow, seq, data, summary, max_out_of_order):
    """Append a segment to the flow's byte stream in sequence order."""
    if flow.next_seq is None:  # capture started mid-stream: take the segment as a packet boundary
        flow.next_seq = seq
    rel = (seq - flow.next_seq) % _SEQ
    if rel >= _HALF:  # old data: a retransmission, maybe overlapping new bytes
        overlap = _SEQ - rel
        if overlap >= len(data):
            summary.retransmitted_bytes += len(data)
            return
        summary.retransmitted_bytes += overlap
        data = data[overlap:]
        rel = 0
    if rel > 0:  # a hole: hold the segment until it fills
        flow.pending[seq] = data
        if len(flow.pending) <= max_out_of_order:
            return
        # give up on the hole: resynchronise at the earliest held segment
        summary.gaps += 1
        flow.buf.clear()
        flow.synced = False
        flow.next_seq = min(flow.pending, key=lambda s: (s - flow.next_seq) % _SEQ)
        data = flow.pending.pop(flow.next_seq)
    flow.buf += data
    flow.next_seq = (flow.next_seq + len(data)) % _SEQ
    while flow.pending:  # held segments that now fit
        nxt = flow.pending.pop(flow.next_seq, None)
        if nxt is None:
            for s in [s for s in flow.pending if (s - flow.next_seq) % _SEQ >= _HALF]:
                old = flow.pending.pop(s)  # fully or partly received already
                over = (flow.next_seq - s) % _SEQ
                if over < len(old):
                    flow.pending[flow.next_seq] = old[over:]
            if flow.next_seq not in flow.pending:
                return
            continue
        flow.buf += nxt
        flow.next_seq = (flow.next_seq + len(nxt)) % _SEQ


def _drain(
    flow,
    ts,
    to_broker,
    conn,
    versions,
    summary,
    max_packet_bytes,
    direction,
    names,
    out_t,
    out_pub,
    out_conn,
    out_topic,
    out_size,
    out_qos,
    out_retain,
):
    """Parse every complete MQTT packet at the head of the flow's buffer."""
    buf = flow.buf
    end = len(buf)
    pos = 0
    want = direction == "both" or (direction == "to_broker") == to_broker
    try:
        while end - pos >= 2:
            b0 = buf[pos]
            ptype, flags = b0 >> 4, b0 & 0x0F
            got = mqtt.decode_remaining_length(buf, pos + 1, end)
            if got is None:
                break
            rem, start = got
            mqtt.check_fixed_header(ptype, flags, versions.get(conn, 4))
            if rem > max_packet_bytes:
                raise MqttError("remaining length above max_packet_bytes")
            total = start - pos + rem
            if end - pos < total:
                break
            body = memoryview(buf)[start : pos + total]
            try:
                if ptype == mqtt.PUBLISH:
                    topic, payload_start, qos, retain = mqtt.parse_publish(body, flags, versions.get(conn, 4))
                    size = len(body) - payload_start
                    if want:
                        out_t.append(ts)
                        name = names.get((conn, to_broker))
                        if name is None:
                            client, broker = _endpoint(conn[0]), _endpoint(conn[1])
                            link = f"{client}->{broker}" if to_broker else f"{broker}->{client}"
                            name = names[(conn, to_broker)] = (client, link)
                        out_pub.append(name[0])
                        out_conn.append(name[1])
                        out_topic.append(topic)
                        out_size.append(size)
                        out_qos.append(qos)
                        out_retain.append(retain)
                elif ptype == mqtt.CONNECT and to_broker:
                    versions[conn] = mqtt.connect_version(body)
            finally:
                body.release()
            summary.mqtt_packets[MQTT_TYPES[ptype]] += 1
            flow.synced = True
            pos += total
    except MqttError as exc:
        reason = str(exc) if flow.synced else f"{exc} (stream joined mid-way)"
        summary.malformed += 1
        summary.malformed_reasons[reason] += 1
        _add_example(summary.malformed_examples, (summary.packets, reason))
        del buf[:]
        flow.synced = False
        return
    if pos:
        del buf[:pos]


def _endpoint(addr):
    ip, port = addr
    fam = socket.AF_INET6 if len(ip) == 16 else socket.AF_INET
    return f"{socket.inet_ntop(fam, ip)}:{port}" if fam == socket.AF_INET else f"[{socket.inet_ntop(fam, ip)}]:{port}"
