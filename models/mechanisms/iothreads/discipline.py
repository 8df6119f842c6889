"""Discipline of a broker served in I/O cycles (:mod:`.kernel`)."""

from __future__ import annotations

import math

import numpy as np

from ....sim import kernels as K
from ....sim.disciplines import Served
from ....sim.packets import Packets
from .kernel import CYC_COUNT, CYC_LEN, CYC_MAX, CYC_PER_KEY, CYC_START, cycle_run

__all__ = ["CycleDiscipline"]

_NO_VISITS = np.empty(0, dtype=np.int64)
_NO_KEYS = np.empty(0, dtype=np.int64)  # connections, when a cycle reads any number per connection


class CycleDiscipline:
    """One server working in I/O cycles, FIFO by arithmetic, no buffer limit.

    Parameters
    ----------
    idle_extra_s : float
        Extra time of a message that finds the server idle, s.
    max_members : float
        Most messages per cycle (inf: no limit).
    max_per_connection : float
        Most messages per cycle from one connection (inf: no limit; then the
        connections of the messages are not needed).
    cpu_quota_s, cpu_period_s : float
        CPU quota per period, s (inf: none), as :class:`pubsim.sim.disciplines.FifoDiscipline`.
    idle_exit : tuple of (idle times, exit latencies) or None
        Exit latency of the idle server, as :class:`pubsim.sim.disciplines.FifoDiscipline`.

    The station sets the cycle cost of each message (:meth:`set_cycle_cost`)
    before each :meth:`run`, and, with a per-connection limit, its
    connection (:meth:`set_connections`).
    """

    event_driven = False
    uses_priority = False
    uses_key = False

    def __init__(
        self,
        *,
        idle_extra_s: float = 0.0,
        max_members: float = math.inf,
        max_per_connection: float = math.inf,
        cpu_quota_s: float = math.inf,
        cpu_period_s: float = 0.1,
        idle_exit: tuple | None = None,
    ):
        self.fs = np.zeros(K.FS_LEN)
        self.fs[[K.CAP_BYTES, K.IDLE_EXTRA, K.QUOTA, K.PERIOD]] = (
            math.inf,
            float(idle_extra_s),
            float(cpu_quota_s),
            float(cpu_period_s),
        )
        if idle_exit is not None:
            K.set_idle_exit(self.fs, *idle_exit)
        self.cyc = np.zeros(CYC_LEN)
        self.cyc[CYC_START] = -math.inf
        self.cyc[CYC_MAX] = float(max_members)
        self.cyc[CYC_PER_KEY] = float(max_per_connection)
        self.free = np.zeros(1)
        self._cycle_cost = np.empty(0)
        self._keys = np.empty(0, dtype=np.int64)
        self.kcycle = np.full(1, -1, dtype=np.int64)  # last cycle that read each connection
        self.kcount = np.zeros(1, dtype=np.int64)  # messages of each connection it read
        self.opened = np.empty(0, dtype=np.bool_)  # which messages of the last run opened a cycle

    def set_cycle_cost(self, cycle_cost_s: np.ndarray) -> None:
        """Cost each message of the next :meth:`run` adds if it opens a cycle, s."""
        self._cycle_cost = np.asarray(cycle_cost_s, dtype=np.float64)

    @property
    def per_connection(self) -> bool:
        """Does a cycle read a limited number of messages per connection?"""
        return bool(self.cyc[CYC_PER_KEY] < math.inf)

    def set_connections(self, connection: np.ndarray) -> None:
        """Connection of each message of the next :meth:`run` (integers >= 0)."""
        keys = np.asarray(connection, dtype=np.int64)
        top = int(keys.max()) + 1 if keys.size else 0
        if top > self.kcycle.shape[0]:
            grow = top - self.kcycle.shape[0]
            self.kcycle = np.concatenate([self.kcycle, np.full(grow, -1, dtype=np.int64)])
            self.kcount = np.concatenate([self.kcount, np.zeros(grow, dtype=np.int64)])
        self._keys = keys

    def run(self, packets: Packets, service_s, size_bytes, horizon_s, priority=None, key=None) -> Served:
        """Serve a batch (every message is settled); only arrival times and service matter."""
        n = len(packets)
        if self._cycle_cost.shape[0] != n:
            raise ValueError(f"cycle costs for {self._cycle_cost.shape[0]} messages, {n} offered")
        if self.per_connection and self._keys.shape[0] != n:
            raise ValueError(f"connections for {self._keys.shape[0]} messages, {n} offered")
        keys = self._keys if self.per_connection else _NO_KEYS
        start, dep, end = np.empty(n), np.empty(n), np.empty(n)
        self.opened = np.empty(n, dtype=np.bool_)
        cycle_run(
            self.fs,
            self.cyc,
            self.free,
            np.asarray(packets.t, dtype=np.float64),
            np.asarray(service_s, dtype=np.float64),
            self._cycle_cost,
            keys,
            self.kcycle,
            self.kcount,
            start,
            dep,
            end,
            self.opened,
        )
        self._cycle_cost = np.empty(0)
        self._keys = np.empty(0, dtype=np.int64)
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
    def work_s(self) -> float:
        """CPU given so far (cycle costs and wake-ups included), whole run, s."""
        return float(self.fs[K.WORK])

    @property
    def served_total(self) -> int:
        """Messages served so far, whole run."""
        return int(self.fs[K.SERVED])

    @property
    def cycles_total(self) -> int:
        """Cycles opened so far, whole run."""
        return int(self.cyc[CYC_COUNT])
