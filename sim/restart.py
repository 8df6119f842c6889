"""An event-driven broker queue that restarts: loss of what is not durable, downtime.

At each restart time ``R`` the broker loses every message it holds (waiting
or in service) unless that message survives (persistent, in a durable
queue); survivors are served again, in their order, from ``R + downtime``.
Arrivals while the broker is down are refused (cause ``broker_down``; an
at-most-once publisher without confirms loses them). Lost messages get
cause ``broker_restart`` at time ``R``. A message in service at ``R`` that
survives is served again from the start.

Departures are emitted only when they have happened (at or before the
horizon the drivers give), so a restart can still take a message that was
in service. Events at the same time: completions, then restarts, then the
end of a downtime, then arrivals. A restarting broker's worker queue and its
per-subscriber queues (the downlinks' transmit queues) use this discipline
(:mod:`pubsim.models.mechanisms.persistence.compile`); a disk stage keeps its content (a
simplification: unsynced writes would be lost too).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import kernels as K
from .disciplines import Entry, EventQueueDiscipline, Row

__all__ = ["RestartQueueDiscipline"]


class RestartQueueDiscipline(EventQueueDiscipline):
    """:class:`~pubsim.sim.disciplines.EventQueueDiscipline` (the Python event-by-event queue) with broker restarts.

    Parameters
    ----------
    restart_at_s : sequence of float
        Restart times, s, increasing.
    downtime_s : float
        How long the broker is down after each restart, s.
    durable_visit : numpy.ndarray of bool or None
        Per route visit: does a message there survive a restart (None:
        nothing survives). Usually known only once the route plan is built:
        see :meth:`set_durable`.
    **kwargs
        As :class:`~pubsim.sim.disciplines.QueueDiscipline`.
    """

    def __init__(
        self,
        *,
        restart_at_s: Sequence[float],
        downtime_s: float,
        durable_visit: np.ndarray | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.restarts = sorted(float(r) for r in restart_at_s)
        self.next_restart = 0
        self.downtime_s = float(downtime_s)
        self.down_until = -math.inf
        self.in_service: dict[int, tuple[Entry, float, float]] = {}  # seq -> (entry, start, depart)
        self._durable_visit: np.ndarray | None = None
        self.set_durable(durable_visit)

    def set_durable(self, durable_visit: np.ndarray | None) -> None:
        """Which messages survive a restart: per route visit, a bool (None: none survives)."""
        self._durable_visit = None if durable_visit is None else np.asarray(durable_visit, dtype=bool)

    # --- state changes -------------------------------------------------
    def _start(self, entry: Entry, t: float) -> None:
        seq, row, service, size, prio, arrival, _ = entry
        dep = t + service
        heapq.heappush(self.busy, (dep, seq, size))
        self.in_service[seq] = (entry, t, dep)

    def _down(self, t: float) -> bool:
        return t < self.down_until

    def _next_event(self) -> tuple[float, float, float]:
        done = self.busy[0][0] if self.busy else math.inf
        restart = self.restarts[self.next_restart] if self.next_restart < len(self.restarts) else math.inf
        up = self.down_until if (self.n_waiting and self.down_until > -math.inf) else math.inf
        return done, restart, up

    def advance(self, t: float) -> None:
        """Handle completions, restarts and ends of downtime at or before ``t``, in time order."""
        while True:
            done, restart, up = self._next_event()
            first = min(done, restart, up)
            if first > t or first == math.inf:
                return
            if done == first:
                self._complete()
            elif restart == first:
                self._restart(restart)
            else:
                self._resume(up)

    def _complete(self) -> None:
        done, seq, size = heapq.heappop(self.busy)
        self.bytes_in -= size
        entry, start, dep = self.in_service.pop(seq)
        self._out.append((entry[1], entry[5], start, dep))
        if self.n_waiting and not self._down(done):
            self._start(self._pop_next(), done)

    def _survives(self, entry: Entry) -> bool:
        return self._durable_visit is not None and bool(self._durable_visit[entry[1][2]])

    def _restart(self, r: float) -> None:
        self.next_restart += 1
        held = [e for e, _, _ in sorted(self.in_service.values(), key=lambda x: x[0][0])]
        for q in self.waiting.values():
            held.extend(q)
        self.busy, self.in_service, self.waiting, self.n_waiting = [], {}, {}, 0
        self.keyed = {}
        keep = []
        for entry in held:
            if self._survives(entry):
                keep.append(entry)
            else:
                self.bytes_in -= entry[3]
                self._drops.append((entry[1], r, K.DROP_RESTART))
        for entry in sorted(keep, key=lambda e: e[0]):  # FIFO order within each priority
            self.waiting.setdefault(entry[4], deque()).append(entry)
            if self.uses_key:  # update policy: one waiting message per key, as before
                self.keyed[entry[6]] = entry[4]
        self.n_waiting = len(keep)
        self.down_until = max(self.down_until, r + self.downtime_s)

    def _resume(self, up: float) -> None:
        self.down_until = -math.inf
        while self.n_waiting and len(self.busy) < self.servers:
            self._start(self._pop_next(), up)

    def arrive(self, t: float, row: Row, service: float, size: float, prio: int, key: Any = None) -> None:
        if self._down(t):
            self._drops.append((row, t, K.DROP_DOWN))
            return
        super().arrive(t, row, service, size, prio, key)

    def next_wake(self) -> float | None:
        first = min(self._next_event())
        if first == math.inf:
            return None
        if not (self.busy or self.n_waiting):
            return None  # an empty broker's restart changes nothing until an arrival
        return first

    def held_visits(self) -> np.ndarray:
        """Visits of the messages in the broker (waiting or in service, not yet emitted)."""
        rows = [e[1] for e, _, _ in self.in_service.values()]
        rows += [e[1] for q in self.waiting.values() for e in q]
        return np.array([r[2] for r in rows], dtype=np.int64)
