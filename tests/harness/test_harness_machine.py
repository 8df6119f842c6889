"""The machine reference recorded with every campaign (issue 18)."""

import math
import os

import pytest

from pubsim.calibration.harness.machine import (
    idle_exit_curve,
    idle_wakeup_latency,
    loopback_round_trips_per_s,
    machine_reference,
)
from pubsim.models.params.idle import IdleExitParams


def test_loopback_ping_pong_counts_round_trips():
    rate = loopback_round_trips_per_s(0.05)
    # a round trip is two loopback writes and two wake-ups: between 100 and 10 million per second on any machine
    assert math.isfinite(rate) and 1e2 < rate < 1e7


def test_machine_reference_is_the_median_of_its_samples():
    ref = machine_reference(repeats=3, duration_s=0.03)
    assert len(ref["samples"]) == 3
    assert ref["loopback_round_trips_per_s"] == sorted(ref["samples"])[1]
    assert "ping-pong" in ref["method"]


def _cpus():
    n = len(os.sched_getaffinity(0))
    return (0, 1) if n >= 2 else (None, None)


def test_idle_wakeup_records_one_message_per_pause_and_the_wakeup_after_the_kernel_stamp():
    sender, receiver = _cpus()
    before = os.sched_getaffinity(0)
    recs = idle_wakeup_latency((0.0002, 0.003), messages=8, sender_cpu=sender, receiver_cpu=receiver)
    assert os.sched_getaffinity(0) == before  # the caller is not left pinned to the sender's core
    assert [r["gap_s"] for r in recs] == [0.0002] * 8 + [0.003] * 8
    unstamped = [i for i, r in enumerate(recs) if math.isnan(r["kernel_latency_s"])]
    assert not unstamped, f"messages {unstamped} of 16 carried no kernel receive stamp"
    for r in recs:
        assert r["idle_s"] >= 0.9 * r["gap_s"]  # the sender slept at least the pause
        assert 0 <= r["kernel_latency_s"] <= r["latency_s"] < 0.5
        assert r["wakeup_s"] == pytest.approx(r["latency_s"] - r["kernel_latency_s"])


def test_idle_exit_curve_is_a_valid_broker_curve():
    """The probe's curve builds an IdleExitParams (increasing idle times, exits >= 0, non-decreasing)."""
    sender, receiver = _cpus()
    c = idle_exit_curve(broker_cpu=receiver, client_cpu=sender, gaps_s=(0.0002, 0.001, 0.004), messages=6)
    p = IdleExitParams(idle_s=tuple(c["idle_s"]), exit_s=tuple(c["exit_s"]))
    assert len(p.idle_s) == 3 and all(b >= a for a, b in zip(p.exit_s, p.exit_s[1:]))
    assert len(c["wake_idle_s"]) == len(c["wake_busy_s"]) == 3
    assert all(w > 0 for w in c["wake_idle_s"] + c["wake_busy_s"])


def test_a_pause_without_any_kernel_stamp_is_an_oserror_the_harness_records():
    from pubsim.calibration.harness.machine import _by_gap

    nan = float("nan")
    rows = [{"gap_s": 0.001, "idle_s": 0.001, "wakeup_s": 2e-5}, {"gap_s": 0.002, "idle_s": 0.002, "wakeup_s": nan}]
    with pytest.raises(OSError, match="2 ms"):
        _by_gap(rows)
    assert _by_gap(rows[:1]) == {0.001: {"idle_s": 0.001, "wakeup_s": 2e-5}}


def test_the_sender_probes_until_the_receiver_reads_a_kernel_stamp():
    """Linux turns stamping on through deferred work: the probe handshake waits for it, then the next read is stamped."""
    import socket
    import threading

    from pubsim.calibration.harness.machine import _answer_probes, _until_stamped
    from pubsim.calibration.harness.rxstamp import ANCILLARY_BYTES, enable_kernel_stamps

    got = {}
    with socket.create_server(("127.0.0.1", 0)) as server:
        receiver = socket.create_connection(server.getsockname())
        sender, _ = server.accept()
    with sender, receiver:

        def receive():
            _answer_probes(receiver, stamped=enable_kernel_stamps(receiver))
            _, got["anc"], _, _ = receiver.recvmsg(16, ANCILLARY_BYTES)

        t = threading.Thread(target=receive)
        t.start()
        _until_stamped(sender)
        sender.sendall(b"message")
        t.join(10)
    assert got["anc"], "the first message after the handshake carried no kernel stamp"


def test_the_sender_sends_one_probe_per_unstamped_answer():
    class Peer:
        def __init__(self, answers):
            self.answers, self.sent = list(answers), []

        def sendall(self, b):
            self.sent.append(b)

        def recv(self, n):
            return self.answers.pop(0)

    from pubsim.calibration.harness.machine import _until_stamped

    peer = Peer([b"n", b"n", b"r"])
    _until_stamped(peer)
    assert peer.sent == [b"p"] * 3
