"""Readers of real traces: CampusIoT NDJSON.gz and MQTT pcap/pcapng.

Every test runs on a sample the test writes itself ("generated"); the tests
with the id "shared" use ../shared/traces when it is there and otherwise fall
back to the generated sample with a warning saying so (never a silent skip).
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import struct
import warnings

import dpkt
import numpy as np
import pytest

from pubsim.models.loads.readers import DEFAULT_CAMPUSIOT_TOPIC, read_campusiot, read_mqtt_pcap
from pubsim.sim.errors import ConfigError
from tests import ROOT

SHARED = ROOT.parent / "shared" / "traces"


def _shared_or_generated(name, make, tmp_path):
    path = SHARED / name
    if path.exists():
        return path, True
    warnings.warn(f"{path} is absent: using a generated sample instead", UserWarning, stacklevel=2)
    return make(tmp_path), False


# --------------------------------------------------------------------------- CampusIoT sample


def write_campusiot_sample(tmp_path):
    """Two devices, a fCnt gap of 2 frames and a counter reset, three bad lines."""
    t0 = 1_687_511_428_896
    lines = []
    for i, fc in enumerate([10, 11, 14, 15, 2]):  # 12, 13 lost; 15 -> 2 reset
        lines.append(
            json.dumps(
                {
                    "devEUI": "D1D1E80000000033",
                    "_timestamp": t0 + 600_000 * i,
                    "fCnt": fc,
                    "_topic": "application/rx",
                    "data": "00ff" * (i + 1),
                }
            )
        )
    lines.append(json.dumps({"devEUI": "d1d1e80000000033", "_timestamp": t0 + 100, "_topic": "application/status"}))
    for i, fc in enumerate([1, 2, 2, 3]):  # a duplicate
        lines.append(
            json.dumps(
                {
                    "dev_eui": "A81758FFFE04B1C1",
                    "_timestamp": t0 + 1000 + 300_000 * i,
                    "fcnt": fc,
                    "payload": base64.b64encode(bytes(23)).decode(),
                }
            )
        )
    lines.append(json.dumps({"dev_eui": "beef", "_timestamp": t0 + 5, "fcnt": 1, "payload_size": 17}))
    lines.insert(3, "{not json")
    lines.insert(5, json.dumps({"devEUI": "x", "fCnt": 1}))
    lines.insert(7, json.dumps({"devEUI": "x", "_timestamp": t0, "data": "###"}))
    path = tmp_path / "sample.ndjson.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def test_campusiot_generated_sample(tmp_path):
    trace, summary = read_campusiot(write_campusiot_sample(tmp_path))
    assert len(trace) == 11 and summary.records == 11
    assert summary.bad_lines == 3
    assert set(summary.bad_reasons) == {"not JSON", "no numeric _timestamp", "undecodable payload"}
    assert summary.bad_examples[0][0] == 4  # line number of the first bad line
    dev = summary.devices["d1d1e80000000033"]
    assert dev["lost"] == 2 and dev["gaps"] == 1 and dev["counter_resets"] == 1
    assert summary.devices["a81758fffe04b1c1"]["duplicates"] == 1
    assert summary.upstream_lost == 2
    assert "upstream loss 2 frames" in str(summary)
    f = trace.frame
    sizes = dict(zip(zip(f["publisher"].astype(str), f["t_s"].round(3)), f["size_bytes"]))
    assert sizes[("d1d1e80000000033", 0.0)] == 2  # hex "00ff" -> 2 bytes
    assert sizes[("d1d1e80000000033", 600.0)] == 4
    assert sizes[("a81758fffe04b1c1", 1.0)] == 23  # base64 of 23 bytes
    assert sizes[("beef", 0.005)] == 17  # payload_size field
    assert summary.no_payload == 1  # the status frame
    topics = set(f["topic"].astype(str))
    assert topics == {"application/rx", "application/status", DEFAULT_CAMPUSIOT_TOPIC}
    assert trace.origin_epoch_s == pytest.approx(1_687_511_428.896)
    assert trace.t0_of_day_s == pytest.approx(1_687_511_428.896 % 86400)


def test_campusiot_all_bad_is_an_error(tmp_path):
    path = tmp_path / "bad.ndjson.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("nope\n[]\n")
    with pytest.raises(ConfigError, match="2 bad of 2 lines"):
        read_campusiot(path)


@pytest.mark.parametrize("name", ["sainteynard-d1d1e80000000033.ndjson.gz", "helium-ftd-0018B20000020.ndjson.gz"])
def test_campusiot_shared(tmp_path, name):
    path, real = _shared_or_generated(f"campusiot/{name}", write_campusiot_sample, tmp_path)
    trace, summary = read_campusiot(path)
    assert summary.bad_lines == (0 if real else 3)
    assert len(trace) == summary.records > 0
    assert np.all(np.diff(trace.t_s) >= 0)
    if real and "sainteynard-d1d1e80000000033" in name:
        assert 13_000 < len(trace) < 15_000
        assert np.median(trace.size_bytes[trace.frame["topic"] == "application/rx"]) == 32  # README: median 32 B
        assert 0 < summary.upstream_loss_rate < 0.05
        assert trace.span_s > 90 * 86400


# --------------------------------------------------------------------------- pcap sample


def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def mqtt_publish(topic, payload, qos=0, retain=False, pid=1, dup=False, v5=False):
    body = (
        struct.pack("!H", len(topic))
        + topic.encode()
        + (struct.pack("!H", pid) if qos else b"")
        + (b"\x00" if v5 else b"")
        + payload
    )
    return bytes([0x30 | (8 if dup else 0) | (qos << 1) | int(retain)]) + _varint(len(body)) + body


def mqtt_connect(level=4):
    body = struct.pack("!H", 4) + b"MQTT" + bytes([level, 2]) + struct.pack("!H", 60) + struct.pack("!H", 1) + b"c"
    if level == 5:
        body = body[:10] + b"\x00" + body[10:]
    return bytes([0x10]) + _varint(len(body)) + body


class PcapWriter:
    """Ethernet/IPv4/TCP frames into a pcap (or pcapng) file, with per-flow sequence numbers."""

    def __init__(self, path, ng=False):
        self.fh = open(path, "wb")
        self.w = (dpkt.pcapng.Writer if ng else dpkt.pcap.Writer)(self.fh, linktype=dpkt.pcap.DLT_EN10MB)
        self.seq = {}
        self.t = 1_600_000_000.0

    def frame(self, src, dst, payload=b"", flags=dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, seq=None, dt=0.001):
        (sip, sport), (dip, dport) = src, dst
        key = (src, dst)
        if seq is None:
            seq = self.seq.get(key, 1000)
            self.seq[key] = seq + len(payload) + (1 if flags & dpkt.tcp.TH_SYN else 0)
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=flags, data=payload)
        ip = dpkt.ip.IP(src=socket.inet_aton(sip), dst=socket.inet_aton(dip), p=dpkt.ip.IP_PROTO_TCP, data=tcp)
        eth = dpkt.ethernet.Ethernet(src=b"\x00" * 6, dst=b"\x01" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
        self.t += dt
        self.w.writepkt(bytes(eth), ts=self.t)
        return seq

    def raw(self, data):
        self.t += 0.001
        self.w.writepkt(data, ts=self.t)

    def close(self):
        self.fh.close()


BROKER = ("10.0.0.9", 1883)
A = ("10.0.0.1", 5000)
B = ("10.0.0.2", 5001)


def write_pcap_sample(tmp_path, ng=False):
    """Expected client PUBLISH (to the broker): 3 + 1 + 1 + 2 + 1 = 8; one malformed packet."""
    path = tmp_path / ("sample.pcapng" if ng else "sample.pcap")
    w = PcapWriter(path, ng=ng)
    w.frame(A, BROKER, flags=dpkt.tcp.TH_SYN)
    w.frame(A, BROKER, mqtt_connect())
    # three packets in one segment
    w.frame(A, BROKER, b"".join(mqtt_publish("s/t", bytes(n)) for n in (1, 2, 3)))
    # one packet (payload 300 B: two-byte remaining length) over three segments, a retransmission between
    big = mqtt_publish("s/big", bytes(300), qos=1, retain=True, pid=7)
    s1 = w.frame(A, BROKER, big[:1])  # splits the fixed header itself
    w.frame(A, BROKER, big[1:100])
    w.frame(A, BROKER, big[1:100], seq=s1 + 1)  # retransmitted
    w.frame(A, BROKER, big[100:])
    # out of order: the second half arrives before the first
    pkt = mqtt_publish("s/ooo", bytes(10))
    seq = w.seq[(A, BROKER)]
    w.frame(A, BROKER, pkt[6:], seq=seq + 6)
    w.frame(A, BROKER, pkt[:6], seq=seq)
    w.seq[(A, BROKER)] = seq + len(pkt)
    # the broker delivers to a subscriber (not client load)
    w.frame(BROKER, A, mqtt_publish("s/t", bytes(5)))
    # client B: MQTT 5 publish with properties, a malformed packet, then a fresh good segment
    w.frame(B, BROKER, flags=dpkt.tcp.TH_SYN)
    w.frame(B, BROKER, mqtt_connect(level=5))
    body = struct.pack("!H", 3) + b"v/5" + b"\x02\x01\x01" + bytes(9)  # properties: payload format indicator
    w.frame(B, BROKER, bytes([0x30]) + _varint(len(body)) + body)
    w.frame(B, BROKER, bytes([0x36, 0x05]) + b"\x00\x01a\x00\x01")  # QoS 3
    w.frame(B, BROKER, mqtt_publish("s/after", bytes(4), v5=True) + mqtt_publish("s/after", bytes(6), v5=True))
    w.frame(B, BROKER, mqtt_publish("s/last", bytes(8), qos=2, pid=3, v5=True))
    # a frame that is not even IP, and a UDP datagram
    w.raw(b"\x00" * 6 + b"\x01" * 6 + b"\x08\x00" + b"\x45")
    udp = dpkt.udp.UDP(sport=1, dport=2, data=b"x")
    ip = dpkt.ip.IP(src=b"\x01\x02\x03\x04", dst=b"\x01\x02\x03\x05", p=dpkt.ip.IP_PROTO_UDP, data=udp)
    w.raw(bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)))
    w.close()
    return path


@pytest.mark.parametrize("ng", [False, True], ids=["pcap", "pcapng"])
def test_pcap_generated_sample(tmp_path, ng):
    trace, s = read_mqtt_pcap(write_pcap_sample(tmp_path, ng=ng))
    f = trace.frame
    assert list(f["topic"].astype(str)) == ["s/t"] * 3 + ["s/big", "s/ooo", "v/5", "s/after", "s/after", "s/last"]
    assert list(f["size_bytes"]) == [1, 2, 3, 300, 10, 9, 4, 6, 8]
    assert list(f["qos"]) == [0, 0, 0, 1, 0, 0, 0, 0, 2]
    assert list(f["retain"]) == [False] * 3 + [True] + [False] * 5
    assert set(f["publisher"].astype(str)) == {"10.0.0.1:5000", "10.0.0.2:5001"}
    assert f["connection"].astype(str).iloc[0] == "10.0.0.1:5000->10.0.0.9:1883"
    assert s.malformed == 1 and "PUBLISH with QoS 3" in s.malformed_reasons
    assert s.retransmitted_bytes == 99
    assert s.bad_frames + s.non_tcp == 2  # a truncated IP header (dpkt may keep it as raw bytes), a UDP datagram
    assert s.mqtt_packets["CONNECT"] == 2 and s.mqtt_packets["PUBLISH"] == 10
    assert s.pending_bytes == 0 and s.packets_per_s > 0
    both, _ = read_mqtt_pcap(write_pcap_sample(tmp_path, ng=ng), direction="both")
    assert len(both) == len(trace) + 1
    assert "10.0.0.9:1883->10.0.0.1:5000" in set(both.frame["connection"].astype(str))


def test_pcap_not_a_capture(tmp_path):
    (tmp_path / "x.pcap").write_bytes(b"hello world, not a capture")
    with pytest.raises(ConfigError, match="pcap or pcapng"):
        read_mqtt_pcap(tmp_path / "x.pcap")


def test_pcap_truncated_file_keeps_what_was_read(tmp_path):
    path = write_pcap_sample(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-30])
    trace, s = read_mqtt_pcap(cut)
    assert len(trace) == 9


def test_pcap_garbage_streams_never_crash(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "fuzz.pcap"
    w = PcapWriter(path)
    for i in range(300):
        client = ("10.1.0.1", 6000 + i % 7)
        if i % 5 == 0:
            payload = mqtt_publish("f/x", rng.bytes(int(rng.integers(0, 40))), qos=int(rng.integers(0, 3)))
            payload = bytearray(payload)
            for _ in range(int(rng.integers(0, 3))):
                payload[int(rng.integers(0, len(payload)))] = int(rng.integers(0, 256))
            payload = bytes(payload)
        else:
            payload = rng.bytes(int(rng.integers(1, 60)))
        w.frame(client, BROKER, payload)
    w.close()
    trace, s = read_mqtt_pcap(path)
    assert s.packets == 300 and s.malformed > 0
    assert len(trace) == s.publishes


def test_pcap_shared_malformed_reads_to_the_end(tmp_path):
    path, real = _shared_or_generated("mqttset/malformed.pcap", write_pcap_sample, tmp_path)
    trace, s = read_mqtt_pcap(path)
    n_records = sum(1 for _ in dpkt.pcap.UniversalReader(open(path, "rb")))
    assert s.packets == n_records  # every record read, none fatal
    assert len(trace) == s.publishes > 0
    if real:
        assert s.mqtt_packets["CONNECT"] > 100


def test_pcap_shared_flood_reads_fast(tmp_path):
    path, real = _shared_or_generated("mqttset/flood.pcap", write_pcap_sample, tmp_path)
    trace, s = read_mqtt_pcap(path)
    print(f"\n{s}")
    assert s.read_s < 10.0
    assert s.packets_per_s > 0 and s.mqtt_packets_per_s > 0
    if real:
        assert s.publishes > 50_000 and trace.frame["publisher"].nunique() == 1
        assert s.mqtt_packets_per_s > 50_000


def test_pcap_shared_benign(tmp_path):
    path, real = _shared_or_generated("mqttset/benign.pcap", write_pcap_sample, tmp_path)
    trace, s = read_mqtt_pcap(path)
    assert s.malformed == (0 if real else 1)
    if real:
        assert trace.frame["publisher"].nunique() == 10
        assert 500 < trace.span_s < 600


def test_without_shared_traces_the_generated_sample_is_used_and_announced(tmp_path, monkeypatch):
    import tests.loads.test_loads_readers as me

    monkeypatch.setattr(me, "SHARED", tmp_path / "absent")
    with pytest.warns(UserWarning, match="using a generated sample"):
        me.test_pcap_shared_malformed_reads_to_the_end(tmp_path)
    with pytest.warns(UserWarning, match="using a generated sample"):
        me.test_campusiot_shared(tmp_path, "sainteynard-d1d1e80000000033.ndjson.gz")
    with pytest.warns(UserWarning, match="using a generated sample"):
        me.test_pcap_shared_benign(tmp_path)
