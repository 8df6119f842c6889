"""CPU accounting from /proc (procstat) and CPU pinning / caps (cpu) on child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from pubsim.calibration.campaign import parse_campaign
from pubsim.calibration.harness import procfs as procstat
from pubsim.calibration.harness.cpu import CpuCap, cores, detect_cpu_control, parse_cpu_stat, pin, quota_us
from pubsim.calibration.runner import RealHarness, _cap_fields, _core_fields
from pubsim.sim.errors import ConfigError

# A child that runs commands read from stdin and answers "ok" after each:
#   busy S  -- burn S s of CPU (process time)      sleep N -- N sleeps of 10 ms
#   thread S -- a thread burns S s of CPU and exits    spin 0 -- busy loop forever
WORKER = textwrap.dedent("""
    import sys, threading, time
    def burn(s):
        t0 = time.thread_time()
        while time.thread_time() - t0 < s:
            pass
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, arg = line.split()
        if cmd == "busy":
            burn(float(arg))
        elif cmd == "sleep":
            for _ in range(int(arg)):
                time.sleep(0.01)
        elif cmd == "thread":
            t = threading.Thread(target=burn, args=(float(arg),))
            t.start()
            t.join()
        elif cmd == "spin":
            while True:
                pass
        print("ok", flush=True)
""")


class Worker:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def do(self, cmd, wait=True):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        if wait:
            assert self.proc.stdout.readline().strip() == "ok"

    def close(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def worker():
    w = Worker()
    yield w
    w.close()


# -- procstat ------------------------------------------------------------------
def test_busy_child_cpu_time(worker):
    before = procstat.sample(worker.pid)
    worker.do("busy 0.3")
    after = procstat.sample(worker.pid)
    d = procstat.diff(before, after)
    assert 0.27 <= d["cpu_time_s"] <= 0.45, d
    assert 0.29 <= d["run_s"] <= 0.45, d
    assert d["wall_s"] >= 0.29 and d["wait_s"] >= 0
    assert 0.5 <= d["utilization"] <= 1.1, d
    assert before.t_s < after.t_s and after.threads >= 1


def test_sleeping_child_switches_voluntarily(worker):
    before = procstat.sample(worker.pid)
    worker.do("sleep 20")
    d = procstat.diff(before, procstat.sample(worker.pid))
    assert d["voluntary_switches"] >= 20, d
    assert d["cpu_time_s"] < 0.1 and d["involuntary_switches"] >= 0


def test_cpu_time_of_exited_thread_still_counts(worker):
    before = procstat.sample(worker.pid)
    worker.do("thread 0.2")
    deadline = time.monotonic() + 2
    while (after := procstat.sample(worker.pid)).threads > before.threads:  # joined, not yet gone
        assert time.monotonic() < deadline, "the burning thread did not exit"
        time.sleep(0.01)
    d = procstat.diff(before, after)
    assert d["cpu_time_s"] >= 0.18, d  # process-level counters keep exited threads' time
    assert d["run_s"] < 0.1, d  # schedstat covers live threads only


def test_vanished_and_zombie_pids_raise(worker):
    worker.proc.kill()
    deadline = time.monotonic() + 5
    while open(f"/proc/{worker.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(procstat.ProcessGone, match=str(worker.pid)):
        procstat.sample(worker.pid)  # zombie
    worker.proc.wait()
    with pytest.raises(ProcessLookupError, match="does not exist"):
        procstat.sample(worker.pid)


def test_diff_refuses_different_processes(worker):
    a = procstat.sample(worker.pid)
    b = procstat.sample(os.getpid())
    with pytest.raises(ValueError, match="different processes"):
        procstat.diff(a, b)
    with pytest.raises(ValueError, match="out of order"):
        procstat.diff(procstat.sample(worker.pid), a)


# -- cpu -----------------------------------------------------------------------
def test_detect_cpu_control_gives_a_reason():
    control, reason = detect_cpu_control()
    assert control in ("cgroup-v1", "cgroup-v2", None)
    assert isinstance(reason, str) and reason


def test_quota_respects_kernel_minimum():
    assert quota_us(0.2) == (2000, 10000)
    assert quota_us(1.5) == (15000, 10000)
    quota, period = quota_us(0.05)
    assert quota >= 1000 and quota / period == pytest.approx(0.05)


@pytest.mark.parametrize("fraction", [0, -1, len(cores()) + 1, "half"])
def test_cap_rejects_bad_fraction(fraction):
    with pytest.raises(ConfigError):
        CpuCap("bad", fraction)


def test_pin_sets_affinity_of_all_threads(worker):
    pin(worker.pid, [cores()[0]])
    for tid in os.listdir(f"/proc/{worker.pid}/task"):
        assert os.sched_getaffinity(int(tid)) == {cores()[0]}
    with pytest.raises(ConfigError):
        pin(worker.pid, [99999])


def test_cap_limits_busy_child_and_group_is_removed(worker):
    control, reason = detect_cpu_control()
    if control is None:
        pytest.skip(f"no CPU cap available: {reason}")
    with CpuCap(f"test-{os.getpid()}", 0.2) as cap:
        assert cap.path.is_dir()
        cap.add(worker.pid)
        assert cap.pids() == [worker.pid]
        worker.do("spin 0", wait=False)
        time.sleep(0.2)
        before, stat0 = procstat.sample(worker.pid), cap.stat()
        time.sleep(1.5)
        d, stat1 = procstat.diff(before, procstat.sample(worker.pid)), cap.stat()
    assert 0.1 <= d["utilization"] <= 0.3, d
    # a spinning task under a 0.2-core quota runs out of it in (nearly) every period
    fields = _cap_fields(stat0, stat1, d["wall_s"])
    assert fields["cap_throttled_period_fraction"] > 0.9, fields
    assert 0.5 < fields["cap_throttled_s_per_s"] <= 1.0, fields
    assert not cap.path.exists()
    assert worker.proc.poll() is None  # moved back to the parent group, still running
    cap.remove()  # idempotent


def test_cpu_stat_parsed_for_both_cgroup_versions():
    v1 = "nr_periods 503\nnr_throttled 502\nthrottled_time 3996910522\nnr_bursts 0\nburst_time 0\n"
    v2 = "usage_usec 10\nnr_periods 10\nnr_throttled 4\nthrottled_usec 2500\n"
    assert parse_cpu_stat(v1) == {"periods": 503, "throttled_periods": 502, "throttled_s": pytest.approx(3.996910522)}
    assert parse_cpu_stat(v2) == {"periods": 10, "throttled_periods": 4, "throttled_s": pytest.approx(0.0025)}
    assert parse_cpu_stat("") == {}


def test_cap_fields_by_hand_and_without_a_quota():
    before = {"periods": 100, "throttled_periods": 10, "throttled_s": 0.5}
    after = {"periods": 300, "throttled_periods": 160, "throttled_s": 1.7}
    f = _cap_fields(before, after, 2.0)
    assert f == {"cap_throttled_period_fraction": pytest.approx(0.75), "cap_throttled_s_per_s": pytest.approx(0.6)}
    assert all(v != v for v in _cap_fields({}, {}, 2.0).values())  # NaN: no quota


def test_top_weight_group_without_quota_holds_this_process_and_lets_go():
    control, reason = detect_cpu_control()
    if control is None:
        pytest.skip(f"no cgroup CPU control: {reason}")
    knob = "cpu.shares" if control == "cgroup-v1" else "cpu.weight"
    with CpuCap(f"test-weight-{os.getpid()}", None, top_weight=True) as group:
        assert int((group.path / knob).read_text()) in (262_144, 10_000)
        quota = "cpu.cfs_quota_us" if control == "cgroup-v1" else "cpu.max"
        assert (group.path / quota).read_text().split()[0] in ("-1", "max")  # no quota
        group.add(os.getpid())
        assert os.getpid() in group.pids()
    assert not group.path.exists()  # this process went back to the parent group


def test_the_harness_runs_its_clients_in_a_top_weight_group_and_leaves_it():
    control, reason = detect_cpu_control()
    if control is None:
        pytest.skip(f"no cgroup CPU control: {reason}")
    campaign = parse_campaign(
        {"name": "t", "brokers": ["mosquitto"], "configurations": [{"name": "c", "payload_bytes": 64}]}
    )
    with RealHarness(campaign) as harness:
        group = harness._clients
        assert group is not None and os.getpid() in group.pids()
        assert "largest CPU weight" in harness.metadata()["cpu_weight"]
    assert harness._clients is None and not group.path.exists()


_PROC_STAT = """cpu  4618641 555 742983 8509012 11161 0 148756 4216 0 0
cpu0 1831097 260 308602 4790771 1904 3 45100 2083 0 0
cpu1 2787544 295 434381 3718240 9257 7 103655 2133 0 0
intr 1 2 3
ctxt 99
"""


def test_core_times_parse_irq_softirq_and_steal_per_core():
    t = procstat.parse_core_times(_PROC_STAT)
    assert t == {0: {"irq": 3, "softirq": 45100, "steal": 2083}, 1: {"irq": 7, "softirq": 103655, "steal": 2133}}
    assert procstat.parse_core_times("cpu0 1 2 3 4\n") == {0: {"irq": 0, "softirq": 0, "steal": 0}}  # old kernels
    live = procstat.core_times()
    assert live and all(set(v) == set(procstat.CORE_COLUMNS) for v in live.values())


def test_core_fields_by_hand():
    before = {0: {"irq": 0, "softirq": 100, "steal": 5}, 1: {"irq": 10, "softirq": 200, "steal": 0}}
    after = {0: {"irq": 0, "softirq": 900, "steal": 5}, 1: {"irq": 10, "softirq": 250, "steal": 20}}
    tck = procstat.CLK_TCK
    f = _core_fields(before, after, [1], 2.0)  # the broker on core 1 for 2 s
    assert f["broker_core_softirq_s_per_s"] == pytest.approx(50 / tck / 2.0)
    assert f["broker_core_steal_s_per_s"] == pytest.approx(20 / tck / 2.0)
    assert f["broker_core_irq_s_per_s"] == 0.0
    assert _core_fields(before, after, [], 2.0)["broker_core_softirq_s_per_s"] == pytest.approx(850 / tck / 2.0)
    assert all(v != v for v in _core_fields(before, after, [7], 2.0).values())  # a core /proc/stat lacks: NaN
