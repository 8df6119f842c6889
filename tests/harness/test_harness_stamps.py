"""Kernel stamps of the load generator: transmit stamps per batch, which receive stamps are a message's own."""

import socket
import time

import numpy as np
import pytest

from pubsim.calibration.harness.loadgen.result import _batch_times, _exact_stamps, _known_or
from pubsim.calibration.harness.txstamp import TxStamps
from tests.harness.test_harness_loadgen import _tcp_pair


def test_only_the_last_record_of_a_shared_stamp_is_exact():
    # reads: [10], [20, 20, 20] (three messages read together), [0] (no stamp), [30, 30], [40]
    tk = np.array([10, 20, 20, 20, 0, 30, 30, 40])
    assert _exact_stamps(tk).tolist() == [True, False, False, True, False, False, True, True]
    assert _exact_stamps(np.zeros(0, np.int64)).tolist() == []
    assert _exact_stamps(np.array([5])).tolist() == [True]


def test_each_message_gets_its_batch_time():
    # publisher 0 sends batches of 2 (batch n: messages 2n, 2n+1), publisher 3 batches of 1; publisher 1 no times
    times = {0: (2, np.array([100, 0, 300])), 3: (1, np.array([7, 8]))}
    pub = np.array([0, 0, 0, 0, 0, 3, 3, 1, 0, 3])
    seq = np.array([0, 1, 2, 3, 4, 0, 1, 0, 9, 5])
    # message 9 of publisher 0 and 5 of publisher 3 are past their publishers' batches: unknown (0)
    assert _batch_times(pub, seq, times).tolist() == [100, 100, 0, 0, 300, 7, 8, 0, 0, 0]


def test_unknown_times_fall_back():
    assert _known_or(np.array([12, 0, 33]), np.array([10, 20, 30])).tolist() == [12, 20, 33]


@pytest.fixture
def loopback_pair():
    c, s = _tcp_pair()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    yield c, s
    for x in (c, s):
        x.close()


def test_transmit_stamps_name_their_batches_on_loopback(loopback_pair):
    c, s = loopback_pair
    c.sendall(b"connect and probe bytes before the stamps start")  # not counted: OPT_ID_TCP counts from start()
    tx = TxStamps(c)
    if not tx.start():
        pytest.skip("this kernel refuses SO_TIMESTAMPING with OPT_ID_TCP")
    before = time.time_ns()
    sizes = [100, 2000, 30, 70000]
    for k, n in enumerate(sizes):
        c.sendall(b"x" * n)
        tx.batch(n)
        if k == 1:
            c.sendall(b"ping")  # bytes outside any batch
            tx.other(4)
    got = 0
    while got < sum(sizes) + 4:
        got += len(s.recv(1 << 20))
    tx.finish(0, timeout_s=1.0)  # offset 0: stamps stay CLOCK_REALTIME
    stamps = np.array(tx.batch_ns())
    assert tx.started and not tx.enabled
    assert (stamps > 0).all(), stamps
    assert (stamps >= before).all() and (stamps <= time.time_ns()).all()
    assert (np.diff(stamps) >= 0).all()  # batches leave in order
    assert len(tx.stamps) >= len(sizes) + 1  # one per send call (a partial send gets its own): batches and ping
