"""Discipline of a broker served in I/O cycles (:mod:`.kernel`)."""

from __future__ import annotations

import math

import numpy as np

from ....sim import kernels as K
from ....sim.disciplines import Served, ServerTotals
from ....sim.packets import Packets
from .kernel import CYC_COUNT, CYC_LEN, CYC_MAX, CYC_MAX_BYTES, CYC_START, cycle_run

__all__ = ["CycleDiscipline", "OneServer"]

_NO_VISITS = np.empty(0, dtype=np.int64)


class OneServer(ServerTotals):
    """A one-server discipline on the FIFO kernel's float state ``fs`` (:mod:`pubsim.sim.kernels`):
    its set-up, and its totals (:class:`~pubsim.sim.disciplines.ServerTotals`)."""

    def _init_server(self, idle_extra_s, cpu_quota_s, cpu_period_s, idle_exit, sleep_entry_s=0.0) -> None:
        """``fs`` for a server with that wake-up extra, CPU quota per period, idle-exit curve and
        sleep entry (s: how long after running out of work the loop still reads a message without a
        wake-up, :func:`pubsim.sim.kernels.wakes`)."""
        self.fs = np.zeros(K.FS_LEN)
        self.fs[K.SLEEP_ENTRY] = float(sleep_entry_s)
        self.fs[[K.CAP_BYTES, K.IDLE_EXTRA, K.QUOTA, K.PERIOD]] = (
            math.inf,
            float(idle_extra_s),
            float(cpu_quota_s),
            float(cpu_period_s),
        )
        if idle_exit is not None:
            K.set_idle_exit(self.fs, *idle_exit)


class CycleDiscipline(OneServer):
    """One server working in I/O cycles, FIFO by arithmetic, no buffer limit.

    Parameters
    ----------
    idle_extra_s : float
        Extra time of a message that finds the server idle, s.
    max_members : float
        Most messages per cycle (inf: no limit).
    max_bytes : float
        Most bytes per cycle (inf: no limit), a message counted as its size
        plus ``overhead_bytes``; the first member of a cycle always fits.
    overhead_bytes : float
        Bytes a message takes in a read beyond its size (protocol framing).
    cpu_quota_s, cpu_period_s : float
        CPU quota per period, s (inf: none), as :class:`pubsim.sim.disciplines.FifoDiscipline`.
    idle_exit : tuple of (idle times, exit latencies) or None
        Exit latency of the idle server, as :class:`pubsim.sim.disciplines.FifoDiscipline`.
    sleep_entry_s : float
        A message arriving less than this after the server became free is
        read without a wake-up (no ``idle_extra_s``, no exit latency), s.

    The station sets the cycle cost of each message (:meth:`set_cycle_cost`)
    before each :meth:`run`. A cycle that reads a limited number of messages
    per connection is :class:`~.passes.PassDiscipline`.
    """

    event_driven = False
    uses_priority = False
    uses_key = False
    per_connection = False

    def __init__(
        self,
        *,
        idle_extra_s: float = 0.0,
        max_members: float = math.inf,
        max_bytes: float = math.inf,
        overhead_bytes: float = 0.0,
        cpu_quota_s: float = math.inf,
        cpu_period_s: float = 0.1,
        idle_exit: tuple | None = None,
        sleep_entry_s: float = 0.0,
    ):
        self._init_server(idle_extra_s, cpu_quota_s, cpu_period_s, idle_exit, sleep_entry_s)
        self.cyc = np.zeros(CYC_LEN)
        self.cyc[CYC_START] = -math.inf
        self.cyc[CYC_MAX] = float(max_members)
        self.cyc[CYC_MAX_BYTES] = float(max_bytes)
        self.overhead_bytes = float(overhead_bytes)
        self.free = np.zeros(1)
        self._cycle_cost = np.empty(0)
        self.opened_starts = np.empty(0)  # starts of the cycles the last run opened, s

    def set_cycle_cost(self, cycle_cost_s: np.ndarray) -> None:
        """Cost each message of the next :meth:`run` adds if it opens a cycle, s."""
        self._cycle_cost = np.asarray(cycle_cost_s, dtype=np.float64)

    def run(self, packets: Packets, service_s, size_bytes, horizon_s, priority=None, key=None) -> Served:
        """Serve a batch (every message is settled); only arrival times, service and sizes matter."""
        n = len(packets)
        if self._cycle_cost.shape[0] != n:
            raise ValueError(f"cycle costs for {self._cycle_cost.shape[0]} messages, {n} offered")
        start, dep, end = np.empty(n), np.empty(n), np.empty(n)
        opened = np.empty(n, dtype=np.bool_)
        cycle_run(
            self.fs,
            self.cyc,
            self.free,
            np.asarray(packets.t, dtype=np.float64),
            np.asarray(service_s, dtype=np.float64),
            np.asarray(size_bytes, dtype=np.float64) + self.overhead_bytes,
            self._cycle_cost,
            start,
            dep,
            end,
            opened,
        )
        self._cycle_cost = np.empty(0)
        self.opened_starts = start[opened]
        no = np.empty(0)
        return Served(
            packets, packets.t.copy(), start, dep, Packets.empty(), no, np.empty(0, np.int64), service_end=end
        )

    def next_wake(self) -> float | None:
        """Never: every message is settled by the call that got it."""
        return None

    def held_visits(self) -> np.ndarray:
        """None held."""
        return _NO_VISITS

    @property
    def cycles_total(self) -> int:
        """Cycles opened so far, whole run."""
        return int(self.cyc[CYC_COUNT])
