"""CPU control for measured brokers: core pinning and CPU-bandwidth caps.

:func:`detect_cpu_control` tells which cgroup interface can cap a process's
CPU time on this host; :class:`CpuCap` creates one cgroup with a CFS
bandwidth quota (``fraction`` cores) and moves processes into it;
:func:`pin` sets the core affinity of every thread of a process.

cgroup v1 (``/sys/fs/cgroup/cpu``): the group ``pubsim-<name>`` gets
``cpu.cfs_period_us = 10000`` and ``cpu.cfs_quota_us = fraction x 10000``
(the period is lengthened when the quota would fall below the kernel's
1 ms minimum). cgroup v2 (unified hierarchy with the ``cpu`` controller at
``/sys/fs/cgroup``): the same numbers go into ``cpu.max``. Both need root. A group can also carry no quota and only the
largest CPU weight (``top_weight``): the harness puts its load generator in
such a group and gives the broker's capped group the same weight, so that
other work on a shared machine does not take their CPU (issue 18).
"""

from __future__ import annotations

import errno
import math
import os
import time
from pathlib import Path

from ...sim.errors import ConfigError
from . import procfs

__all__ = ["CGROUP_ROOT", "PERIOD_US", "CpuCap", "cores", "detect_cpu_control", "pin"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 10_000
_MIN_QUOTA_US = 1_000  # kernel minimum of cfs_quota_us / cpu.max quota
_MAX_PERIOD_US = 1_000_000
# the largest CPU weight a group can have: cgroup v1 cpu.shares, v2 cpu.weight
_TOP_WEIGHT = {"cgroup-v1": ("cpu.shares", 262_144), "cgroup-v2": ("cpu.weight", 10_000)}


def cores():
    """Core ids this process may run on (its affinity mask), sorted.

    Returns
    -------
    tuple of int
    """
    return tuple(sorted(os.sched_getaffinity(0)))


def detect_cpu_control(root=CGROUP_ROOT):
    """Which cgroup interface can cap CPU time here, and why (not).

    Parameters
    ----------
    root : path
        Mount point of the cgroup file systems (``/sys/fs/cgroup``).

    Returns
    -------
    control : {"cgroup-v2", "cgroup-v1"} or None
        None when no writable CPU controller is available.
    reason : str
        One line of explanation, for the campaign's metadata.
    """
    root = Path(root)
    controllers = root / "cgroup.controllers"
    if controllers.is_file():
        names = controllers.read_text().split()
        if "cpu" not in names:
            return None, f"cgroup v2 at {root} has no cpu controller (controllers: {' '.join(names) or 'none'})"
        if not os.access(root, os.W_OK):
            return None, f"cgroup v2 at {root} is not writable (need root)"
        return "cgroup-v2", f"cgroup v2 cpu.max under {root}"
    v1 = root / "cpu"
    if (v1 / "cpu.cfs_quota_us").is_file():
        if not os.access(v1, os.W_OK):
            return None, f"cgroup v1 cpu controller at {v1} is not writable (need root)"
        return "cgroup-v1", f"cgroup v1 cpu.cfs_quota_us under {v1}"
    return None, f"no cgroup cpu controller under {root} (neither v2 cpu.max nor v1 cpu/cpu.cfs_quota_us)"


def quota_us(fraction):
    """CFS ``(quota_us, period_us)`` for ``fraction`` cores.

    The period is :data:`PERIOD_US` unless the quota would fall below the
    kernel's 1 ms minimum, in which case the period grows to keep it there.
    """
    period = PERIOD_US
    if fraction * period < _MIN_QUOTA_US:
        period = min(math.ceil(_MIN_QUOTA_US / fraction), _MAX_PERIOD_US)
    return max(round(fraction * period), _MIN_QUOTA_US), period


def _check_fraction(fraction):
    n = len(cores())
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction <= n:
        raise ConfigError("cpu_cap_fraction", fraction, f"a number of cores in (0, {n}]")
    return float(fraction)


class CpuCap:
    """A cgroup capping its processes to ``fraction`` cores of CPU time.

    Use as a context manager, or call :meth:`create` and :meth:`remove`.

    Parameters
    ----------
    name : str
        The group is ``pubsim-<name>`` at the top of the cpu hierarchy.
    fraction : float or None
        CPU bandwidth in cores, in ``(0, len(cores())]``; None for no quota.
    control : {"cgroup-v1", "cgroup-v2"} or None
        Interface to use; detected when None.
    root : path
        cgroup mount point.
    top_weight : bool
        Give the group the largest CPU weight (v1 ``cpu.shares`` 262144,
        v2 ``cpu.weight`` 10000), so that on a machine shared with other
        work the quota, not the neighbours' CPU use, bounds what the group
        gets (the weight only matters while other groups want the same
        core). Each root-level session has weight 1024 under autogroup.

    Raises
    ------
    sim.errors.ConfigError
        ``fraction`` out of range.
    RuntimeError
        No usable cgroup CPU controller.
    """

    def __init__(self, name, fraction, *, control=None, root=CGROUP_ROOT, top_weight=False):
        self.fraction = None if fraction is None else _check_fraction(fraction)
        self.top_weight = bool(top_weight)
        if control is None:
            control, reason = detect_cpu_control(root)
            if control is None:
                raise RuntimeError(f"cannot cap CPU to {fraction} cores: {reason}")
        self.control = control
        base = Path(root) / "cpu" if control == "cgroup-v1" else Path(root)
        self.parent = base
        self.path = base / f"pubsim-{name}"
        self.quota_us, self.period_us = quota_us(self.fraction) if self.fraction is not None else (None, None)
        self.created = False

    def create(self):
        """Make the group and write its quota; returns ``self``."""
        if self.control == "cgroup-v2":
            _enable_v2_cpu(self.parent)
        self.path.mkdir(exist_ok=True)
        self.created = True
        try:
            if self.quota_us is not None:
                self._write_quota()
            if self.top_weight:
                knob, value = _TOP_WEIGHT[self.control]
                (self.path / knob).write_text(str(value))
        except BaseException:
            self.remove()
            raise
        return self

    def _write_quota(self):
        if self.control == "cgroup-v1":
            (self.path / "cpu.cfs_period_us").write_text(str(self.period_us))
            (self.path / "cpu.cfs_quota_us").write_text(str(self.quota_us))
        else:
            (self.path / "cpu.max").write_text(f"{self.quota_us} {self.period_us}")

    @property
    def procs_file(self):
        """Path of the group's ``cgroup.procs`` (writing a pid moves all its threads)."""
        return self.path / "cgroup.procs"

    def add(self, pid):
        """Move process ``pid`` (all its threads) into the group."""
        self.procs_file.write_text(str(pid))

    def pids(self):
        """Pids currently in the group (empty once removed)."""
        try:
            return [int(x) for x in self.procs_file.read_text().split()]
        except FileNotFoundError:
            return []

    def remove(self, timeout_s=2.0):
        """Move remaining processes back to the parent group and delete the group.

        Idempotent. Raises RuntimeError when the group cannot be removed
        within ``timeout_s``.
        """
        if not self.path.exists():
            self.created = False
            return
        deadline = time.monotonic() + timeout_s
        while True:
            for pid in self.pids():
                _move(pid, self.parent / "cgroup.procs")
            try:
                self.path.rmdir()
                self.created = False
                return
            except FileNotFoundError:
                self.created = False
                return
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise RuntimeError(f"cannot remove cgroup {self.path}: {err}") from err
                time.sleep(0.02)

    def stat(self):
        """The group's CFS bandwidth counters, or an empty dict when it has none.

        Returns
        -------
        dict
            ``periods`` (enforcement periods that had runnable tasks),
            ``throttled_periods`` (periods in which the group ran out of
            quota) and ``throttled_s`` (total time its tasks were held,
            seconds), from ``cpu.stat`` (``nr_periods``, ``nr_throttled``,
            ``throttled_time`` in ns under cgroup v1, ``throttled_usec``
            under v2).
        """
        return parse_cpu_stat(_read_text(self.path / "cpu.stat"))

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.remove()
        return False

    def __repr__(self):
        if self.fraction is None:
            return f"CpuCap({self.path}, no quota, top weight {self.top_weight})"
        return f"CpuCap({self.path}, {self.fraction} cores, quota {self.quota_us}/{self.period_us} us)"


def _read_text(path):
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def parse_cpu_stat(text):
    """Bandwidth counters of a cgroup ``cpu.stat`` text (see :meth:`CpuCap.stat`)."""
    fields = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
    if "nr_periods" not in fields:
        return {}
    if "throttled_usec" in fields:
        throttled_s = int(fields["throttled_usec"]) * 1e-6
    else:
        throttled_s = int(fields.get("throttled_time", 0)) * 1e-9
    return {
        "periods": int(fields["nr_periods"]),
        "throttled_periods": int(fields.get("nr_throttled", 0)),
        "throttled_s": throttled_s,
    }


def _move(pid, procs_file):
    try:
        procs_file.write_text(str(pid))
    except ProcessLookupError:
        pass  # exited meanwhile
    except OSError as err:
        if err.errno != errno.ESRCH:
            raise


def _enable_v2_cpu(parent):
    control = parent / "cgroup.subtree_control"
    if "cpu" not in control.read_text().split():
        control.write_text("+cpu")


def pin(pid, cpus):
    """Restrict every thread of process ``pid`` to cores ``cpus``.

    Parameters
    ----------
    pid : int
    cpus : iterable of int
        Core ids, a subset of :func:`cores`.
    """
    cpus = set(cpus)
    if not cpus or not cpus <= set(cores()):
        raise ConfigError("cpus", tuple(sorted(cpus)), f"a non-empty subset of the usable cores {cores()}")
    try:
        tids = procfs.thread_ids(pid)
    except ProcessLookupError:
        raise ProcessLookupError(f"cannot pin pid {pid}: no such process") from None
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            pass  # thread exited meanwhile
