"""The harness's one /proc reader (procfs): its text parsers on fixtures, its readers on this process."""

from __future__ import annotations

import math
import os
import socket
import threading

import pytest

from pubsim.calibration import runner
from pubsim.calibration.harness import cpu, procfs

# a command name with a space and a ')' inside, as the kernel writes it
STAT = (
    "4242 (my (odd) proc) S 17 4242 4242 0 -1 4194560 1052 0 0 0 "
    "731 215 0 0 20 0 3 0 98765 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 2 0 0 0 0 0"
)
SCHEDSTAT = "1234567890 98765 4321\n"
STATUS = (
    "Name:\tbroker\nState:\tS (sleeping)\nThreads:\t3\n"
    "voluntary_ctxt_switches:\t1500\nnonvoluntary_ctxt_switches:\t27\n"
)
NET_TCP = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0100007F:075B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 11111 1 0\n"
    "   1: 0100007F:075B 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 22222 1 0\n"
    "   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 33333 1 0\n"
)


def test_parse_stat_counts_fields_after_the_last_paren():
    want = {"state": "S", "ppid": 17, "minflt": 1052, "utime": 731, "stime": 215, "start_ticks": 98765}
    assert procfs.parse_stat(STAT) == want


def test_samples_count_the_pages_a_process_faults_in():
    import mmap

    pages = 64
    before = procfs.sample(os.getpid())
    m = mmap.mmap(-1, pages * 4096)
    for i in range(0, pages * 4096, 4096):
        m[i] = 1  # the first touch of each anonymous page is a minor fault
    m.close()
    faults = procfs.diff(before, procfs.sample(os.getpid()))["minor_faults"]
    assert pages <= faults < pages + 200  # the interpreter's own allocations fault a few more


def test_parse_schedstat_and_switches():
    assert procfs.parse_schedstat(SCHEDSTAT) == (1234567890, 98765)
    assert procfs.parse_switches(STATUS) == (1500, 27)
    assert procfs.parse_switches("Name:\tx\n") == (0, 0)


def test_parse_listeners_only_listen_rows_of_the_port():
    assert procfs.parse_listeners(NET_TCP, 1883) == {"11111"}  # 0x075B; row 1 is ESTABLISHED
    assert procfs.parse_listeners(NET_TCP, 8080) == {"33333"}
    assert procfs.parse_listeners(NET_TCP, 4222) == set()


def test_readers_on_this_process():
    me = os.getpid()
    assert procfs.proc_state(me)[1] == os.getppid() and not procfs.is_dead(me)
    assert procfs.comm(me) and procfs.comm(2**22 + 12345) == ""
    assert procfs.proc_state(2**22 + 12345) is None and procfs.is_dead(2**22 + 12345)
    assert threading.get_native_id() in procfs.thread_ids(me)
    with pytest.raises(ProcessLookupError):
        procfs.thread_ids(2**22 + 12345)
    run, _wait = procfs.thread_schedstat()
    assert math.isnan(run) or run > 0
    s = procfs.sample(me)
    assert s.threads >= 1 and s.cpu_time_s > 0 and s.voluntary_switches >= 0


def test_listener_owned_by_this_process():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert procfs.listen_inodes(port)
        assert procfs.owns_listener(os.getpid(), port)
    assert not procfs.owns_listener(os.getpid(), port)


def test_one_reader_behind_every_harness_user():
    assert runner.procfs is procfs
    assert cpu.procfs is procfs
