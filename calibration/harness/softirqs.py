"""Software-interrupt time on the broker's cores, traced exactly (``perf record``).

Loopback TCP does its receive work in the ``NET_RX`` softirq of the core
that sent the segment, in the context of whatever task runs there. A
broker's writes to its subscribers are therefore received on the broker's
core, in its context and on its CPU quota; when a publisher's sending is
clocked by the broker's window updates (TCP flow control, a full receive
buffer), its segments are sent and received there too
(``calibration/README.md``, "Flow control moves the publishers' sending onto
the broker's core").

``/proc/stat`` charges a whole scheduler tick (4 ms at ``HZ=250``) to
softirq when the tick finds the core in one; on this kernel (no
``IRQ_TIME_ACCOUNTING``) that sampling read 74-101 ms/s where the trace read
47-56 ms/s (Mosquitto, fan-out 4 at 4,400 msg/s, 2026-11-27). This module
times every ``irq:softirq_entry`` / ``irq:softirq_exit`` pair on the traced
cores instead, and tells the broker's context from the rest by the
interrupted task's pid.
"""

from __future__ import annotations

import collections
import math
import os
import re
import shutil
import subprocess
import tempfile
import time

from .perfctl import ControlledPerf

__all__ = ["FIELDS", "SoftirqTracer", "softirq_seconds", "perf_softirqs_available"]

#: Columns of :meth:`SoftirqTracer.fields`, s per s.
FIELDS = (
    "broker_softirq_net_rx_s_per_s",
    "broker_softirq_timers_s_per_s",
    "broker_softirq_other_s_per_s",
    "broker_core_softirq_traced_s_per_s",
)
_FIELD = {
    "NET_RX": "broker_softirq_net_rx_s_per_s",
    "TIMER": "broker_softirq_timers_s_per_s",
    "HRTIMER": "broker_softirq_timers_s_per_s",
}

_LINE = re.compile(r"^\s*\S.*?\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+irq:softirq_(entry|exit):.*action=(\w+)")
_EVENTS = ("-e", "irq:softirq_entry", "-e", "irq:softirq_exit")


def softirq_seconds(lines, pids):
    """Softirq seconds per ``(vector, in_pids)`` from ``perf script`` lines.

    Parameters
    ----------
    lines : iterable of str
        ``perf script -F comm,pid,cpu,time,event,trace`` output of one core
        (or several: an entry is paired with the next exit of its vector).
    pids : collection of int
        Task ids counted as the broker's (its threads).

    Returns
    -------
    dict
        ``{(vector, bool): seconds}``: ``vector`` as perf names it
        (``NET_RX``, ``TIMER``, ``HRTIMER``, ...), True where the softirq ran
        in one of ``pids``' context. Unpaired events are ignored.
    """
    pids = {int(p) for p in pids}
    open_at = {}
    out = collections.defaultdict(float)
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            continue
        pid, t, kind, vector = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        if kind == "entry":
            open_at[vector] = (t, pid)
        elif vector in open_at:
            t0, pid0 = open_at.pop(vector)
            out[(vector, pid0 in pids)] += t - t0
    return dict(out)


def perf_softirqs_available():
    """``(True, "")`` if ``perf record`` can trace softirq tracepoints here, else ``(False, reason)``."""
    if shutil.which("perf") is None:
        return False, "perf not installed (Debian: linux-perf)"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            out = subprocess.run(
                ["perf", "record", "-q", "-a", *_EVENTS, "-o", os.path.join(tmp, "p.data"), "true"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            return False, f"perf record failed: {err}"
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        return False, f"perf cannot trace irq:softirq_* here: {tail[0]}"
    return True, ""


class SoftirqTracer:
    """Trace softirqs on ``cpus`` while the ``with`` block runs, from :meth:`enable` on.

    ``perf record`` starts disabled and is enabled through its control
    descriptor (:class:`~pubsim.calibration.harness.perfctl.ControlledPerf`).

    Parameters
    ----------
    cpus : tuple of int
        Cores to trace (the broker's).
    pid : int
        The broker's process: softirqs that interrupt any of its threads count as its.
    enabled : bool
        Start tracing on entering the block (else at :meth:`enable`).

    Attributes
    ----------
    seconds : dict
        After the block: :func:`softirq_seconds` of the trace.
    traced_s : float
        Seconds from :meth:`enable` to the end of the block.
    """

    def __init__(self, cpus, pid, *, enabled=True):
        self.cpus = tuple(int(c) for c in cpus)
        self.pid = int(pid)
        self.enabled = enabled
        self.seconds = {}
        self.traced_s = 0.0
        self._tmp = self._perf = None
        self._t0 = None

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory()
        cpus = ",".join(map(str, self.cpus))
        self._perf = ControlledPerf(["record", "-q", "-C", cpus, *_EVENTS, "-o", self._path()]).start()
        if self.enabled:
            self.enable()
        return self

    def _path(self):
        return os.path.join(self._tmp.name, "softirq.data")

    def enable(self):
        """Start tracing now (returns once ``perf`` has acknowledged)."""
        self._perf.enable(f"tracing the softirqs of cores {self.cpus}")
        self._t0 = time.monotonic()

    def __exit__(self, *exc):
        if self._t0 is not None:
            self.traced_s = time.monotonic() - self._t0
        self._perf.stop(60)
        try:
            if self._t0 is not None and exc[0] is None:
                self.seconds = softirq_seconds(_script(self._path()), _threads(self.pid))
        finally:
            self._tmp.cleanup()
        return False

    def fields(self):
        """Softirq time per second traced (NaN before a trace): ``broker_softirq_{net_rx,timers,other}_s_per_s``
        in the broker's context (``timers``: ``TIMER`` and ``HRTIMER``), and
        ``broker_core_softirq_traced_s_per_s`` over everything on the traced cores."""
        out = dict.fromkeys(FIELDS, math.nan)
        if self.traced_s <= 0:
            return out
        out.update(dict.fromkeys(FIELDS, 0.0))
        for (vector, mine), s in self.seconds.items():
            if mine:
                out[_FIELD.get(vector, "broker_softirq_other_s_per_s")] += s / self.traced_s
            out["broker_core_softirq_traced_s_per_s"] += s / self.traced_s
        return out


def _threads(pid):
    """Thread ids of ``pid`` (itself if its task list cannot be read)."""
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")} | {pid}
    except OSError:
        return {pid}


def _script(path):
    out = subprocess.run(
        ["perf", "script", "-i", path, "-F", "comm,pid,cpu,time,event,trace"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.stdout.splitlines()
