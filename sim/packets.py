"""Messages in flight, as a structure of arrays.

A *packet* is one copy of a published message at one *visit* of its route
tree (see :mod:`pubsim.sim.routing`). Packets move between stations in batches; a
batch is a :class:`Packets` with one entry per copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["Packets"]

_FIELDS = (("t", np.float64), ("msg", np.int64), ("visit", np.int64), ("size", np.int64), ("pub_t", np.float64))


class Packets:
    """Arrays ``t`` (time at the current place, s), ``msg`` (message id),
    ``visit`` (route-tree node), ``size`` (payload bytes) and ``pub_t``
    (publish time, s), all of one length."""

    __slots__ = tuple(name for name, _ in _FIELDS)

    def __init__(self, t: Any, msg: Any, visit: Any, size: Any, pub_t: Any) -> None:
        """Each argument array-like (converted to its dtype)."""
        self.t = np.asarray(t, dtype=np.float64)
        self.msg = np.asarray(msg, dtype=np.int64)
        self.visit = np.asarray(visit, dtype=np.int64)
        self.size = np.asarray(size, dtype=np.int64)
        self.pub_t = np.asarray(pub_t, dtype=np.float64)

    @classmethod
    def empty(cls) -> Packets:
        return cls(*(np.empty(0, dtype) for _, dtype in _FIELDS))

    @classmethod
    def concat(cls, parts: Iterable[Packets]) -> Packets:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name, _ in _FIELDS))

    def __len__(self) -> int:
        return self.t.shape[0]

    def take(self, index: Any) -> Packets:
        """Subset by boolean mask or integer index."""
        return Packets(self.t[index], self.msg[index], self.visit[index], self.size[index], self.pub_t[index])

    def with_time(self, t: np.ndarray) -> Packets:
        """Same packets with new times."""
        return Packets(t, self.msg, self.visit, self.size, self.pub_t)

    def order_key(self, n_visits: int) -> np.ndarray:
        """Tie-break key among packets at the same time: message, then visit."""
        return self.msg * n_visits + self.visit

    def sorted(self, n_visits: int) -> Packets:
        """Sorted by (time, message, visit); cheap when already sorted."""
        n = len(self)
        if n < 2:
            return self
        step = np.diff(self.t)
        if np.all(step > 0):
            return self
        if np.all(step >= 0):
            key = self.order_key(n_visits)
            ties = step == 0
            if np.all(np.diff(key)[ties] > 0):
                return self
        return self.take(np.lexsort((self.order_key(n_visits), self.t)))
