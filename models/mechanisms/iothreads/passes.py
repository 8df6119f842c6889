"""Discipline of a broker whose event loop reads a few messages per ready connection per pass."""

from __future__ import annotations

import math

import numpy as np

from ....sim import kernels as K
from ....sim.disciplines import Served, grow_slots
from ....sim.packets import Packets
from . import pass_kernel as PK
from .discipline import OneServer

__all__ = ["PassDiscipline"]


class PassDiscipline(OneServer):
    """One server working in event-loop passes over per-connection queues (:mod:`.pass_kernel`).

    Event-driven: a message that waits for a later pass is held until the
    pass that reads it opens. Parameters as
    :class:`~pubsim.models.mechanisms.iothreads.discipline.CycleDiscipline`;
    ``max_per_connection`` is required (finite). The station sets each
    message's pass cost (:meth:`set_cycle_cost`) and connection
    (:meth:`set_connections`) before each :meth:`run`.

    ``capacity_bytes`` (inf: none) bounds the bytes in the station, those
    waiting for a pass included: a message that does not fit waits at its
    sender until departures make room and is admitted then (``Served.admit``),
    one larger than the whole capacity is dropped (the senders' socket
    buffers, ``BrokerParams.overload``; :mod:`.pass_kernel`, Socket buffers).
    """

    event_driven = True
    uses_priority = False
    uses_key = False
    per_connection = True

    def __init__(
        self,
        *,
        max_per_connection: float,
        idle_extra_s: float = 0.0,
        max_members: float = math.inf,
        cpu_quota_s: float = math.inf,
        cpu_period_s: float = 0.1,
        idle_exit: tuple | None = None,
        sleep_entry_s: float = 0.0,
        capacity_bytes: float = math.inf,
    ):
        if not max_per_connection < math.inf:
            raise ValueError("PassDiscipline needs a finite max_per_connection (else CycleDiscipline)")
        self._init_server(idle_extra_s, cpu_quota_s, cpu_period_s, idle_exit, sleep_entry_s)
        self.fs[K.CAP_BYTES] = float(capacity_bytes)
        heap = 64 if capacity_bytes < math.inf else 0
        self.hb = (np.empty(heap), np.empty(heap), np.zeros(1, dtype=np.int64))  # departures, bytes, length
        self.ps = PK.new_state(float(max_members), float(max_per_connection))
        self.kpass = np.full(1, -1, dtype=np.int64)
        self.kcount = np.zeros(1, dtype=np.int64)
        self.kdef = np.zeros(1, dtype=np.int64)
        self.dl = np.array([-1, -1, 0, 0], dtype=np.int64)
        self.sf = np.empty((0, PK.SF_COLUMNS))
        self.si = np.empty((0, 3), dtype=np.int64)
        self.stack = np.empty(0, dtype=np.int64)
        self._grow_slots(64)
        self.held = Packets.empty()  # deferred messages, in list order
        self._cycle_cost = np.empty(0)
        self._keys = np.empty(0, dtype=np.int64)
        self.opened_starts = np.empty(0)  # starts of the passes the last run opened, s

    def _grow_slots(self, n: int) -> None:
        """Room for ``n`` deferred messages (n >= current): new slots go on the free stack."""
        self.sf, self.si, self.stack, nfree = grow_slots(self.sf, self.si, self.stack, int(self.dl[PK.DL_NFREE]), n)
        self.dl[PK.DL_NFREE] = nfree

    def _grow_heap(self) -> None:
        """Twice the room for known departures (a byte-limited station only)."""
        hdep, hsize, hn = self.hb
        n = int(hn[0])
        bigger = (np.empty(2 * hdep.shape[0]), np.empty(2 * hdep.shape[0]), hn)
        bigger[0][:n], bigger[1][:n] = hdep[:n], hsize[:n]
        self.hb = bigger

    def flow_control(self, *, window_bytes: float, fixed_s: float, per_byte_s: float) -> None:
        """Admitted messages cost ``fixed_s + per_byte_s x size`` (s) more while the station holds
        more than ``window_bytes`` (:func:`pubsim.sim.kernels.set_flow_control`; needs a capacity)."""
        K.set_flow_control(self.fs, float(window_bytes), float(fixed_s), float(per_byte_s))

    def set_cycle_cost(self, cycle_cost_s: np.ndarray) -> None:
        """Cost each message of the next :meth:`run` adds if it opens a pass, s."""
        self._cycle_cost = np.asarray(cycle_cost_s, dtype=np.float64)

    def set_connections(self, connection: np.ndarray) -> None:
        """Connection of each message of the next :meth:`run` (integers >= 0)."""
        keys = np.asarray(connection, dtype=np.int64)
        top = int(keys.max()) + 1 if keys.size else 0
        if top > self.kpass.shape[0]:
            grow = top - self.kpass.shape[0]
            self.kpass = np.concatenate([self.kpass, np.full(grow, -1, dtype=np.int64)])
            self.kcount = np.concatenate([self.kcount, np.zeros(grow, dtype=np.int64)])
            self.kdef = np.concatenate([self.kdef, np.zeros(grow, dtype=np.int64)])
        self._keys = keys

    def run(self, packets: Packets, service_s, size_bytes, horizon_s, priority=None, key=None) -> Served:
        """Offer a batch and advance to ``horizon_s``; held messages leave when their pass opens."""
        n = len(packets)
        if self._cycle_cost.shape[0] != n:
            raise ValueError(f"cycle costs for {self._cycle_cost.shape[0]} messages, {n} offered")
        if self._keys.shape[0] != n:
            raise ValueError(f"connections for {self._keys.shape[0]} messages, {n} offered")
        m = len(self.held)
        out_ref, out_t = np.empty(m + n, dtype=np.int64), np.empty((4, m + n))
        out_pass, out_drop, counts = np.empty(m + n), np.empty(n, dtype=np.int64), np.zeros(3, dtype=np.int64)
        args = (np.asarray(packets.t, dtype=np.float64), np.asarray(service_s, dtype=np.float64), self._cycle_cost)
        size = np.broadcast_to(np.asarray(size_bytes, dtype=np.float64), (n,))
        i = 0
        while True:
            i = PK.pass_run(
                self.fs, self.ps, self.kpass, self.kcount, self.kdef, self.sf, self.si, self.stack, self.dl,
                self.hb, i, m, *args, size, self._keys, float(horizon_s), out_ref, out_t, out_pass, out_drop, counts,
            )  # fmt: skip
            if i == n:
                break
            if self.dl[PK.DL_NFREE] == 0:
                self._grow_slots(2 * self.sf.shape[0])
            if self.hb[2][0] + self.dl[PK.DL_N] + 1 > self.hb[0].shape[0]:
                self._grow_heap()
        refs = np.empty(int(self.dl[PK.DL_N]), dtype=np.int64)
        PK.pass_held(self.si, self.dl, refs)
        both = Packets.concat([self.held, packets])
        self.held = both.take(refs)
        self._cycle_cost = np.empty(0)
        self._keys = np.empty(0, dtype=np.int64)
        k = int(counts[PK.C_OUT])
        self.opened_starts = out_pass[: int(counts[PK.C_OPENED])]
        taken = both.take(out_ref[:k])  # in service order: departures in time order
        dropped = both.take(out_drop[: int(counts[PK.C_DROP])])
        return Served(
            taken,
            out_t[3, :k],
            out_t[0, :k],
            out_t[1, :k],
            dropped,
            dropped.t.copy(),
            np.full(len(dropped), K.DROP_BYTES, dtype=np.int64),
            service_end=out_t[2, :k],
        )

    def next_wake(self) -> float | None:
        """When the pass now open can be closed and the next one opened for the waiting messages."""
        if self.dl[PK.DL_N] == 0:
            return None
        start = float(self.ps[PK.PS_START])
        due = float(self.ps[PK.PS_FREE] + self.ps[PK.PS_PENDING])
        return due if due > start else float(np.nextafter(start, math.inf))

    def held_visits(self) -> np.ndarray:
        """Visits of the messages waiting for a later pass."""
        return self.held.visit.copy()

    @property
    def cycles_total(self) -> int:
        """Passes opened so far, whole run."""
        return int(self.ps[PK.PS_COUNT])
