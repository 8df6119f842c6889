"""The broker's side of its connections sampled with ``ss`` (``calibration/harness/sockets.py``)."""

import math
import socket
import time

import pytest

from pubsim.calibration.harness.sockets import FIELDS, SocketSampler, parse_ss, ss_available

# ``ss -tmniH state established '( sport = :1883 )'`` as iproute2 6.1 prints it (abridged).
SS = """\
0      0      127.0.0.1:1883 127.0.0.1:41960
\t skmem:(r0,rb2331259,t0,tb2626560,f0,w0,o0,bl0,d0) cubic wscale:7,7 advmss:65483 bytes_received:98304000 rcv_rtt:0.05 rcv_space:65483 rcv_ssthresh:2229554 minrtt:0.005
393396 0      127.0.0.1:1883 127.0.0.1:41964
\t skmem:(r400000,rb524288,t0,tb2626560,f0,w0,o0,bl0,d0) cubic wscale:7,7 advmss:65483 bytes_received:90000000 rcv_rtt:1.5 rcv_space:131072 rcv_ssthresh:389423 minrtt:0.005
0      0      127.0.0.1:1883 127.0.0.1:41970
\t skmem:(r0,rb131072,t0,tb87040,f0,w0,o0,bl0,d0) cubic wscale:7,7 advmss:65483 bytes_received:2048 rcv_space:14600 rcv_ssthresh:65483 minrtt:0.005
"""


def test_parse_ss_reads_each_connection():
    rows = parse_ss(SS)
    assert [r["peer"] for r in rows] == ["127.0.0.1:41960", "127.0.0.1:41964", "127.0.0.1:41970"]
    assert rows[1]["recv_q"] == 393396 and rows[1]["rb"] == 524288 and rows[1]["rcv_ssthresh"] == 389423
    assert rows[1]["rcv_rtt_s"] == pytest.approx(1.5e-3)
    assert math.isnan(rows[2]["rcv_rtt_s"])  # not printed before a round trip was measured
    assert parse_ss("") == []


def test_fields_are_medians_over_the_publishers_connections_from_the_start():
    """Two publishers' connections (most bytes received) and a subscriber's (few): the
    subscriber's is left out; samples before the run's start do not count."""
    s = SocketSampler(1883)
    assert all(math.isnan(v) for v in s.fields().values()) and list(s.fields()) == list(FIELDS)
    early = parse_ss(SS.replace("rcv_ssthresh:2229554", "rcv_ssthresh:1").replace("393396 0", "9999999 0"))
    s.samples.append((1.0, early))
    s._start = 2.0
    s.samples.append((2.5, parse_ss(SS.replace("rcv_ssthresh:2229554", "rcv_ssthresh:95000"))))
    s.samples.append((3.0, parse_ss(SS)))
    f = s.fields()
    assert f["pub_rcv_window_start_bytes"] == pytest.approx((95000 + 389423) / 2)
    assert f["pub_rcv_window_max_bytes"] == pytest.approx((2229554 + 389423) / 2)
    assert f["pub_recv_queue_max_bytes"] == pytest.approx(393396 / 2)
    assert f["pub_rcv_rtt_s"] == pytest.approx((0.05e-3 + 1.5e-3) / 2)


def test_a_live_connection_is_sampled():
    ok, reason = ss_available()
    if not ok:
        pytest.skip(reason)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        with SocketSampler(server.getsockname()[1], interval_s=0.05) as sampler:
            sampler.enable()
            client.sendall(b"x" * 200_000)
            time.sleep(0.3)
        f = sampler.fields()
        assert f["pub_recv_queue_max_bytes"] > 0  # nobody read: the bytes wait on the listener's side
        assert f["pub_rcv_window_start_bytes"] > 0
    finally:
        for s in (client, accepted, server):
            s.close()
