"""The harness's one reader of Linux ``/proc``: CPU accounting, process trees, listening sockets.

Every ``/proc`` parse of the harness is here; the text parsers
(:func:`parse_stat`, :func:`parse_schedstat`, :func:`parse_switches`,
:func:`parse_listeners`) take the file's text so they can be tested on
fixtures, the readers take a pid (or a port). cgroups stay in :mod:`.cpu`.

CPU accounting: :func:`sample` reads, for process ``pid``:

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
exist (or is a zombie) raises :class:`ProcessGone`. :func:`thread_schedstat`
is the calling thread's own run / wait time (the load generator's clients
measure themselves with it).

System calls: :func:`io_counters` reads ``/proc/PID/io`` (read and write
system calls of the whole process, ``syscr`` / ``syscw``; :func:`parse_io`).

Process trees (broker start / stop): :func:`proc_state`, :func:`is_dead`,
:func:`descendants`, :func:`comm`, :func:`thread_ids`. Sockets:
:func:`listen_inodes` and :func:`owns_listener` (``/proc/net/tcp{,6}`` and
``/proc/PID/fd``).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLK_TCK",
    "ProcSample",
    "ProcessGone",
    "comm",
    "descendants",
    "diff",
    "io_counters",
    "is_dead",
    "listen_inodes",
    "owns_listener",
    "parse_io",
    "parse_listeners",
    "parse_schedstat",
    "parse_stat",
    "parse_switches",
    "proc_state",
    "sample",
    "thread_ids",
    "thread_schedstat",
    "thread_switches",
]

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
    minor_faults : int
        Minor page faults of the process (``minflt``: pages it touched that the
        kernel had to map in, without reading a disk).
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
    minor_faults: int = 0


def _read(path):
    with open(path) as f:
        return f.read()


def _stat_fields(text):
    """Fields of a ``stat`` line after the ``(comm)`` field (index 0 = state)."""
    return text[text.rindex(")") + 2 :].split()


def parse_stat(text: str) -> dict:
    """The fields the harness uses of a ``/proc/PID/stat`` line.

    The command name may hold spaces and parentheses; fields are counted
    after its last ``)``.

    Parameters
    ----------
    text : str

    Returns
    -------
    dict
        ``state`` (str, e.g. ``"R"``, ``"Z"``), ``ppid`` (int), ``minflt``
        (minor page faults, int), ``utime`` and ``stime`` (clock ticks,
        :data:`CLK_TCK` per second), ``start_ticks`` (start time after boot,
        clock ticks).
    """
    fields = _stat_fields(text)
    return {
        "state": fields[0],
        "ppid": int(fields[1]),
        "minflt": int(fields[7]),
        "utime": int(fields[11]),
        "stime": int(fields[12]),
        "start_ticks": int(fields[19]),
    }


#: The ``/proc/stat`` per-core columns kept by :func:`parse_core_times` (man 5 proc: user nice system
#: idle iowait irq softirq steal ...).
CORE_COLUMNS = ("irq", "softirq", "steal")


def parse_core_times(text: str) -> dict:
    """Per core, the clock ticks spent in hard interrupts, softirqs and stolen by the hypervisor.

    Parameters
    ----------
    text : str
        ``/proc/stat``'s text.

    Returns
    -------
    dict
        Core id -> ``{"irq": ticks, "softirq": ticks, "steal": ticks}``
        (:data:`CLK_TCK` per second; a missing column reads 0).
    """
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        vals = [int(x) for x in rest.split()]
        out[int(name[3:])] = {c: (vals[i] if i < len(vals) else 0) for c, i in zip(CORE_COLUMNS, (5, 6, 7))}
    return out


def core_times() -> dict:
    """:func:`parse_core_times` of this machine's ``/proc/stat`` now."""
    return parse_core_times(_read("/proc/stat"))


def parse_schedstat(text: str) -> tuple[int, int]:
    """``(ns on a CPU, ns runnable waiting for one)`` from a ``schedstat`` file's text."""
    run_ns, wait_ns = (int(x) for x in text.split()[:2])
    return run_ns, wait_ns


def parse_switches(text: str) -> tuple[int, int]:
    """``(voluntary, involuntary)`` context switches from a ``/proc/.../status`` text (0 when absent)."""
    vol = invol = 0
    for line in text.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            vol = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches:"):
            invol = int(line.split()[1])
    return vol, invol


def parse_io(text: str) -> dict:
    """The counters of a ``/proc/PID/io`` text (``rchar``, ``wchar``, ``syscr``, ``syscw``, ...), as ints."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = int(value)
    return out


def io_counters(pid: int) -> dict:
    """:func:`parse_io` of ``/proc/PID/io``: ``syscr`` / ``syscw`` count the process's read and write
    system calls (``read``, ``recv``..., all threads). Raises :class:`ProcessGone` when it does not exist."""
    try:
        return parse_io(_read(f"/proc/{pid}/io"))
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessGone(f"process {pid} does not exist (exited?)") from None


def parse_listeners(text: str, port: int) -> set[str]:
    """Socket inodes in state LISTEN on local TCP ``port`` in a ``/proc/net/tcp`` or ``tcp6`` table."""
    inodes = set()
    for row in text.splitlines()[1:]:
        cols = row.split()
        if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(cols[9])
    return inodes


def _process_stat(pid):
    try:
        st = parse_stat(_read(f"/proc/{pid}/stat"))
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessGone(f"process {pid} does not exist (exited?)") from None
    if st["state"] in "ZX":
        raise ProcessGone(f"process {pid} has exited (zombie)")
    return (st["utime"] + st["stime"]) / CLK_TCK, st["start_ticks"], st["minflt"]


def _thread_counters(pid, tid):
    """``(run_ns, wait_ns, voluntary, involuntary)`` of one thread, None if it exited."""
    base = f"/proc/{pid}/task/{tid}"
    try:
        run_ns, wait_ns = parse_schedstat(_read(f"{base}/schedstat"))
        status = _read(f"{base}/status")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (run_ns, wait_ns, *parse_switches(status))


def sample(pid: int) -> ProcSample:
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
    cpu_time_s, start, faults = _process_stat(pid)
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
    return ProcSample(
        pid=pid,
        start_ticks=start,
        t_s=t_s,
        cpu_time_s=cpu_time_s,
        cpu_run_s=totals[0] / 1e9,
        cpu_wait_s=totals[1] / 1e9,
        voluntary_switches=totals[2],
        involuntary_switches=totals[3],
        threads=threads,
        minor_faults=faults,
    )


def diff(before: ProcSample, after: ProcSample) -> dict:
    """What process ``pid`` did between two samples.

    Parameters
    ----------
    before, after : ProcSample
        Samples of the same process, ``before`` taken first.

    Returns
    -------
    dict
        ``cpu_time_s``, ``run_s``, ``wait_s`` (s), ``voluntary_switches``,
        ``involuntary_switches``, ``minor_faults``, ``wall_s`` (s) and
        ``utilization`` (``cpu_time_s / wall_s``, in cores; NaN when ``wall_s`` is 0).

    Raises
    ------
    ValueError
        The samples are of different processes (or a reused pid) or out of order.
    """
    if (before.pid, before.start_ticks) != (after.pid, after.start_ticks):
        raise ValueError(
            f"samples of different processes: pid {before.pid} (start {before.start_ticks}) "
            f"vs pid {after.pid} (start {after.start_ticks})"
        )
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
        "minor_faults": after.minor_faults - before.minor_faults,
        "wall_s": wall_s,
        "utilization": cpu_time_s / wall_s if wall_s > 0 else float("nan"),
    }


def thread_schedstat() -> tuple[float, float]:
    """``(ns on a CPU, ns waiting for a CPU)`` of the calling thread, or ``(nan, nan)`` without schedstat."""
    try:
        return parse_schedstat(_read("/proc/thread-self/schedstat"))
    except (OSError, ValueError):
        return math.nan, math.nan


def thread_switches() -> tuple[float, float]:
    """``(voluntary, involuntary)`` context switches of the calling thread, or ``(nan, nan)`` without them.

    A voluntary switch is a sleep (a blocking read, a timeout): each one ends in a wake-up.
    """
    try:
        return tuple(map(float, parse_switches(_read("/proc/thread-self/status"))))  # type: ignore[return-value]
    except (OSError, ValueError):
        return math.nan, math.nan


# -- process trees -------------------------------------------------------------------------------
def proc_state(pid: int) -> tuple[str, int] | None:
    """``(state, ppid)`` of process ``pid``, or None when it does not exist."""
    try:
        st = parse_stat(_read(f"/proc/{pid}/stat"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    return st["state"], st["ppid"]


def is_dead(pid: int) -> bool:
    """True when ``pid`` does not exist or is a zombie."""
    st = proc_state(pid)
    return st is None or st[0] in "ZX"


def descendants(pid: int) -> list[int]:
    """Pids of all live descendants of ``pid`` (from ``/proc``)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_state(int(entry))
            if st is not None:
                children.setdefault(st[1], []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def comm(pid: int) -> str:
    """Command name of ``pid`` (``/proc/PID/comm``), ``""`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def thread_ids(pid: int) -> list[int]:
    """Thread ids of process ``pid``; raises ProcessLookupError when it does not exist."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        raise ProcessLookupError(f"no such process: {pid}") from None


# -- sockets -----------------------------------------------------------------------------------
def listen_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP ``port`` (IPv4 and IPv6), from ``/proc/net``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            text = Path(table).read_text()
        except OSError:
            continue
        inodes |= parse_listeners(text, port)
    return inodes


def owns_listener(pid: int, port: int) -> bool:
    """True when ``pid`` or one of its descendants holds the listening socket of TCP ``port``."""
    links = {f"socket:[{inode}]" for inode in listen_inodes(port)}
    for p in [pid, *descendants(pid)]:
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{p}/fd/{fd}") in links:
                    return True
    return False
