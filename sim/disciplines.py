"""How messages wait at a station: FIFO arithmetic or an event-driven queue.

Every discipline implements the :class:`Discipline` protocol: it takes
arrival-ordered batches with known service times and returns what left
service (:class:`Served`) and what was dropped. The fast path hands them
large batches; the reference driver hands them one message at a time (and
calls event-driven ones with an empty batch at their wake-up times). Their
logic is the same either way.

Every discipline runs a batch in compiled code: :class:`FifoDiscipline` and
:class:`BatchDiscipline` in :mod:`pubsim.sim.kernels`, :class:`QueueDiscipline`
(priorities, drop-oldest, update, flow-to-disk) in
:mod:`pubsim.sim.queue_kernel`. :class:`EventQueueDiscipline` is the
event-driven queue written in Python, one event at a time: the readable
reference the compiled queue is tested against, and the base of the
restarting broker queue (:mod:`pubsim.sim.restart`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from . import kernels as K
from . import queue_kernel as QK
from .packets import Packets

__all__ = [
    "Discipline",
    "Served",
    "FifoDiscipline",
    "ServerTotals",
    "grow_slots",
    "QueueDiscipline",
    "EventQueueDiscipline",
    "BatchDiscipline",
    "Overflow",
]


Row = tuple[float, int, int, int, float]
"""A message in an event-driven queue: (arrival time, msg, visit, size, publish time)."""
Entry = tuple[int, Row, float, float, int, float, Any]
"""A queue entry: (seq, row, service s, buffer bytes, priority, arrival time, key)."""


class Overflow:
    """Overflow policies of a finite buffer.

    * ``drop_newest``: the arriving message is dropped (cause ``buffer_full``
      or ``buffer_bytes``).
    * ``reject``: the arriving message is refused and its sender told (YAMI4
      ``reject``, AMQP ``x-overflow: reject-publish``); lost with cause
      ``rejected``. Same queue behaviour as ``drop_newest``.
    * ``drop_oldest`` / ``ring`` (alias; Qpid ring queue, AMQP ``drop-head``):
      the message that has waited longest is evicted (``dropped_oldest``).
    * ``update``: an arriving message replaces the waiting (not in service)
      message of its key (its flow: publisher and topic), full queue or not,
      taking over its queue position; the replaced one is lost with cause ``replaced``
      (YAMI4 update/replace; a last-value queue). With no such message and a
      full queue the arriving one is dropped.
    * ``flow_to_disk`` (Qpid): beyond the limit messages are not dropped but
      written to disk and read back, paying an extra service time each.
    * ``backpressure``: the sender holds the message until there is room.

    ``EVENT_DRIVEN`` policies need :class:`QueueDiscipline`.
    """

    DROP_NEWEST = "drop_newest"
    DROP_OLDEST = "drop_oldest"
    BACKPRESSURE = "backpressure"
    REJECT = "reject"
    RING = "ring"
    UPDATE = "update"
    FLOW_TO_DISK = "flow_to_disk"
    ALL = (DROP_NEWEST, DROP_OLDEST, BACKPRESSURE, REJECT, RING, UPDATE, FLOW_TO_DISK)
    EVENT_DRIVEN = (DROP_OLDEST, RING, UPDATE, FLOW_TO_DISK)


@dataclass
class Served:
    """Outcome of a batch at a discipline.

    ``packets`` left service (their ``t`` is the arrival time at the station),
    with ``admit``, ``start`` and ``depart`` times; ``dropped`` packets with
    ``drop_t`` and ``drop_code``.
    """

    packets: Packets
    admit: np.ndarray
    start: np.ndarray
    depart: np.ndarray
    dropped: Packets
    drop_t: np.ndarray
    drop_code: np.ndarray
    service_end: np.ndarray | None = None  # end of each message's share of a batch (None: depart)

    def __post_init__(self) -> None:
        # Columns of a discipline's 2-d time table reach the compiled statistics: each array
        # layout numba sees is a compile of its own (seconds per kernel), so the times are
        # made contiguous here (no copy when they already are).
        for name in ("admit", "start", "depart", "drop_t", "service_end"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, np.ascontiguousarray(value))


@runtime_checkable
class Discipline(Protocol):
    """How messages wait and are served at a station; what :class:`pubsim.sim.station.Station`
    and the drivers (:mod:`pubsim.sim.drivers`) rely on, and nothing more.

    Attributes
    ----------
    event_driven : bool
        The discipline may hold messages across calls of :meth:`run` (their
        departure is not known on arrival): the drivers call it at
        :meth:`next_wake` times even with no arrival. False: every message
        handed to :meth:`run` is settled (served or dropped) by that call.
    uses_priority : bool
        :meth:`run` reads ``priority``; the station computes it only then.
    uses_key : bool
        :meth:`run` reads ``key`` (the ``update`` overflow policy); the
        station computes it only then.
    """

    event_driven: bool
    uses_priority: bool
    uses_key: bool

    def run(
        self,
        packets: Packets,
        service_s: np.ndarray,
        size_bytes: np.ndarray,
        horizon_s: float,
        priority: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> Served:
        """Serve an arrival-ordered batch and advance to ``horizon_s``.

        ``service_s`` and ``size_bytes`` per packet (service time, s; buffer
        bytes); ``priority`` (higher first; None: all equal) and ``key``
        (overflow key; None: none) per packet, given only if the discipline
        declares it uses them. Returns what left service and what was
        dropped; a message is returned once, by the call that settled it.
        """
        ...

    def next_wake(self) -> float | None:
        """Time the discipline needs a call with no arrival, or None."""
        ...

    def held_visits(self) -> np.ndarray:
        """Route visits (int64) of the messages held by the discipline that
        :meth:`run` has not returned yet (empty for a non-event-driven one)."""
        ...


_NO_VISITS = np.empty(0, dtype=np.int64)


def _capacity(limit: int | None) -> int:
    return -1 if limit is None else int(limit)


class ServerTotals:
    """Whole-run totals of a discipline on the FIFO kernel's float state ``fs``
    (:mod:`pubsim.sim.kernels`)."""

    fs: np.ndarray

    @property
    def work_s(self) -> float:
        """Service time given so far (CPU s, wake-ups and any cycle costs included), whole run."""
        return float(self.fs[K.WORK])

    @property
    def served_total(self) -> int:
        """Messages that started service so far, whole run."""
        return int(self.fs[K.SERVED])


class FifoDiscipline(ServerTotals):
    """c FIFO servers, optional buffer in messages and bytes, computed by arithmetic.

    Parameters
    ----------
    servers : int
        Number of servers (worker threads, cores).
    capacity_messages, capacity_bytes : int or None
        Most messages / bytes in the station (waiting plus in service).
    overflow : str
        ``Overflow.DROP_NEWEST``, ``Overflow.REJECT`` (drop newest, cause
        ``rejected``) or ``Overflow.BACKPRESSURE``.
    idle_extra_s : float
        Extra service time of a message that finds its server idle (wake-up
        cost of an event loop), s.
    cpu_quota_s, cpu_period_s : float
        CPU quota of the servers together per period, s (inf: none); see
        :mod:`pubsim.sim.kernels`.
    idle_exit : tuple of (idle times, exit latencies) or None
        Exit latency of a server by how long it idled, s, points of a
        piecewise-linear curve (:func:`pubsim.sim.kernels.idle_exit_s`): a
        message that finds its server idle starts that much later, without
        using CPU. None: no exit latency.
    sleep_entry_s : float
        A message that finds its server free for less than this (s) is
        served at once without ``idle_extra_s`` or exit latency
        (:func:`pubsim.sim.kernels.wakes`); 0: none.
    """

    event_driven = False
    uses_priority = False
    uses_key = False

    def __init__(
        self,
        *,
        servers: int = 1,
        capacity_messages: int | None = None,
        capacity_bytes: float | None = None,
        overflow: str = Overflow.DROP_NEWEST,
        idle_extra_s: float = 0.0,
        cpu_quota_s: float = math.inf,
        cpu_period_s: float = 0.1,
        idle_exit: tuple | None = None,
        sleep_entry_s: float = 0.0,
    ) -> None:
        policy = {
            Overflow.DROP_NEWEST: K.POLICY_DROP_NEWEST,
            Overflow.REJECT: K.POLICY_DROP_NEWEST,
            Overflow.BACKPRESSURE: K.POLICY_BACKPRESSURE,
        }[overflow]
        self.reject = overflow == Overflow.REJECT
        cap_b = math.inf if capacity_bytes is None else float(capacity_bytes)
        self.fs = np.zeros(K.FS_LEN)
        self.fs[[K.CAP_BYTES, K.IDLE_EXTRA, K.QUOTA, K.PERIOD]] = (
            cap_b,
            float(idle_extra_s),
            float(cpu_quota_s),
            float(cpu_period_s),
        )
        if idle_exit is not None:
            K.set_idle_exit(self.fs, *idle_exit)
        self.fs[K.SLEEP_ENTRY] = float(sleep_entry_s)
        self.ist = np.array([0, _capacity(capacity_messages), policy, 0], dtype=np.int64)
        self.free = np.zeros(int(servers))
        heap_len = max(16, self.ist[K.CAP_MSGS] + 1)
        self.hdep = np.empty(heap_len)
        self.hsize = np.empty(heap_len)

    def flow_control(self, *, window_bytes: float, fixed_s: float, per_byte_s: float) -> None:
        """Admitted messages cost their server ``fixed_s + per_byte_s x size`` (s) more while the
        station holds more than ``window_bytes`` (:func:`pubsim.sim.kernels.set_flow_control`;
        a byte capacity is needed: without one the station does not count its bytes)."""
        K.set_flow_control(self.fs, float(window_bytes), float(fixed_s), float(per_byte_s))

    def run(
        self,
        packets: Packets,
        service_s: np.ndarray,
        size_bytes: np.ndarray,
        horizon_s: float,
        priority: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> Served:
        """Serve a batch (every message is settled); ``horizon_s``, ``priority`` and ``key`` are unused."""
        n = len(packets)
        admit, start, dep = np.empty(n), np.empty(n), np.empty(n)
        code = np.empty(n, dtype=np.int64)
        i = 0
        while True:
            i = K.fifo_run(
                self.fs,
                self.ist,
                self.free,
                self.hdep,
                self.hsize,
                packets.t,
                service_s,
                size_bytes,
                i,
                admit,
                start,
                dep,
                code,
            )
            if i == n:
                break
            self.hdep = np.concatenate([self.hdep, np.empty_like(self.hdep)])
            self.hsize = np.concatenate([self.hsize, np.empty_like(self.hsize)])
        if self.reject:
            code[(code == K.DROP_FULL) | (code == K.DROP_BYTES)] = K.DROP_REJECTED
        ok = code == K.OK
        if ok.all():
            return Served(packets, admit, start, dep, Packets.empty(), np.empty(0), np.empty(0, dtype=np.int64))
        bad = ~ok
        return Served(packets.take(ok), admit[ok], start[ok], dep[ok], packets.take(bad), packets.t[bad], code[bad])

    def next_wake(self) -> float | None:
        """FIFO stations never need a wake-up event."""
        return None

    def held_visits(self) -> np.ndarray:
        """None: every message is settled by the call of :meth:`run` that got it."""
        return _NO_VISITS


_POLICY = {
    Overflow.DROP_NEWEST: QK.Q_DROP_NEWEST,
    Overflow.REJECT: QK.Q_REJECT,
    Overflow.DROP_OLDEST: QK.Q_DROP_OLDEST,
    Overflow.RING: QK.Q_DROP_OLDEST,
    Overflow.UPDATE: QK.Q_UPDATE,
    Overflow.FLOW_TO_DISK: QK.Q_FLOW_TO_DISK,
}


def grow_slots(
    sf: np.ndarray, si: np.ndarray, free: np.ndarray, nfree: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A slot pool grown to ``n`` slots (n >= current): float and int fields per slot (rows of
    ``sf`` / ``si``, copied) and a stack of free slots (its first ``nfree`` kept, the new slots
    pushed on it). Returns ``(sf, si, free, nfree)``."""
    old = sf.shape[0]
    sf2, si2 = np.empty((n, sf.shape[1])), np.empty((n, si.shape[1]), dtype=np.int64)
    sf2[:old], si2[:old] = sf, si
    free2 = np.empty(n, dtype=np.int64)
    free2[:nfree] = free[:nfree]
    free2[nfree : nfree + n - old] = np.arange(old, n)
    return sf2, si2, free2, nfree + n - old


class QueueDiscipline:
    """Event-driven station: non-preemptive priorities, every overflow policy but back-pressure.

    Used where the service order or the fate of a waiting message is not known
    on arrival. Messages are served by priority (higher first), FIFO within a
    priority. Completions at time t are handled before arrivals at time t.
    Runs a whole batch in one compiled call (:mod:`pubsim.sim.queue_kernel`,
    whose docstring explains the design); :class:`EventQueueDiscipline` is the
    same algorithm in Python, one event at a time.

    Parameters
    ----------
    servers : int
    capacity_messages, capacity_bytes : int or None
        Most messages / bytes in the station (waiting plus in service).
    overflow : str
        Any of :class:`Overflow` but ``backpressure``: ``drop_newest``,
        ``reject``, ``drop_oldest``/``ring`` (evicts the message that has
        waited longest), ``update`` (replace the waiting message of the same
        key; keys are non-negative integers, None: one key for all) or
        ``flow_to_disk``.
    idle_extra_s : float
        As for :class:`FifoDiscipline`.
    disk_cost_s : float
        ``flow_to_disk``: extra service time of a message admitted beyond the
        limit (written to disk and read back), s.
    """

    event_driven = True
    uses_priority = True

    def __init__(
        self,
        *,
        servers: int = 1,
        capacity_messages: int | None = None,
        capacity_bytes: float | None = None,
        overflow: str = Overflow.DROP_OLDEST,
        idle_extra_s: float = 0.0,
        disk_cost_s: float = 0.0,
    ) -> None:
        if overflow == Overflow.BACKPRESSURE:
            raise ValueError("back-pressure is handled by FifoDiscipline")
        self.overflow = overflow
        self.uses_key = overflow == Overflow.UPDATE
        self.qi = np.zeros(QK.QI_LEN, dtype=np.int64)
        self.qi[[QK.QI_SERVERS, QK.QI_CAP, QK.QI_POLICY]] = (
            int(servers),
            _capacity(capacity_messages),
            _POLICY[overflow],
        )
        self.qf = np.zeros(QK.QF_LEN)
        self.qf[[QK.QF_CAP_BYTES, QK.QF_IDLE, QK.QF_DISK]] = (
            math.inf if capacity_bytes is None else float(capacity_bytes),
            float(idle_extra_s),
            float(disk_cost_s),
        )
        self.hf = np.empty((int(servers), 2))
        self.hseq = np.empty(int(servers), dtype=np.int64)
        self.sf = np.empty((0, 3))
        self.si = np.empty((0, 4), dtype=np.int64)
        self.free = np.empty(0, dtype=np.int64)
        self._grow_slots(16)
        self.lv = np.empty((4, 4), dtype=np.int64)
        self.kslot = np.full(1, -1, dtype=np.int64)
        self.held = Packets.empty()  # the waiting messages, in queue_held order

    def _grow_slots(self, n: int) -> None:
        """Room for ``n`` waiting messages (n >= current): new slots go on the free stack."""
        self.sf, self.si, self.free, nfree = grow_slots(self.sf, self.si, self.free, int(self.qi[QK.QI_NFREE]), n)
        self.qi[QK.QI_NFREE] = nfree

    def _grow(self) -> None:
        """More slots or priority levels, whichever ran out."""
        if self.qi[QK.QI_NFREE] == 0:
            self._grow_slots(2 * self.sf.shape[0])
        if self.qi[QK.QI_NLEV] == self.lv.shape[0]:
            self.lv = np.concatenate([self.lv, np.empty_like(self.lv)])

    def _keys(self, key: np.ndarray | None, n: int) -> np.ndarray:
        """Keys as indices of the key table (grown to fit); zeros when unused."""
        if not self.uses_key or key is None or n == 0:
            return np.zeros(n, dtype=np.int64)
        keys = np.asarray(key)
        if keys.dtype.kind not in "iu" or keys.min() < 0:
            raise ValueError(f"update keys must be non-negative integers, got {keys.dtype} from {keys.min()}")
        keys = keys.astype(np.int64, copy=False)
        top = int(keys.max())
        if top >= self.kslot.shape[0]:
            grown = np.full(max(top + 1, 2 * self.kslot.shape[0]), -1, dtype=np.int64)
            grown[: self.kslot.shape[0]] = self.kslot
            self.kslot = grown
        return keys

    def run(
        self,
        packets: Packets,
        service_s: np.ndarray,
        size_bytes: np.ndarray,
        horizon_s: float,
        priority: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> Served:
        """Serve a batch; ``priority`` (higher first) and ``key`` (update policy) per packet."""
        n = len(packets)
        prio = np.zeros(n, dtype=np.int64) if priority is None else np.asarray(priority).astype(np.int64, copy=False)
        keys = self._keys(key, n)
        service = np.asarray(service_s, dtype=np.float64)
        size = np.asarray(size_bytes, dtype=np.float64)
        m = len(self.held)
        out_ref, out_time = np.empty(m + n, dtype=np.int64), np.empty((3, m + n))
        drop_ref, drop_t, drop_code = np.empty(m + n, dtype=np.int64), np.empty(m + n), np.empty(m + n, dtype=np.int64)
        self.qi[[QK.QI_NOUT, QK.QI_NDROP]] = 0
        i = 0
        while True:
            i = QK.queue_run(
                self.qi,
                self.qf,
                self.hf,
                self.hseq,
                self.sf,
                self.si,
                self.free,
                self.lv,
                self.kslot,
                i,
                m,
                packets.t,
                service,
                size,
                prio,
                keys,
                float(horizon_s),
                out_ref,
                out_time,
                drop_ref,
                drop_t,
                drop_code,
            )
            if i == n:
                break
            self._grow()
        refs = np.empty(int(self.qi[QK.QI_NWAIT]), dtype=np.int64)
        QK.queue_held(self.qi, self.si, self.lv, refs)
        both = Packets.concat([self.held, packets])
        self.held = both.take(refs)
        k, d = int(self.qi[QK.QI_NOUT]), int(self.qi[QK.QI_NDROP])
        return Served(
            both.take(out_ref[:k]),
            out_time[0, :k],
            out_time[1, :k],
            out_time[2, :k],
            both.take(drop_ref[:d]),
            drop_t[:d],
            drop_code[:d],
        )

    def next_wake(self) -> float | None:
        """Next completion time after which a waiting message starts, if any."""
        if self.qi[QK.QI_NWAIT] and self.qi[QK.QI_NBUSY]:
            return float(self.hf[0, 0])
        return None

    def held_visits(self) -> np.ndarray:
        """Visits of the waiting messages (those in service were returned when they started)."""
        return self.held.visit.copy()


class EventQueueDiscipline:
    """Event-driven station in Python, one event at a time: the readable reference of
    :class:`QueueDiscipline` (same results, record for record) and the base of
    :class:`pubsim.sim.restart.RestartQueueDiscipline`.

    Parameters as :class:`QueueDiscipline` (any hashable ``update`` key).

    Entries are tuples ``(seq, row, service, size, priority, arrival, key)``.
    """

    event_driven = True
    uses_priority = True

    def __init__(
        self,
        *,
        servers: int = 1,
        capacity_messages: int | None = None,
        capacity_bytes: float | None = None,
        overflow: str = Overflow.DROP_OLDEST,
        idle_extra_s: float = 0.0,
        disk_cost_s: float = 0.0,
    ) -> None:
        if overflow == Overflow.BACKPRESSURE:
            raise ValueError("back-pressure is handled by FifoDiscipline")
        self.servers = int(servers)
        self.cap_msgs: float = math.inf if capacity_messages is None else int(capacity_messages)
        self.cap_bytes = math.inf if capacity_bytes is None else float(capacity_bytes)
        self.overflow = overflow
        self.drop_oldest = overflow in (Overflow.DROP_OLDEST, Overflow.RING)
        self.uses_key = overflow == Overflow.UPDATE
        self.disk_cost_s = float(disk_cost_s)
        self.keyed: dict[Any, int] = {}  # update policy: key -> priority of its waiting message
        self.idle_extra_s = float(idle_extra_s)
        self.busy: list[tuple[float, int, float]] = []  # heap of (completion time, seq, size)
        self.waiting: dict[int, deque[Entry]] = {}  # priority -> deque of entries
        self.n_waiting = 0
        self.bytes_in = 0.0
        self.seq = 0
        self._out: list[tuple[Row, float, float, float]] = []
        self._drops: list[tuple[Row, float, int]] = []

    # --- state changes -------------------------------------------------
    def _start(self, entry: Entry, t: float) -> None:
        seq, row, service, size, prio, arrival, _ = entry
        dep = t + service
        heapq.heappush(self.busy, (dep, seq, size))
        self._out.append((row, arrival, t, dep))

    def _pop_next(self) -> Entry:
        prio = max(p for p, q in self.waiting.items() if q)
        entry = self.waiting[prio].popleft()
        self.n_waiting -= 1
        if self.uses_key:
            del self.keyed[entry[6]]
        return entry

    def advance(self, t: float) -> None:
        """Complete services finishing at or before ``t`` and start waiting ones."""
        while self.busy and self.busy[0][0] <= t:
            done, _, size = heapq.heappop(self.busy)
            self.bytes_in -= size
            if self.n_waiting:
                self._start(self._pop_next(), done)

    def _evict_oldest(self, t: float) -> None:
        heads = [(q[0][0], p) for p, q in self.waiting.items() if q]
        _, prio = min(heads)
        seq, row, service, size, p, arrival, _ = self.waiting[prio].popleft()
        self.n_waiting -= 1
        self.bytes_in -= size
        self._drops.append((row, t, K.DROP_OLDEST))

    def _full(self, size: float) -> bool:
        in_station = len(self.busy) + self.n_waiting
        return in_station >= self.cap_msgs or self.bytes_in + size > self.cap_bytes

    def _replace(self, t: float, row: Row, service: float, size: float, key: Any) -> bool:
        """Update policy: the new message takes the waiting one's place; False if its bytes do not fit."""
        prio = self.keyed[key]
        q = self.waiting[prio]
        i = next(i for i, e in enumerate(q) if e[6] == key)
        old = q[i]
        if self.bytes_in - old[3] + size > self.cap_bytes:
            return False
        q[i] = (old[0], row, service, size, prio, t, key)
        self.bytes_in += size - old[3]
        self._drops.append((old[1], t, K.DROP_REPLACED))
        return True

    def _refuse(self, t: float, row: Row) -> None:
        if self.overflow == Overflow.REJECT:
            code = K.DROP_REJECTED
        else:
            code = K.DROP_FULL if len(self.busy) + self.n_waiting >= self.cap_msgs else K.DROP_BYTES
        self._drops.append((row, t, code))

    def arrive(self, t: float, row: Row, service: float, size: float, prio: int, key: Any = None) -> None:
        """One arrival at time ``t`` (after :meth:`advance` to ``t``)."""
        if self.uses_key and key in self.keyed and self._replace(t, row, service, size, key):
            return
        if self._full(size):
            if self.overflow == Overflow.FLOW_TO_DISK:
                service += self.disk_cost_s  # spilled to disk, read back before it is sent
            else:
                can_evict = self.drop_oldest and self.n_waiting
                while can_evict and self._full(size) and self.n_waiting:
                    self._evict_oldest(t)
                if self._full(size):
                    self._refuse(t, row)
                    return
        self.bytes_in += size
        entry = (self.seq, row, service, size, prio, t, key)
        self.seq += 1
        if len(self.busy) < self.servers:
            entry = (entry[0], row, service + self.idle_extra_s, size, prio, t, key)
            self._start(entry, t)
        else:
            self.waiting.setdefault(prio, deque()).append(entry)
            self.n_waiting += 1
            if self.uses_key:
                self.keyed[key] = prio

    # --- batch interface -------------------------------------------------
    def run(
        self,
        packets: Packets,
        service_s: np.ndarray,
        size_bytes: np.ndarray,
        horizon_s: float,
        priority: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> Served:
        """Serve a batch; ``priority`` (higher first) and ``key`` (update policy) per packet."""
        prio = np.zeros(len(packets), dtype=np.int64) if priority is None else priority
        keys = [None] * len(packets) if key is None else np.asarray(key).tolist()
        rows = list(
            zip(
                packets.t.tolist(),
                packets.msg.tolist(),
                packets.visit.tolist(),
                packets.size.tolist(),
                packets.pub_t.tolist(),
            )
        )
        for i, row in enumerate(rows):
            t = row[0]
            self.advance(t)
            self.arrive(t, row, float(service_s[i]), float(size_bytes[i]), int(prio[i]), keys[i])
        self.advance(horizon_s)
        return self._collect()

    def _collect(self) -> Served:
        out, drops = self._out, self._drops
        self._out, self._drops = [], []
        served = _rows_to_packets([o[0] for o in out])
        times = np.array([o[1:] for o in out], dtype=float).reshape(-1, 3)
        dropped = _rows_to_packets([d[0] for d in drops])
        return Served(
            served,
            times[:, 0],
            times[:, 1],
            times[:, 2],
            dropped,
            np.array([d[1] for d in drops], dtype=float),
            np.array([d[2] for d in drops], dtype=np.int64),
        )

    def next_wake(self) -> float | None:
        """Next completion time after which a waiting message starts, if any."""
        if self.n_waiting and self.busy:
            return self.busy[0][0]
        return None

    def held_visits(self) -> np.ndarray:
        """Visits of the waiting messages (those in service were returned when they started)."""
        return np.array([e[1][2] for q in self.waiting.values() for e in q], dtype=np.int64)


def _rows_to_packets(rows: list[Row]) -> Packets:
    if not rows:
        return Packets.empty()
    t, msg, visit, size, pub_t = zip(*rows)
    return Packets(t, msg, visit, size, pub_t)


class BatchDiscipline:
    """One server serving what is queued in batches (:mod:`pubsim.sim.kernels` batch kernel).

    When the server becomes free it takes every waiting message, up to
    ``batch_max_messages`` and ``batch_max_bytes``, and serves them together
    in ``batch_fixed_cost_s + sum of their own costs``; they all depart at
    the batch end. A message that finds the server idle is a batch of one
    (and pays ``idle_extra_s`` too). Capacity with batches of B messages of
    cost c: ``B / (fixed + B c)`` messages per second.

    Arithmetic like :class:`FifoDiscipline`, but a message's departure is
    known only when its batch starts, so waiting messages are held across
    calls: the station is driven like an event-driven one (``next_wake`` is
    the start of the next batch). Both drivers call the same kernel step,
    :func:`pubsim.sim.kernels.batch_offer`.

    Parameters
    ----------
    capacity_messages, capacity_bytes : int or None
        Most messages / bytes in the station (waiting plus in a batch).
    overflow : str
        ``Overflow.DROP_NEWEST`` or ``Overflow.BACKPRESSURE``.
    batch_max_messages : int
        Most messages per batch (>= 1).
    batch_max_bytes : float
        Most buffer bytes per batch (inf: no limit; a batch always takes its
        first message).
    batch_fixed_cost_s : float
        Time per batch on top of the messages' own costs, s.
    idle_extra_s : float
        Extra time of a batch started by a message that found the server idle, s.
    """

    event_driven = True
    uses_priority = False
    uses_key = False

    def __init__(
        self,
        *,
        capacity_messages: int | None = None,
        capacity_bytes: float | None = None,
        overflow: str = Overflow.DROP_NEWEST,
        batch_max_messages: int = 1,
        batch_max_bytes: float = math.inf,
        batch_fixed_cost_s: float = 0.0,
        idle_extra_s: float = 0.0,
    ) -> None:
        policy = {Overflow.DROP_NEWEST: K.POLICY_DROP_NEWEST, Overflow.BACKPRESSURE: K.POLICY_BACKPRESSURE}[overflow]
        self.bf = np.zeros(K.BF_LEN)
        self.bf[[K.BF_FIXED, K.BF_IDLE, K.BF_CAP_BYTES, K.BF_MAX_BYTES]] = (
            float(batch_fixed_cost_s),
            float(idle_extra_s),
            math.inf if capacity_bytes is None else float(capacity_bytes),
            float(batch_max_bytes),
        )
        self.bi = np.zeros(K.BI_LEN, dtype=np.int64)
        self.bi[[K.BI_CAP, K.BI_POLICY, K.BI_MAXMSG]] = (_capacity(capacity_messages), policy, int(batch_max_messages))
        self._alloc_waiting(16)
        self.hdep = np.empty(16)
        self.hsize = np.empty(16)
        self.next_id = 0
        self.held = Packets.empty()  # admitted packets not yet departed, ids held_base...
        self.held_base = 0

    def _alloc_waiting(self, n: int) -> None:
        self.wid = np.empty(n, dtype=np.int64)
        self.wadm, self.wsvc, self.wsize = np.empty(n), np.empty(n), np.empty(n)

    def _make_room(self, n: int) -> int:
        """Compact the waiting slots and size the arrays for ``n`` more arrivals."""
        h, t = int(self.bi[K.BI_HEAD]), int(self.bi[K.BI_TAIL])
        waiting = t - h
        need = waiting + n
        arrays = (self.wid, self.wadm, self.wsvc, self.wsize)
        if need > self.wid.shape[0]:
            old = [a[h:t].copy() for a in arrays]
            self._alloc_waiting(max(2 * need, 16))
            arrays = (self.wid, self.wadm, self.wsvc, self.wsize)
            for a, o in zip(arrays, old):
                a[:waiting] = o
        elif h > 0:
            for a in arrays:
                a[:waiting] = a[h:t].copy()
        self.bi[K.BI_HEAD], self.bi[K.BI_TAIL] = 0, waiting
        heap_need = int(self.bi[K.BI_NHEAP]) + need
        if heap_need > self.hdep.shape[0]:
            grow = max(2 * heap_need, 16)
            hd, hs = np.empty(grow), np.empty(grow)
            nh = int(self.bi[K.BI_NHEAP])
            hd[:nh], hs[:nh] = self.hdep[:nh], self.hsize[:nh]
            self.hdep, self.hsize = hd, hs
        return need

    def run(
        self,
        packets: Packets,
        service_s: np.ndarray,
        size_bytes: np.ndarray,
        horizon_s: float,
        priority: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> Served:
        """Offer a batch and advance to ``horizon_s``; ``priority`` and ``key`` are unused."""
        n = len(packets)
        need = self._make_room(n)
        outs = [np.empty(need, dtype=np.int64)] + [np.empty(need) for _ in range(4)]
        code = np.empty(n, dtype=np.int64)
        self.bi[K.BI_NOUT] = 0
        first = self.next_id
        K.batch_run(
            self.bf,
            self.bi,
            self.wid,
            self.wadm,
            self.wsvc,
            self.wsize,
            self.hdep,
            self.hsize,
            first,
            packets.t,
            np.asarray(service_s, dtype=np.float64),
            np.asarray(size_bytes, dtype=np.float64),
            float(horizon_s),
            *outs,
            code,
        )
        self.next_id += n
        self.held = Packets.concat([self.held, packets])
        k = int(self.bi[K.BI_NOUT])
        oid, oadm, ostart, oend, odep = (o[:k] for o in outs)
        served = self.held.take(oid - self.held_base)
        bad = code != K.OK
        self._trim()
        return Served(served, oadm, ostart, odep, packets.take(bad), packets.t[bad], code[bad], service_end=oend)

    def _trim(self) -> None:
        """Forget held packets that have left (ids below the oldest waiting one)."""
        h, t = int(self.bi[K.BI_HEAD]), int(self.bi[K.BI_TAIL])
        keep = int(self.wid[h]) if t > h else self.next_id
        cut = keep - self.held_base
        if cut > 0:
            self.held = self.held.take(slice(cut, None))
            self.held_base = keep

    def next_wake(self) -> float | None:
        """Start of the next batch, if messages are waiting."""
        if self.bi[K.BI_TAIL] > self.bi[K.BI_HEAD]:
            return float(self.bf[K.BF_FREE])
        return None

    def held_visits(self) -> np.ndarray:
        """Visits of the messages still waiting for a batch."""
        h, t = int(self.bi[K.BI_HEAD]), int(self.bi[K.BI_TAIL])
        return self.held.visit[self.wid[h:t] - self.held_base]

    @property
    def work_s(self) -> float:
        """Busy time so far (batches' fixed costs included), s."""
        return float(self.bf[K.BF_WORK])

    @property
    def served_total(self) -> int:
        """Messages that started service so far, whole run."""
        return int(self.bf[K.BF_SERVED])

    @property
    def batches_total(self) -> int:
        """Batches served so far."""
        return int(self.bf[K.BF_BATCHES])
