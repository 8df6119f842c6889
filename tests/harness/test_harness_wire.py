"""Wire codecs of the load generator: MQTT 3.1.1 and NATS, no broker needed."""

import socket
import struct
import threading

import numpy as np
import pytest

from pubsim.calibration.harness import mqttwire as mw
from pubsim.calibration.harness import natswire as nw
from pubsim.calibration.harness.loadgen import HEADER, HEADER_BYTES, RECORD_DTYPE, STRIDE

# ---------------------------------------------------------------------------------------------
# MQTT


@pytest.mark.parametrize(
    "n, size",
    [
        (0, 1),
        (1, 1),
        (127, 1),
        (128, 2),
        (16383, 2),
        (16384, 3),
        (2_097_151, 3),
        (2_097_152, 4),
        (mw.MAX_REMAINING_LENGTH, 4),
    ],
)
def test_remaining_length_round_trip_and_size(n, size):
    enc = mw.encode_remaining_length(n)
    assert len(enc) == size
    assert mw.decode_remaining_length(b"\xff" + enc + b"tail", 1) == (n, 1 + size)
    for cut in range(size):  # incomplete varint
        assert mw.decode_remaining_length(enc[:cut]) is None


def test_remaining_length_known_bytes_and_errors():
    assert mw.encode_remaining_length(128) == b"\x80\x01"
    assert mw.encode_remaining_length(16384) == b"\x80\x80\x01"
    for bad in (-1, mw.MAX_REMAINING_LENGTH + 1):
        with pytest.raises(ValueError):
            mw.encode_remaining_length(bad)
    with pytest.raises(mw.MqttError):
        mw.decode_remaining_length(b"\xff\xff\xff\xff\x01")


def test_connect_subscribe_and_small_packets_bytes():
    assert mw.encode_connect("a", keepalive=60) == b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01a"
    assert mw.encode_connect("a", clean_session=False, keepalive=0)[9] == 0x00
    assert mw.encode_subscribe(7, "x/y", 1) == b"\x82\x08\x00\x07\x00\x03x/y\x01"
    assert mw.encode_subscribe(1, ["a", "b"], 0) == b"\x82\x0a\x00\x01\x00\x01a\x00\x00\x01b\x00"
    assert mw.encode_puback(0x1234) == b"\x40\x02\x12\x34"
    assert mw.encode_pingreq() == b"\xc0\x00"
    assert mw.encode_disconnect() == b"\xe0\x00"
    assert mw.encode_publish("t", b"xy") == b"\x30\x05\x00\x01txy"
    assert mw.encode_publish("t", b"", qos=1, packet_id=258, retain=True) == b"\x33\x05\x00\x01t\x01\x02"
    with pytest.raises(ValueError):
        mw.encode_publish("t", b"", qos=1)


@pytest.mark.parametrize("qos, retain", [(0, False), (1, False), (0, True), (1, True)])
def test_publish_round_trip(qos, retain):
    payload = bytes(range(256)) * 3
    pkt = mw.encode_publish("pubsim/t12", payload, qos=qos, packet_id=65535 if qos else None, retain=retain)
    (p,) = mw.MqttStream().feed(pkt)
    assert (p.type, p.topic, p.payload) == (mw.PUBLISH, "pubsim/t12", payload)
    assert p.flags == (qos << 1) | int(retain)
    assert p.packet_id == (65535 if qos else None)


def test_server_packets_decode():
    s = mw.MqttStream()
    connack, suback, puback, pingresp = s.feed(
        b"\x20\x02\x00\x00" + b"\x90\x04\x00\x05\x01\x80" + b"\x40\x02\x00\x09" + b"\xd0\x00"
    )
    assert (connack.type, connack.payload) == (mw.CONNACK, b"\x00\x00")
    assert (suback.type, suback.packet_id, suback.payload) == (mw.SUBACK, 5, b"\x01\x80")
    assert (puback.type, puback.packet_id) == (mw.PUBACK, 9)
    assert pingresp.type == mw.PINGRESP


@pytest.mark.parametrize("remaining", [127, 128, 16383, 16384])
def test_remaining_length_boundaries_byte_by_byte(remaining):
    topic = "pubsim/t0"
    payload = bytes((i * 7) % 251 for i in range(remaining - 2 - len(topic)))
    pkt = mw.encode_publish(topic, payload)
    assert mw.decode_remaining_length(pkt, 1)[0] == remaining
    s = mw.MqttStream()
    got = []
    for i in range(len(pkt)):
        got += s.feed(pkt[i : i + 1])
        if i < len(pkt) - 1:
            assert got == []
    assert [(p.topic, p.payload) for p in got] == [(topic, payload)]
    assert s.pending == 0


def test_several_packets_in_one_feed_and_every_split():
    pkts = [
        mw.encode_publish(f"t/{i}", bytes([i]) * (i * 40), qos=i % 2, packet_id=i + 1 if i % 2 else None)
        for i in range(6)
    ] + [b"\x40\x02\x00\x03"]
    blob = b"".join(pkts)
    whole = mw.MqttStream().feed(blob)
    assert len(whole) == 7 and whole[3].payload == bytes([3]) * 120 and whole[-1].type == mw.PUBACK
    for cut in range(1, len(blob)):
        s = mw.MqttStream()
        assert s.feed(blob[:cut]) + s.feed(blob[cut:]) == whole


def test_publish_template_patches_in_place():
    t = mw.PublishTemplate("pubsim/t3", 32, qos=1)
    buf_id = id(t.buf)
    t.patch("<HQ", 0, 9, 123456789)
    t.set_packet_id(4242)
    payload = struct.pack("<HQ", 9, 123456789) + bytes(22)
    assert bytes(t.buf) == mw.encode_publish("pubsim/t3", payload, qos=1, packet_id=4242)
    assert id(t.buf) == buf_id and len(t) == len(t.buf)
    t0 = mw.PublishTemplate("x", 20)
    assert t0.packet_id_offset is None and t0.payload_offset == len(t0.buf) - 20


def _header(pub, seq, t, topic):
    return HEADER.pack(pub, seq, t, topic)


def test_feed_records_split_reads_qos1_and_other_packets():
    msgs = [(1, 10 + i, 1000 + i, i % 3) for i in range(5)]
    blob = b"".join(
        mw.encode_publish(
            f"pubsim/t{m[3]}", _header(*m) + b"z" * (i * 50), qos=i % 2, packet_id=100 + i if i % 2 else None
        )
        for i, m in enumerate(msgs)
    )
    blob += b"\xd0\x00"  # PINGRESP after them
    for cut in (1, 7, 40, len(blob) - 1):
        s = mw.MqttStream()
        rec = bytearray(10 * STRIDE)
        acks = []
        off, others1 = s.feed_records(blob[:cut], 111, rec, 0, header_bytes=HEADER_BYTES, stride=STRIDE, ack_ids=acks)
        n1 = off // STRIDE
        off, others2 = s.feed_records(
            blob[cut:], 222, rec, off, header_bytes=HEADER_BYTES, stride=STRIDE, ack_ids=acks, t_kernel_ns=200
        )
        arr = np.frombuffer(bytes(rec[:off]), RECORD_DTYPE)
        assert [tuple(int(x) for x in r)[:4] for r in arr] == msgs
        assert list(arr["t_recv_ns"]) == [111] * n1 + [222] * (5 - n1)
        # the first read gave no kernel time (0: none), the second its own for every message it completed
        assert list(arr["t_kernel_ns"]) == [0] * n1 + [200] * (5 - n1)
        assert acks == [101, 103]
        assert [p.type for p in others1 + others2] == [mw.PINGRESP]


def test_feed_records_rejects_short_payload():
    with pytest.raises(mw.MqttError):
        mw.MqttStream().feed_records(
            mw.encode_publish("t", b"short"), 0, bytearray(STRIDE), 0, header_bytes=HEADER_BYTES, stride=STRIDE
        )


def _fake_broker(reply):
    """A one-shot TCP server answering the first bytes it reads with ``reply``."""
    srv = socket.create_server(("127.0.0.1", 0))
    seen = []

    def serve():
        c, _ = srv.accept()
        seen.append(c.recv(1024))
        c.sendall(reply)
        seen.append(c.recv(1024))
        c.close()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], seen


def test_connect_helper_accepted_and_refused():
    port, seen = _fake_broker(b"\x20\x02\x00\x00")
    sock, stream = mw.connect(port, "cid", keepalive=30)
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    assert sock.gettimeout() is None
    sock.sendall(mw.encode_disconnect())
    sock.close()
    assert seen[0] == mw.encode_connect("cid", keepalive=30)
    port, _ = _fake_broker(b"\x20\x02\x00\x05")
    with pytest.raises(mw.MqttError, match="not authorized"):
        mw.connect(port, "cid")


# ---------------------------------------------------------------------------------------------
# NATS


def test_nats_encoders():
    assert nw.encode_connect() == b'CONNECT {"verbose":false,"pedantic":false}\r\n'
    assert nw.encode_pub("a.b", b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert nw.encode_pub("a.b", b"", reply="r") == b"PUB a.b r 0\r\n\r\n"
    assert nw.encode_sub("a.*", 3) == b"SUB a.* 3\r\n"
    assert nw.encode_sub("a", 1, queue="q") == b"SUB a q 1\r\n"
    assert nw.encode_unsub(3, 10) == b"UNSUB 3 10\r\n"
    assert nw.subject_for("pubsim/t7") == "pubsim.t7"
    with pytest.raises(ValueError):
        nw.encode_pub("a b", b"")
    t = nw.NatsPublishTemplate("pubsim.t1", 24)
    t.patch("<Q", 4, 77)
    assert bytes(t.buf) == nw.encode_pub("pubsim.t1", bytes(4) + struct.pack("<Q", 77) + bytes(12))


SERVER_STREAM = (
    b'INFO {"server_id":"x","max_payload":1048576}\r\n'
    b"MSG pubsim.t0 1 5\r\nhello\r\n"
    b"PING\r\n"
    b"MSG a.b 22 reply.to 6\r\nx\r\ny\r\n\r\n"  # payload holds CRLFs
    b"+OK\r\n"
    b"MSG e 3 0\r\n\r\n"
    b"PONG\r\n"
    b"-ERR 'Slow Consumer'\r\n"
)


def test_nats_stream_parses_all_operations():
    events = nw.NatsStream().feed(SERVER_STREAM)
    assert [e.op for e in events] == ["INFO", "MSG", "PING", "MSG", "+OK", "MSG", "PONG", "-ERR"]
    assert events[0].info()["max_payload"] == 1048576
    assert events[1] == nw.NatsEvent("MSG", "pubsim.t0", 1, None, b"hello")
    assert events[3] == nw.NatsEvent("MSG", "a.b", 22, "reply.to", b"x\r\ny\r\n")
    assert events[5].payload == b""
    assert events[7].payload == b"Slow Consumer"


def test_nats_msg_split_across_feeds():
    whole = nw.NatsStream().feed(SERVER_STREAM)
    s = nw.NatsStream()
    got = []
    for i in range(len(SERVER_STREAM)):
        got += s.feed(SERVER_STREAM[i : i + 1])
    assert got == whole and s.pending == 0
    for cut in range(1, len(SERVER_STREAM)):
        s = nw.NatsStream()
        assert s.feed(SERVER_STREAM[:cut]) + s.feed(SERVER_STREAM[cut:]) == whole


def test_nats_unknown_operation_and_bad_framing():
    with pytest.raises(nw.NatsError):
        nw.NatsStream().feed(b"BOGUS x\r\n")
    with pytest.raises(nw.NatsError, match="CRLF"):
        nw.NatsStream().feed(b"MSG a 1 2\r\nabc\r\n")
    with pytest.raises(nw.NatsError, match="CRLF"):
        nw.NatsStream().feed_records(
            b"MSG a 1 20\r\n" + bytes(21) + b"\r\n", 0, bytearray(STRIDE), 0, header_bytes=HEADER_BYTES, stride=STRIDE
        )


def test_nats_feed_records():
    msgs = [(2, i, 5000 + i, i % 2) for i in range(4)]
    blob = (
        b"PING\r\n"
        + b"".join(
            (b"MSG pubsim.t%d 1 %s%d\r\n" % (m[3], b"r " if i == 2 else b"", HEADER_BYTES + 3))
            + _header(*m)
            + b"\r\n\r"
            + b"\r\n"
            for i, m in enumerate(msgs)
        )
        + b"PONG\r\n"
    )
    for cut in range(1, len(blob)):
        s = nw.NatsStream()
        rec = bytearray(8 * STRIDE)
        off, o1 = s.feed_records(blob[:cut], 1, rec, 0, header_bytes=HEADER_BYTES, stride=STRIDE)
        off, o2 = s.feed_records(blob[cut:], 2, rec, off, header_bytes=HEADER_BYTES, stride=STRIDE, t_kernel_ns=-7)
        arr = np.frombuffer(bytes(rec[:off]), RECORD_DTYPE)
        assert [tuple(int(x) for x in r)[:4] for r in arr] == msgs, cut
        assert set(arr["t_kernel_ns"][arr["t_recv_ns"] == 2]) <= {-7} and set(
            arr["t_kernel_ns"][arr["t_recv_ns"] == 1]
        ) <= {0}
        assert [e.op for e in o1 + o2] == ["PING", "PONG"]
        assert s.pending == 0
