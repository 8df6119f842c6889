"""CPU accounting of one process from ``/proc``: samples and their difference.

:func:`sample` reads, for process ``pid``:

* ``cpu_time_s``: user + system time of the whole process from
  ``/proc/PID/stat`` (clock ticks, ``SC_CLK_TCK``, usually 10 ms
  resolution). The process-level counters include threads that have
  already exited, so a difference of two samples is exact even when the
  process starts and ends threads in between.
* ``cpu_run_s`` / ``cpu_wait_s``: time on a CPU and time runnable but
  waiting for one, in ns resolution, summed over ``/proc/PID/task/*/schedstat``
  (live threads only).
* voluntary / involuntary context switches summed over
  ``/proc/PID/task/*/status`` (live threads only). Voluntary switches are
  the broker's wake-ups: it blocks for input, then runs again.

Threads that exit while being read are skipped. A process that does not
exist (or is a zombie) raises :class:`ProcessGone`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["ProcSample", "ProcessGone", "diff", "sample"]

CLK_TCK = os.sysconf("SC_CLK_TCK")


class ProcessGone(ProcessLookupError):
    """The sampled process does not exist (any more) or is a zombie."""


@dataclass(frozen=True, kw_only=True)
class ProcSample:
    """CPU counters of one process at one instant.

    Attributes
    ----------
    pid : int
    start_ticks : int
        Start time of the process (field 22 of ``stat``), to tell a reused pid.
    t_s : float
        ``time.monotonic()`` when the sample was taken, s.
    cpu_time_s : float
        User + system CPU time of the process, s.
    cpu_run_s, cpu_wait_s : float
        Run time and run-queue wait of its live threads (schedstat), s.
    voluntary_switches, involuntary_switches : int
        Context switches of its live threads.
    threads : int
        Live threads read.
    """

    pid: int
    start_ticks: int
    t_s: float
    cpu_time_s: float
    cpu_run_s: float
    cpu_wait_s: float
    voluntary_switches: int
    involuntary_switches: int
    threads: int


def _read(path):
    with open(path) as f:
        return f.read()


def _stat_fields(text):
    """Fields of a ``stat`` line after the ``(comm)`` field (index 0 = state)."""
    return text[text.rindex(")") + 2:].split()


def _process_stat(pid):
    try:
        fields = _stat_fields(_read(f"/proc/{pid}/stat"))
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessGone(f"process {pid} does not exist (exited?)") from None
    if fields[0] in "ZX":
        raise ProcessGone(f"process {pid} has exited (zombie)")
    utime, stime, start = int(fields[11]), int(fields[12]), int(fields[19])
    return (utime + stime) / CLK_TCK, start


def _thread_counters(pid, tid):
    """``(run_ns, wait_ns, voluntary, involuntary)`` of one thread, None if it exited."""
    base = f"/proc/{pid}/task/{tid}"
    try:
        run_ns, wait_ns = (int(x) for x in _read(f"{base}/schedstat").split()[:2])
        status = _read(f"{base}/status")
    except (FileNotFoundError, ProcessLookupError):
        return None
    vol = invol = 0
    for line in status.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            vol = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches:"):
            invol = int(line.split()[1])
    return run_ns, wait_ns, vol, invol


def sample(pid):
    """Sample the CPU counters of process ``pid``.

    Parameters
    ----------
    pid : int

    Returns
    -------
    ProcSample

    Raises
    ------
    ProcessGone
        ``pid`` does not exist or has exited.
    """
    t_s = time.monotonic()
    cpu_time_s, start = _process_stat(pid)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise ProcessGone(f"process {pid} does not exist (exited?)") from None
    totals = [0, 0, 0, 0]
    threads = 0
    for tid in tids:
        counters = _thread_counters(pid, tid)
        if counters is None:
            continue
        threads += 1
        totals = [a + b for a, b in zip(totals, counters)]
    return ProcSample(pid=pid, start_ticks=start, t_s=t_s, cpu_time_s=cpu_time_s,
                      cpu_run_s=totals[0] / 1e9, cpu_wait_s=totals[1] / 1e9,
                      voluntary_switches=totals[2], involuntary_switches=totals[3], threads=threads)


def diff(before, after):
    """What process ``pid`` did between two samples.

    Parameters
    ----------
    before, after : ProcSample
        Samples of the same process, ``before`` taken first.

    Returns
    -------
    dict
        ``cpu_time_s``, ``run_s``, ``wait_s`` (s), ``voluntary_switches``,
        ``involuntary_switches``, ``wall_s`` (s) and ``utilization``
        (``cpu_time_s / wall_s``, in cores; NaN when ``wall_s`` is 0).

    Raises
    ------
    ValueError
        The samples are of different processes (or a reused pid) or out of order.
    """
    if (before.pid, before.start_ticks) != (after.pid, after.start_ticks):
        raise ValueError(f"samples of different processes: pid {before.pid} (start {before.start_ticks}) "
                         f"vs pid {after.pid} (start {after.start_ticks})")
    wall_s = after.t_s - before.t_s
    if wall_s < 0:
        raise ValueError(f"samples out of order: after is {-wall_s:.6f} s before before")
    cpu_time_s = after.cpu_time_s - before.cpu_time_s
    return {
        "cpu_time_s": cpu_time_s,
        "run_s": after.cpu_run_s - before.cpu_run_s,
        "wait_s": after.cpu_wait_s - before.cpu_wait_s,
        "voluntary_switches": after.voluntary_switches - before.voluntary_switches,
        "involuntary_switches": after.involuntary_switches - before.involuntary_switches,
        "wall_s": wall_s,
        "utilization": cpu_time_s / wall_s if wall_s > 0 else float("nan"),
    }
