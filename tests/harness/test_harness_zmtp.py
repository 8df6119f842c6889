"""The load generator's own ZMTP 3.0 SUB peer (calibration.harness.zmtpwire)."""

import socket
import threading

import numpy as np
import pytest

from pubsim.calibration.harness import zmtpwire as zw
from pubsim.calibration.harness.loadgen.records import HEADER, HEADER_BYTES, RECORD_DTYPE, STRIDE


def test_greeting_is_64_bytes_zmtp_3_0_null():
    g = zw.GREETING
    assert len(g) == 64 and g[0] == 0xFF and g[9] == 0x7F and g[10:12] == b"\x03\x00"
    assert g[12:32] == b"NULL" + bytes(16) and g[32] == 0  # not as-server


def test_frames_short_long_and_commands():
    assert zw.frame(b"ab") == b"\x00\x02ab"
    long = zw.frame(b"x" * 300)
    assert long[0] == 0x02 and int.from_bytes(long[1:9], "big") == 300 and len(long) == 309
    # RFC 23: READY is a command frame whose body is the name, then name-length name value-length(4) value
    ready = zw.command(b"READY", {b"Socket-Type": b"SUB"})
    assert ready == b"\x04\x19\x05READY\x0bSocket-Type\x00\x00\x00\x03SUB"


def _message(pub, seq, t, topic, extra=0):
    return f"pubsim/t{topic}".encode() + b"\0" + HEADER.pack(pub, seq, t, topic) + b"p" * extra


def test_feed_records_over_split_reads_with_long_frames_and_a_heartbeat():
    msgs = [(1, 7 + i, 1000 + i, i % 3) for i in range(5)]
    blob = b"".join(zw.frame(_message(*m, extra=400 * (i % 2))) for i, m in enumerate(msgs))
    blob = zw.command(b"PING") + blob  # a heartbeat command ahead of the messages: skipped
    for cut in (1, 3, 9, 30, len(blob) - 1):
        s = zw.ZmtpStream()
        rec = bytearray(8 * STRIDE)
        off, _ = s.feed_records(blob[:cut], 11, rec, 0, header_bytes=HEADER_BYTES, stride=STRIDE, t_kernel_ns=5)
        n1 = off // STRIDE
        off, _ = s.feed_records(blob[cut:], 22, rec, off, header_bytes=HEADER_BYTES, stride=STRIDE, t_kernel_ns=9)
        arr = np.frombuffer(bytes(rec[:off]), RECORD_DTYPE)
        assert [tuple(int(x) for x in r)[:4] for r in arr] == msgs, cut
        assert list(arr["t_recv_ns"]) == [11] * n1 + [22] * (5 - n1)
        assert list(arr["t_kernel_ns"]) == [5] * n1 + [9] * (5 - n1)
        assert s.pending == 0


def test_a_message_without_its_header_is_refused():
    with pytest.raises(zw.ZmtpError, match="header"):
        zw.ZmtpStream().feed_records(
            zw.frame(b"t\0short"), 0, bytearray(STRIDE), 0, header_bytes=HEADER_BYTES, stride=STRIDE
        )


def _fake_xpub(greeting, reply_ready=True):
    """A one-connection peer: sends ``greeting`` and READY, then records what the SUB sent."""
    srv = socket.create_server(("127.0.0.1", 0))
    got = bytearray()

    def serve():
        c, _ = srv.accept()
        with c:
            c.sendall(greeting)
            if reply_ready:
                c.sendall(zw.command(b"READY", {b"Socket-Type": b"XPUB"}))
            c.settimeout(2.0)
            try:
                while len(got) < 64 + 27 + 2 * 12:
                    data = c.recv(4096)
                    if not data:
                        break
                    got.extend(data)
            except OSError:
                pass
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv.getsockname()[1], got, t


def test_connect_greets_announces_sub_and_subscribes_by_message():
    peer = bytearray(zw.GREETING)
    peer[11] = 1  # a ZMTP 3.1 peer (libzmq 4.3)
    port, got, t = _fake_xpub(bytes(peer))
    sock, stream = zw.connect(port, [b"pubsim/t0\0", b"pubsim/t1\0"], timeout_s=3.0)
    t.join(3.0)
    sock.close()
    assert bytes(got[:64]) == zw.GREETING
    rest = zw.ZmtpStream().frames(bytes(got[64:]))
    assert rest[0] == (0x04, b"\x05READY\x0bSocket-Type\x00\x00\x00\x03SUB")
    assert rest[1:] == [(0, b"\x01pubsim/t0\0"), (0, b"\x01pubsim/t1\0")]  # ZMTP 3.0 subscriptions


@pytest.mark.parametrize(
    ("greeting", "match"),
    [
        (b"\x00" * 64, "not a ZMTP 3 greeting"),
        (zw.GREETING[:12] + b"CURVE".ljust(20, b"\x00") + zw.GREETING[32:], "not NULL"),
    ],
)
def test_connect_refuses_what_is_not_zmtp3_null(greeting, match):
    port, _, t = _fake_xpub(greeting, reply_ready=False)
    with pytest.raises(zw.ZmtpError, match=match):
        zw.connect(port, [b"t\0"], timeout_s=2.0)
    t.join(3.0)
