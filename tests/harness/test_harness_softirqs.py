"""Softirq time traced on the broker's cores (``calibration/harness/softirqs.py``)."""

import math
import os
import subprocess
import sys
import time

import pytest

from pubsim.calibration.harness.softirqs import FIELDS, SoftirqTracer, perf_softirqs_available, softirq_seconds

# ``perf script -F comm,pid,cpu,time,event,trace`` lines as perf 6.1 prints them.
SCRIPT = """\
       mosquitto 30306 [001] 73295.953537:  irq:softirq_entry: vec=3 [action=NET_RX]
       mosquitto 30306 [001] 73295.953540:   irq:softirq_exit: vec=3 [action=NET_RX]
       mosquitto 30307 [001] 73295.953600:  irq:softirq_entry: vec=3 [action=NET_RX]
       mosquitto 30307 [001] 73295.953610:  irq:softirq_entry: vec=8 [action=HRTIMER]
       mosquitto 30307 [001] 73295.953612:   irq:softirq_exit: vec=8 [action=HRTIMER]
       mosquitto 30307 [001] 73295.953620:   irq:softirq_exit: vec=3 [action=NET_RX]
 memfd:sealed-91 29730 [001] 73295.964000:  irq:softirq_entry: vec=1 [action=TIMER]
 memfd:sealed-91 29730 [001] 73295.964005:   irq:softirq_exit: vec=1 [action=TIMER]
          python  4242 [001] 73295.970000:   irq:softirq_exit: vec=9 [action=RCU]
          python  4242 [001] 73295.970010:  irq:softirq_entry: vec=7 [action=SCHED]
"""


def test_softirq_time_is_summed_per_vector_and_context():
    """3 + 20 us of NET_RX and 2 us of HRTIMER nested in it in the broker's two threads; 5 us of
    TIMER elsewhere; an exit without its entry and an entry without its exit count nothing."""
    got = softirq_seconds(SCRIPT.splitlines(), pids={30306, 30307})
    assert set(got) == {("NET_RX", True), ("HRTIMER", True), ("TIMER", False)}
    assert got[("NET_RX", True)] == pytest.approx(23e-6, abs=1e-9)
    assert got[("HRTIMER", True)] == pytest.approx(2e-6, abs=1e-9)
    assert got[("TIMER", False)] == pytest.approx(5e-6, abs=1e-9)
    assert softirq_seconds(SCRIPT.splitlines(), pids={1}) == {
        ("NET_RX", False): pytest.approx(23e-6, abs=1e-9),
        ("HRTIMER", False): pytest.approx(2e-6, abs=1e-9),
        ("TIMER", False): pytest.approx(5e-6, abs=1e-9),
    }


def test_fields_are_per_second_traced_and_nan_before_a_trace():
    t = SoftirqTracer((1,), 30306)
    assert list(t.fields()) == list(FIELDS) and all(math.isnan(v) for v in t.fields().values())
    t.seconds = softirq_seconds(SCRIPT.splitlines(), pids={30306, 30307})
    t.traced_s = 0.5
    f = t.fields()
    assert f["broker_softirq_net_rx_s_per_s"] == pytest.approx(46e-6, abs=1e-9)
    assert f["broker_softirq_timers_s_per_s"] == pytest.approx(4e-6, abs=1e-9)  # HRTIMER; TIMER was not its
    assert f["broker_softirq_other_s_per_s"] == 0.0
    assert f["broker_core_softirq_traced_s_per_s"] == pytest.approx(60e-6, abs=1e-9)


_SENDER = """
import os, socket, time
os.sched_setaffinity(0, {%d})
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); s, _ = l.accept()
end = time.time() + 1.5
while time.time() < end:
    c.sendall(b"x" * 4096); s.recv(65536)
"""


def test_loopback_receive_work_runs_in_the_sending_task():
    """A process pinned to a core that sends to itself over loopback: the receive work
    (NET_RX) is done on that core in its context, and the trace sees it there."""
    ok, reason = perf_softirqs_available()
    if not ok:
        pytest.skip(reason)
    cpu = max(os.sched_getaffinity(0))
    sender = subprocess.Popen([sys.executable, "-c", _SENDER % cpu])
    try:
        time.sleep(0.3)
        with SoftirqTracer((cpu,), sender.pid) as tracer:
            time.sleep(0.5)
    finally:
        sender.wait(timeout=30)
    f = tracer.fields()
    assert 0.4 < tracer.traced_s < 2.0
    assert 0.0 < f["broker_softirq_net_rx_s_per_s"] <= f["broker_core_softirq_traced_s_per_s"] <= 1.0
