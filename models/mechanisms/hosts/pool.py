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

Event-driven, one event at a time in Python (the start of a waiting stage can
depend on later arrivals of other processes), as
:class:`pubsim.sim.disciplines.EventQueueDiscipline`, whose bookkeeping it
reuses: the station's ``priority`` of a packet is its process's class.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

from ....sim import kernels as K
from ....sim.disciplines import EventQueueDiscipline, Overflow

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
    """

    def __init__(self, *, servers, caps, limits, idle_extra_s=0.0):
        super().__init__(servers=servers, overflow=Overflow.DROP_NEWEST, idle_extra_s=idle_extra_s)
        self.caps = [int(c) for c in caps]
        self.limits = [math.inf if q is None else int(q) for q in limits]
        self.running = [0] * len(self.caps)  # stages of each class in service
        self.cls_of: dict[int, int] = {}  # seq -> class of a stage in service

    def _start(self, entry, t):
        cls = entry[4]
        self.running[cls] += 1
        self.cls_of[entry[0]] = cls
        super()._start(entry, t)

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
                entry = self.waiting[cls].popleft()
                self.n_waiting -= 1
                self._start(entry, done)

    def arrive(self, t, row, service, size, prio, key=None):
        """One stage of class ``prio`` at time ``t`` (after :meth:`advance` to ``t``)."""
        waiting = self.waiting.get(prio)
        if self.running[prio] + (len(waiting) if waiting else 0) >= self.limits[prio]:
            self._drops.append((row, t, K.DROP_FULL))
            return
        self.bytes_in += size
        entry = (self.seq, row, service, size, prio, t, key)
        self.seq += 1
        if len(self.busy) < self.servers and self.running[prio] < self.caps[prio]:
            self._start((entry[0], row, service + self.idle_extra_s, size, prio, t, key), t)
        else:
            self.waiting.setdefault(prio, deque()).append(entry)
            self.n_waiting += 1
