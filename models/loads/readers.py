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
import math
import re
import socket
import struct
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...sim.errors import ConfigError
from ..protocol import mqtt
from ..protocol.mqtt import MqttError
from .bounded_io import LINE_TOO_LONG, BoundedReads, CorruptLength, bounded_lines, clip, shorten
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


def _examples_line(unit, examples):
    """``first skipped: line 4 (not JSON: {x; ...`` from ``(number, reason, detail)`` examples."""
    if not examples:
        return ""
    return "first skipped: " + "; ".join(f"{unit} {n} ({reason}: {detail})" for n, reason, detail in examples)


# =========================================================================== CampusIoT


@dataclass
class CampusIoTSummary:
    """What :func:`read_campusiot` found.

    ``upstream_lost`` counts frames missing from each device's frame counter
    sequence (``fCnt`` gaps: lost on the radio side before the network server
    published them); ``counter_resets`` counts decreases of the counter
    (device rejoined or rebooted: no loss is inferred across a reset);
    ``duplicates`` repeated counter values. ``bad_lines`` are lines skipped
    (not a JSON object, no valid timestamp or device id, a NaN, infinity,
    out-of-range number or string where a number belongs, an undecodable
    payload, a line over the length cap); ``bad_reasons`` counts them per
    reason, plus one entry when the file stops part-way (truncated or corrupt
    gzip); ``bad_examples`` keeps the first few as ``(line number, reason,
    shortened value)``.
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

    def first_skipped(self) -> str:
        """The first skipped lines in one line ("" when none was skipped)."""
        return _examples_line("line", self.bad_examples)

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


_MAX_TIMESTAMP_MS = float(2**53)  # epoch ms; larger values lose integer precision in a float
_MAX_FCNT = 2**32 - 1  # LoRaWAN frame counters are 32-bit
MAX_LINE_BYTES = 1 << 20
"""Longest NDJSON line :func:`read_campusiot` parses by default, bytes; longer lines are skipped."""


class _BadRecord(Exception):
    """One record to skip: ``reason`` (counted) and a short ``detail`` (kept as an example)."""

    def __init__(self, reason, detail):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _check_number(value, name, hi, *, integer):
    """``value`` (not None) if it is a number in ``[0, hi]``, else :class:`_BadRecord`.

    Reasons: "no numeric NAME" (or "NAME not an integer" when ``integer``)
    for a string, bool, list or object; "NAME not finite" for NaN and
    infinities; "NAME not an integer" for a fractional value when
    ``integer``; "NAME out of range" for anything outside ``[0, hi]``,
    however many digits it has.
    """
    detail = f"{name}={shorten(value)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _BadRecord(f"{name} not an integer" if integer else f"no numeric {name}", detail)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _BadRecord(f"{name} not finite", detail)
        if integer and not value.is_integer():
            raise _BadRecord(f"{name} not an integer", detail)
    if not 0 <= value <= hi:
        raise _BadRecord(f"{name} out of range", detail)
    return value


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
    if isinstance(size, float) and not math.isfinite(size):
        raise _BadRecord("payload_size not finite", f"payload_size={shorten(size)}")
    size = int(size)  # ValueError / TypeError for a string or object that is not a number
    if not 0 <= size <= mqtt.MAX_REMAINING_LENGTH:
        raise _BadRecord("payload_size out of range", f"payload_size={shorten(size)}")
    return size


def _parse_record(text, encoding):
    """One NDJSON line as ``(epoch ms, device, topic or None, size or None, fCnt or -1)``.

    Raises
    ------
    _BadRecord
        The line is not a JSON object with a timestamp in ``[0, 2**53]`` ms,
        a device id, a decodable payload and (when present) a frame counter
        in ``[0, 2**32)``.
    """
    try:
        rec = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        raise _BadRecord("not JSON", clip(text)) from None
    if not isinstance(rec, dict):
        raise _BadRecord("not a JSON object", clip(text))
    stamp = rec.get("_timestamp")
    if stamp is None:
        raise _BadRecord("no numeric _timestamp", clip(text))
    stamp = _check_number(stamp, "_timestamp", _MAX_TIMESTAMP_MS, integer=False)
    dev = rec.get("devEUI", rec.get("dev_eui"))
    if not isinstance(dev, str) or not dev:
        raise _BadRecord("no devEUI", f"devEUI={shorten(dev)}")
    try:
        size = _payload_size(rec, encoding)
    except (ValueError, binascii.Error, TypeError) as exc:
        raise _BadRecord("undecodable payload", clip(str(exc))) from None
    fc = rec.get("fCnt", rec.get("fcnt"))
    fc = -1 if fc is None else int(_check_number(fc, "fCnt", _MAX_FCNT, integer=True))
    topic = rec.get("_topic")
    return float(stamp), dev, (topic if isinstance(topic, str) and topic else None), size, fc


def _skip_line(summary, lineno, reason, detail):
    summary.bad_lines += 1
    summary.bad_reasons[reason] += 1
    _add_example(summary.bad_examples, (lineno, reason, detail))


def _file_error(exc):
    """The reason recorded when the file itself stops being readable part-way."""
    if isinstance(exc, EOFError):
        return f"file truncated ({type(exc).__name__})"
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        return f"corrupt gzip data ({type(exc).__name__})"
    return f"read error ({type(exc).__name__})"


def read_campusiot(
    path,
    *,
    default_topic: str = DEFAULT_CAMPUSIOT_TOPIC,
    payload_encoding: str = "auto",
    max_line_bytes: int = MAX_LINE_BYTES,
):
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
    max_line_bytes : int
        Longest line parsed, bytes (default 1 MiB). The file is inflated as
        a stream and a longer line is skipped chunk by chunk, so a corrupt
        gzip member that inflates to gigabytes costs no memory.

    Returns
    -------
    (Trace, CampusIoTSummary)
        Time from ``_timestamp`` (ms; ``t_s = 0`` at the first frame,
        ``origin_epoch_s`` and ``t0_of_day_s`` in UTC), publisher from
        ``devEUI``/``dev_eui``, topic from ``_topic``, size from the decoded
        payload. Lines that are not JSON objects, lack a timestamp or device,
        carry a timestamp outside ``[0, 2**53]`` ms, an ``fCnt`` outside
        ``[0, 2**32)``, a NaN, an infinity or a string where a number belongs,
        or an undecodable payload are skipped and counted in the summary
        (``bad_reasons``, first examples in ``bad_examples``). A file cut
        short or corrupt part-way keeps the lines read before.

    Raises
    ------
    ConfigError
        The file cannot be opened, is not gzip, or holds no valid frame.
    """
    if payload_encoding not in ("auto", "base64", "hex"):
        raise ConfigError("payload_encoding", payload_encoding, "auto, base64 or hex")
    if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes < 1:
        raise ConfigError("max_line_bytes", max_line_bytes, "a positive whole number of bytes")
    path = Path(path)
    summary = CampusIoTSummary(source=path.name)
    ts, devs, topics, sizes, fcnts = [], [], [], [], []
    try:
        fh = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    except OSError as exc:
        raise ConfigError(str(path), "unreadable", f"a readable NDJSON file ({exc})") from None
    stopped = None
    with fh:
        lineno = 0
        try:
            for lineno, text, n_bytes in bounded_lines(fh, max_line_bytes):
                if text is LINE_TOO_LONG:
                    summary.lines += 1
                    _skip_line(summary, lineno, "line too long", f"{n_bytes} bytes > {max_line_bytes}")
                    continue
                if not text.strip():
                    continue
                summary.lines += 1
                try:
                    stamp, dev, topic, size, fc = _parse_record(text, payload_encoding)
                except _BadRecord as bad:
                    _skip_line(summary, lineno, bad.reason, bad.detail)
                    continue
                if size is None:
                    summary.no_payload += 1
                    size = 0
                ts.append(stamp)
                devs.append(dev.lower())
                topics.append(topic or default_topic)
                sizes.append(size)
                fcnts.append(fc)
        except (OSError, EOFError, zlib.error) as exc:  # truncated or corrupt gzip: keep what was read
            stopped = _file_error(exc)
            summary.bad_reasons[stopped] += 1
            detail = clip(str(exc))
            _add_example(summary.bad_examples, (lineno, stopped, detail))
            stopped = f"{stopped}: {detail}"
    summary.records = len(ts)
    if not ts:
        if stopped is not None and not summary.lines:
            raise ConfigError(str(path), f"unreadable ({stopped})", "a gzip'd NDJSON file of uplink frames")
        value = f"{summary.bad_lines} bad of {summary.lines} lines"
        raise ConfigError(
            str(path),
            value if stopped is None else f"{value}, then {stopped}",
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
MAX_FRAME_BYTES = 256 << 10
"""Largest captured frame :func:`read_mqtt_pcap` reads by default, bytes (tcpdump's default snap length)."""
_BLOCK_OVERHEAD = 64 << 10  # pcapng block header, padding and options around a frame
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
    parsing resumes at the next segment; ``malformed_examples`` keeps the
    first few as ``(record number, reason, first bytes in hex)``.
    ``bad_frames`` are link/IP/TCP frames dpkt could not decode, plus the
    record where the capture stops early (cut short, or a record length
    above ``max_frame_bytes``: a corrupt length field, never allocated);
    ``frame_reasons`` counts them per reason and ``frame_examples`` keeps the
    first few. ``gaps`` are holes in a TCP stream (bytes never
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
    frame_reasons: Counter = field(default_factory=Counter)
    frame_examples: list = field(default_factory=list)
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
        d["frame_reasons"] = dict(self.frame_reasons)
        d["packets_per_s"] = self.packets_per_s
        d["mqtt_packets_per_s"] = self.mqtt_packets_per_s
        d["megabytes_per_s"] = self.megabytes_per_s
        return d

    def first_skipped(self) -> str:
        """The first skipped frames and MQTT packets in one line ("" when none was skipped)."""
        examples = sorted(self.frame_examples + self.malformed_examples, key=lambda e: e[0])
        return _examples_line("record", examples[:_EXAMPLES])

    def __str__(self):
        text = (
            f"{self.source}: {self.packets} packets, {self.publishes} PUBLISH in {self.flows} flows, "
            f"{self.malformed} malformed MQTT packets skipped"
        )
        if self.malformed_reasons:
            text += " (" + ", ".join(f"{k}: {v}" for k, v in self.malformed_reasons.most_common(4)) + ")"
        text += f", {self.bad_frames} undecodable frames"
        if self.frame_reasons:
            text += " (" + ", ".join(f"{k}: {v}" for k, v in self.frame_reasons.most_common(4)) + ")"
        return text + (
            f", {self.gaps} stream gaps; "
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


def _open_capture(fh, path):
    """A dpkt reader of a pcap or pcapng file, or a one-line ConfigError naming it."""
    import dpkt  # optional heavy dependency: dpkt, needed only to read captures

    try:
        return dpkt.pcap.UniversalReader(fh)
    except (ValueError, dpkt.dpkt.Error, struct.error, OverflowError) as exc:  # CorruptLength is a ValueError
        raise ConfigError(str(path), "not a capture", f"a pcap or pcapng file ({exc})") from None


def _frame_skipped(summary, record, reason, detail):
    summary.bad_frames += 1
    summary.frame_reasons[reason] += 1
    _add_example(summary.frame_examples, (record, reason, clip(detail)))


def _link_decoder(datalink, path):
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
    raise ConfigError(
        str(path), f"link type {datalink}", "a capture of Ethernet, Linux cooked (v1/v2), raw IP or loopback frames"
    )


class _Raw:
    def __init__(self, buf):
        import dpkt  # optional heavy dependency: dpkt, needed only to read captures

        self.data = dpkt.ip6.IP6(buf) if buf and buf[0] >> 4 == 6 else dpkt.ip.IP(buf)


def read_mqtt_pcap(
    path,
    *,
    ports=(1883,),
    direction: str = "to_broker",
    max_packet_bytes: int = 16 << 20,
    max_out_of_order: int = 64,
    max_frame_bytes: int = MAX_FRAME_BYTES,
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
    max_frame_bytes : int
        Largest captured frame, bytes (default 256 KiB, tcpdump's default
        snap length). A pcap record or pcapng block claiming more is a
        corrupt length field: it is never allocated, and reading stops there
        keeping what was read (``frame_reasons``).

    Returns
    -------
    (Trace, PcapSummary)
        One row per PUBLISH, at the capture time of the segment that
        completed it: ``publisher`` is the client endpoint ``ip:port``,
        ``connection`` ``src:port->dst:port``, ``size_bytes`` the application
        payload, plus ``qos`` and ``retain``. ``t_s = 0`` at the first packet
        of the capture (of the earliest PUBLISH if a corrupt timestamp put
        one before it).

    Raises
    ------
    ConfigError
        The file cannot be opened, or is not a pcap/pcapng capture of a
        supported link type (bad magic, header cut short or corrupt).
    """
    import dpkt  # optional heavy dependency: dpkt, needed only to read captures

    if direction not in ("to_broker", "from_broker", "both"):
        raise ConfigError("direction", direction, "to_broker, from_broker or both")
    if isinstance(max_frame_bytes, bool) or not isinstance(max_frame_bytes, int) or max_frame_bytes < 64:
        raise ConfigError("max_frame_bytes", max_frame_bytes, "a whole number of bytes >= 64")
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
        reader = _open_capture(BoundedReads(fh, max_frame_bytes + _BLOCK_OVERHEAD), path)
        decode = _link_decoder(reader.datalink(), path)
        IP, IP6, TCP = dpkt.ip.IP, dpkt.ip6.IP6, dpkt.tcp.TCP
        it = iter(reader)
        while True:
            try:
                ts, buf = next(it)
            except StopIteration:
                break
            except CorruptLength as exc:  # a length field claiming more than any frame: stop, keep what was read
                _frame_skipped(summary, summary.packets + 1, "record length above max_frame_bytes", str(exc))
                break
            except (dpkt.dpkt.Error, ValueError, struct.error) as exc:  # truncated file
                _frame_skipped(summary, summary.packets + 1, "capture truncated", f"{type(exc).__name__}: {exc}")
                break
            summary.packets += 1
            summary.bytes += len(buf)
            if len(buf) > max_frame_bytes:  # a pcapng block whose packet length exceeds the cap
                _frame_skipped(summary, summary.packets, "frame above max_frame_bytes", f"{len(buf)} bytes")
                continue
            ts = float(ts)
            if first_ts is None:
                first_ts = ts
            try:
                ip = decode(buf).data
                if not isinstance(ip, (IP, IP6)):
                    summary.non_tcp += 1
                    continue
                tcp = ip.data
                if not isinstance(tcp, TCP):
                    summary.non_tcp += 1
                    continue
            except Exception as exc:  # dpkt's decoders raise many exception types on arbitrary bytes
                _frame_skipped(summary, summary.packets, f"undecodable frame ({type(exc).__name__})", buf[:16].hex())
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
                    )
            if flags & (dpkt.tcp.TH_FIN | dpkt.tcp.TH_RST):
                summary.pending_bytes += len(flow.buf)
                del flows[key]
    for flow in flows.values():
        summary.pending_bytes += len(flow.buf) + sum(len(d) for d in flow.pending.values())
    summary.publishes = len(out_t)
    summary.read_s = time.perf_counter() - start
    origin = first_ts or 0.0
    if out_t:  # a corrupt record timestamp may put a PUBLISH before the first record
        origin = min(origin, min(out_t))
    t = np.asarray(out_t, dtype=float) - origin

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
        _add_example(summary.malformed_examples, (summary.packets, reason, bytes(buf[pos : pos + 16]).hex()))
        del buf[:]
        flow.synced = False
        return
    if pos:
        del buf[:pos]


def _endpoint(addr):
    ip, port = addr
    fam = socket.AF_INET6 if len(ip) == 16 else socket.AF_INET
    return f"{socket.inet_ntop(fam, ip)}:{port}" if fam == socket.AF_INET else f"[{socket.inet_ntop(fam, ip)}]:{port}"
