"""Mosquitto reads one packet per ready connection per pass of its event loop, counted on the real broker."""

from __future__ import annotations

import math

import pytest

from pubsim.calibration.harness.brokers import BrokerSpec, broker
from pubsim.calibration.harness.passes import (
    parse_perf_csv,
    parse_perf_events,
    passes_per_message,
    perf_syscalls_available,
)
from pubsim.calibration.runner import _syscall_fields
from pubsim.sim.errors import ConfigError
from tests.harness.test_harness_brokers import _require

PERF_OUT = """12044,,syscalls:sys_enter_epoll_wait,3001,100.00,,
<not counted>,,syscalls:sys_enter_read,0,0.00,,
36113,,syscalls:sys_enter_write,3001,100.00,,
"""


def test_parse_perf_csv_reads_counts_and_uncounted_events():
    assert parse_perf_csv(PERF_OUT) == {"epoll_wait": 12044.0, "read": None, "write": 36113.0}


def test_parse_perf_events_reads_every_event_it_names():
    """Software and scheduler events too, as this VM's perf prints them (no hardware counters)."""
    text = "# started on Wed Dec  2\n\n436.79,msec,task-clock,436790000,100.00,,\n" + PERF_OUT
    text += "<not supported>,,cycles,0,100.00,,\n9615,,sched:sched_waking,3001,100.00,,\n"
    assert parse_perf_events(text) == {
        "task-clock": 436.79,
        "syscalls:sys_enter_epoll_wait": 12044.0,
        "syscalls:sys_enter_read": None,
        "syscalls:sys_enter_write": 36113.0,
        "cycles": None,
        "sched:sched_waking": 9615.0,
    }


def test_syscall_fields_group_calls_per_message_and_are_nan_when_not_counted():
    counts = {"epoll_wait": 100.0, "epoll_pwait": 20.0, "read": 300.0, "recvfrom": None, "write": 90.0, "writev": 10.0}
    row = _syscall_fields(counts, 100)
    assert row == {"broker_passes_per_ingress": 1.2, "broker_reads_per_ingress": 3.0, "broker_writes_per_ingress": 1.0}
    assert all(math.isnan(v) for v in _syscall_fields({}, 100).values())


def test_bad_connection_count_is_a_one_line_error():
    with pytest.raises(ConfigError, match="connections"):
        passes_per_message(1, 1, connections=0)


@pytest.mark.parametrize("connections", [1, 2, 8])
def test_one_packet_per_ready_connection_per_pass(tmp_path, connections):
    """``connections`` sockets holding 200 PUBLISHes each when the stopped broker resumes:
    about 200 passes in all (measured 2026-11-27: 1.00, 0.50, 0.13 per PUBLISH), and 3 reads
    per 64 B PUBLISH whatever the number of connections."""
    _require("mosquitto")
    ok, reason = perf_syscalls_available(("epoll_wait", "read"))
    if not ok:
        pytest.skip(reason)
    with broker(BrokerSpec(kind="mosquitto"), tmp_path) as b:
        row = passes_per_message(b.pub_port, b.pid, connections=connections, n=200)
    assert row["messages"] == 200 * connections
    assert row["epoll_wait_per_message"] == pytest.approx(1 / connections, rel=0.15, abs=0.01)
    assert row["reads_per_message"] == pytest.approx(3.0, abs=0.1)
