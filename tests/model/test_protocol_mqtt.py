"""The one MQTT codec (pubsim.models.protocol.mqtt): encode -> decode round trips for every packet type used.

The load generator, the $SYS reader and the pcap reader all go through it, so
a packet the harness writes must read back the same through the stream
decoder (lenient) and the capture parser (strict).
"""

from __future__ import annotations

import struct

import pytest

from pubsim.calibration.harness import mqttwire
from pubsim.models.loads import readers
from pubsim.models.protocol import PROTOCOLS, framing_bytes
from pubsim.models.protocol import mqtt as M


def _split(pkt):
    """(type, flags, body) of one encoded packet, through the codec's varint decoder."""
    rem, start = M.decode_remaining_length(pkt, 1)
    assert start + rem == len(pkt)
    return pkt[0] >> 4, pkt[0] & 0x0F, pkt[start:]


def test_one_codec_shared_by_harness_and_reader():
    assert mqttwire.MqttStream is M.MqttStream and mqttwire.encode_publish is M.encode_publish
    assert readers.MQTT_TYPES is M.TYPE_NAMES
    assert all(getattr(mqttwire, n) is getattr(M, n) for n in M.__all__) and set(M.__all__) <= set(mqttwire.__all__)
    assert set(PROTOCOLS) == {"mqtt", "amqp", "zmq", "none"}  # the package keeps its public names
    assert int(framing_bytes("mqtt", 10, 5)) == 1 + 1 + 2 + 5


@pytest.mark.parametrize("n", [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, M.MAX_REMAINING_LENGTH])
def test_remaining_length_round_trip(n):
    enc = M.encode_remaining_length(n)
    assert len(enc) == 1 + (n >= 128) + (n >= 16_384) + (n >= 2_097_152)
    assert M.decode_remaining_length(b"\x30" + enc, 1) == (n, 1 + len(enc))
    assert M.decode_remaining_length(b"\x30" + enc[:-1], 1) is None


def test_remaining_length_too_long():
    with pytest.raises(M.MqttError, match="longer than 4 bytes"):
        M.decode_remaining_length(b"\xff\xff\xff\xff\x01")


def test_connect_round_trip():
    pkt = M.encode_connect("client-1", keepalive=30, username="u", password="p")
    ptype, flags, body = _split(pkt)
    assert (ptype, flags) == (M.CONNECT, 0)
    M.check_fixed_header(ptype, flags)
    assert M.connect_version(body) == 4
    assert body[7] == 0x02 | 0x80 | 0x40  # clean session, user name, password
    assert struct.unpack_from("!H", body, 8)[0] == 30
    assert body[10:].endswith(b"\x00\x01u\x00\x01p")


def test_subscribe_round_trip():
    pkt = M.encode_subscribe(7, ["a/b", "c"], qos=1)
    ptype, flags, body = _split(pkt)
    assert (ptype, flags) == (M.SUBSCRIBE, 2)
    M.check_fixed_header(ptype, flags)
    assert body == struct.pack("!H", 7) + b"\x00\x03a/b\x01" + b"\x00\x01c\x01"


@pytest.mark.parametrize("qos, retain, dup", [(0, False, False), (0, True, False), (1, False, False), (1, True, True)])
@pytest.mark.parametrize("payload", [b"", b"x" * 20, bytes(range(256)) * 600])
def test_publish_round_trip_stream_and_capture(qos, retain, dup, payload):
    pid = 513 if qos else None
    pkt = M.encode_publish("pubsim/t3", payload, qos=qos, packet_id=pid, retain=retain, dup=dup)
    # lenient stream decoder, fed one byte at a time then all at once
    stream = M.MqttStream()
    got = [p for i in range(len(pkt)) for p in stream.feed(pkt[i : i + 1])] if len(pkt) < 400 else stream.feed(pkt)
    assert got == [M.Packet(M.PUBLISH, pkt[0] & 0x0F, "pubsim/t3", payload, pid)]
    assert stream.pending == 0
    # strict capture parser
    ptype, flags, body = _split(pkt)
    M.check_fixed_header(ptype, flags)
    topic, start, q, r = M.parse_publish(body, flags)
    assert (topic, bytes(body[start:]), q, r) == ("pubsim/t3", payload, qos, retain)


@pytest.mark.parametrize(
    "pkt, ptype, pid",
    [
        (M.encode_puback(0xBEEF), M.PUBACK, 0xBEEF),
        (M.encode_pingreq(), M.PINGREQ, None),
        (M.encode_disconnect(), M.DISCONNECT, None),
    ],
)
def test_small_packets_round_trip(pkt, ptype, pid):
    (got,) = M.MqttStream().feed(pkt)
    assert (got.type, got.flags, got.packet_id) == (ptype, 0, pid)
    M.check_fixed_header(*_split(pkt)[:2])


def test_publish_template_and_packet_ids_are_patched_in_place():
    tmpl = M.PublishTemplate("pubsim/t0", 24, qos=1)
    tmpl.patch("<HQ", 0, 9, 12345)
    batch = bytearray(bytes(tmpl.buf) * 3)
    offsets = [k * len(tmpl) + tmpl.packet_id_offset for k in range(3)]
    assert M.patch_packet_ids(batch, offsets, 65534) == 2  # wraps 65535 -> 1, never 0
    stream = M.MqttStream()
    pkts = stream.feed(batch)
    assert [p.packet_id for p in pkts] == [65535, 1, 2]
    assert all(struct.unpack_from("<HQ", p.payload) == (9, 12345) and len(p.payload) == 24 for p in pkts)
    assert bytes(batch[: len(tmpl)]) == M.encode_publish("pubsim/t0", pkts[0].payload, qos=1, packet_id=65535)
    # the fast path sees the same messages and ids
    rec = bytearray(3 * 16)
    ack_ids = []
    off, others = M.MqttStream().feed_records(batch, 77, rec, 0, header_bytes=8, stride=16, ack_ids=ack_ids)
    assert (off, others, ack_ids) == (48, [], [65535, 1, 2])
    assert struct.unpack_from("<HQ", rec, 0)[0] == 9 and struct.unpack_from("<q", rec, 8)[0] == 77


@pytest.mark.parametrize(
    "flags, body, reason",
    [
        (0x06, b"\x00\x01a", "QoS 3"),
        (0x08, b"\x00\x01a", "DUP set at QoS 0"),
        (0x00, b"\x00\x09a", "topic longer than the packet"),
        (0x00, b"\x00\x03a/#", "wildcard"),
        (0x00, b"\x00\x02\xff\xfe", "not UTF-8"),
        (0x02, b"\x00\x01a\x00\x00", "packet identifier 0"),
        (0x00, b"\x00\x00xyz", "empty topic"),
    ],
)
def test_parse_publish_rejects(flags, body, reason):
    with pytest.raises(M.MqttError, match=reason):
        M.parse_publish(body, flags)


def test_parse_publish_mqtt5_properties():
    body = b"\x00\x01a" + b"\x02\x01\x01" + b"data"
    assert M.parse_publish(body, 0, version=5) == ("a", 6, 0, False)
    with pytest.raises(M.MqttError, match="properties longer"):
        M.parse_publish(b"\x00\x01a\x09", 0, version=5)


def test_fixed_header_checks():
    with pytest.raises(M.MqttError, match="reserved packet type 0"):
        M.check_fixed_header(0, 0)
    with pytest.raises(M.MqttError, match="SUBSCRIBE with fixed-header flags 0x0"):
        M.check_fixed_header(M.SUBSCRIBE, 0)
    with pytest.raises(M.MqttError, match="AUTH outside MQTT 5"):
        M.check_fixed_header(M.AUTH, 0, 4)
    M.check_fixed_header(M.AUTH, 0, 5)


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"\x00\x04MQT", "too short"),
        (b"\x00\x04MQTX\x04\x02\x00\x3c", "unknown protocol name"),
        (b"\x00\x04MQTT\x07\x02\x00\x3c", "protocol level 7"),
    ],
)
def test_connect_version_rejects(body, reason):
    with pytest.raises(M.MqttError, match=reason):
        M.connect_version(body)
