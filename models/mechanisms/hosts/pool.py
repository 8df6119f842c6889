"""A shared pool of cores whose processes each run on at most their own threads.

``c`` servers (the host's cores) serve the CPU stages of several processes;
process ``k`` has ``cap[k]`` threads, so at most ``cap[k]`` of its stages are in
service at once. A stage that arrives when a core is free and its process has a
free thread starts at once (a wake-up, with ``idle_extra_s``); else it waits.
When a stage completes, the earliest-arrived waiting stages whose processes
have a free thread start on the free cores (FIFO across processes, a process
at its thread limit skipped: its stages wait in its own socket buffers while
other processes' threads run). Each process has its own waiting room: a stage
that finds ``limit[k]`` stages of its process waiting or in service is
dropped (the newest). With every ``cap[k] >= c`` and no limits this is the
plain multi-server FIFO (:class:`pubsim.sim.disciplines.FifoDiscipline`),
which the plugin then uses instead, for speed.

A process may serve its stages in *batches* (a ZeroMQ socket's I/O thread,
:mod:`pubsim.models.mechanisms.brokerless.socket`): when one of its threads
gets a core it takes every waiting stage of its process, up to
``max_messages`` and ``max_bytes`` (the first always), and runs them in
``fixed + sum of their demands`` on that one core and thread; they all
depart at the batch's end. A stage that finds a core and a thread free is a
batch of one. Each stage's share of the batch (its start and end, the
first's including the fixed and wake-up time) is what the station's
statistics count, as :class:`pubsim.sim.disciplines.BatchDiscipline`, whose
arithmetic this repeats operation for operation (a batched process alone on
one core gives its records exactly). A process may have its own wake-up
time (``idle``) instead of the station's.

Event-driven, one event at a time in Python (the start of a waiting stage can
depend on later arrivals of other processes), as
:class:`pubsim.sim.disciplines.EventQueueDiscipline`, whose bookkeeping it
reuses: the station's ``priority`` of a packet is its process's class.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from ....sim import kernels as K
from ....sim.disciplines import EventQueueDiscipline, Overflow, Served

__all__ = ["CappedPoolDiscipline"]


class CappedPoolDiscipline(EventQueueDiscipline):
    """``servers`` cores shared by processes of ``caps[k]`` threads each (class ``k`` = priority).

    Parameters
    ----------
    servers : int
    caps : sequence of int
        Threads of each process class.
    limits : sequence of int or None
        Stages of each class waiting or in service at most (None = no limit).
    idle_extra_s : float
        Extra time of a stage that starts on arrival, s.
    idle : sequence of float or None, optional
        Per class: extra time of a stage (or batch) that starts on arrival, s;
        None (the default, or for a class) takes ``idle_extra_s``.
    batches : sequence of (int, float, float) or None, optional
        Per class: ``(max_messages, max_bytes, fixed_s)`` of its batches, or
        None for a class that serves one stage at a time (a batched class has no
        waiting-room limit).
    """

    def __init__(self, *, servers, caps, limits, idle_extra_s=0.0, idle=None, batches=None):
        super().__init__(servers=servers, overflow=Overflow.DROP_NEWEST, idle_extra_s=idle_extra_s)
        self.caps = [int(c) for c in caps]
        self.limits = [math.inf if q is None else int(q) for q in limits]
        n = len(self.caps)
        own = [None] * n if idle is None else list(idle)
        self.idle = [self.idle_extra_s if v is None else float(v) for v in own]
        self.own_idle = [v is not None for v in own]
        self.batches = [None] * n if batches is None else [None if b is None else _batch(*b) for b in batches]
        if any(b is not None and q != math.inf for b, q in zip(self.batches, self.limits)):
            raise ValueError("a batched class has no waiting-room limit")
        self.batched = any(b is not None for b in self.batches)
        self.running = [0] * n  # stages (batches) of each class in service
        self.cls_of: dict[int, int] = {}  # seq -> class of a stage (batch) in service
        self._ends: list[float] = []  # end of each started stage's share (parallel to ``_out``)
        # (start, class, time) of work beyond the stages' demands that a class's own rule adds:
        # a batch's fixed and wake-up time, a wake-up of a class with its own ``idle``
        self.extra_log: list[tuple[float, int, float]] = []

    def _start(self, entry, t):
        cls = entry[4]
        self.running[cls] += 1
        self.cls_of[entry[0]] = cls
        super()._start(entry, t)
        self._ends.append(self._out[-1][3])

    def _start_batch(self, cls, t, extra):
        """Start a batch of class ``cls`` at ``t`` with its waiting stages (as
        :func:`pubsim.sim.kernels._batch_start`: the same operations in the same order)."""
        max_messages, max_bytes, fixed = self.batches[cls]
        q = self.waiting[cls]
        members = [q.popleft()]
        nbytes = members[0][3]
        while q and len(members) < max_messages and not nbytes + q[0][3] > max_bytes:
            nbytes += q[0][3]
            members.append(q.popleft())
        self.n_waiting -= len(members)
        cur = t
        first = len(self._out)
        for j, (_, row, service, _, _, arrival, _) in enumerate(members):
            start = cur
            if j == 0:
                cur = cur + (fixed + extra)
            cur = cur + service
            self._out.append((row, arrival, start, cur))
            self._ends.append(cur)
        for o in range(first, len(self._out)):
            self._out[o] = self._out[o][:3] + (cur,)
        seq = members[0][0]
        heapq.heappush(self.busy, (cur, seq, nbytes))
        self.running[cls] += 1
        self.cls_of[seq] = cls
        self.extra_log.append((t, cls, fixed + extra))

    def _start_class(self, cls, t):
        """Start the head of class ``cls``'s waiting stages (its next batch) at ``t``."""
        if self.batches[cls] is not None:
            self._start_batch(cls, t, 0.0)
            return
        entry = self.waiting[cls].popleft()
        self.n_waiting -= 1
        self._start(entry, t)

    def _eligible_head(self):
        """Class of the earliest waiting stage whose process has a free thread, or None."""
        best = None
        for cls, q in self.waiting.items():
            if q and self.running[cls] < self.caps[cls] and (best is None or q[0][0] < self.waiting[best][0][0]):
                best = cls
        return best

    def advance(self, t):
        """Complete stages finishing at or before ``t``; start waiting ones on the freed cores."""
        while self.busy and self.busy[0][0] <= t:
            done, seq, size = heapq.heappop(self.busy)
            self.bytes_in -= size
            self.running[self.cls_of.pop(seq)] -= 1
            while self.n_waiting and len(self.busy) < self.servers:
                cls = self._eligible_head()
                if cls is None:
                    break
                self._start_class(cls, done)

    def arrive(self, t, row, service, size, prio, key=None):
        """One stage of class ``prio`` at time ``t`` (after :meth:`advance` to ``t``)."""
        waiting = self.waiting.get(prio)
        if self.running[prio] + (len(waiting) if waiting else 0) >= self.limits[prio]:
            self._drops.append((row, t, K.DROP_FULL))
            return
        self.bytes_in += size
        entry = (self.seq, row, service, size, prio, t, key)
        self.seq += 1
        start_now = len(self.busy) < self.servers and self.running[prio] < self.caps[prio]
        if start_now and self.batches[prio] is None:
            self._start((entry[0], row, service + self.idle[prio], size, prio, t, key), t)
            if self.own_idle[prio]:
                self.extra_log.append((t, prio, self.idle[prio]))
            return
        self.waiting.setdefault(prio, deque()).append(entry)
        self.n_waiting += 1
        if start_now:  # a batch of one, with the wake-up
            self._start_batch(prio, t, self.idle[prio])

    def _collect(self):
        """As the base class's, with each stage's share of its batch (``service_end``)."""
        ends, self._ends = self._ends, []
        served = super()._collect()
        if not self.batched:
            return served
        return Served(
            served.packets,
            served.admit,
            served.start,
            served.depart,
            served.dropped,
            served.drop_t,
            served.drop_code,
            service_end=np.array(ends, dtype=float),
        )


def _batch(max_messages, max_bytes, fixed_s):
    """A class's batch rule, checked: (max_messages >= 1, max_bytes > 0 or inf, fixed_s >= 0)."""
    if int(max_messages) < 1 or not float(max_bytes) > 0 or float(fixed_s) < 0:
        raise ValueError(f"batch rule {(max_messages, max_bytes, fixed_s)} needs max >= 1, bytes > 0, fixed >= 0")
    return int(max_messages), float(max_bytes), float(fixed_s)
