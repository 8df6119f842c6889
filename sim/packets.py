"""Messages in flight, as a structure of arrays.

A *packet* is one copy of a published message at one *visit* of its route
tree (see :mod:`pubsim.sim.routing`). Packets move between stations in batches; a
batch is a :class:`Packets` with one entry per copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from numba import njit

__all__ = ["Packets"]

_FIELDS = (("t", np.float64), ("msg", np.int64), ("visit", np.int64), ("size", np.int64), ("pub_t", np.float64))


_EMPTY_FLOAT = np.empty(0, dtype=np.float64)
_EMPTY_INT = np.empty(0, dtype=np.int64)


class Packets:
    """Arrays ``t`` (time at the current place, s), ``msg`` (message id),
    ``visit`` (route-tree node), ``size`` (payload bytes) and ``pub_t``
    (publish time, s), all of one length."""

    __slots__ = tuple(name for name, _ in _FIELDS)

    def __init__(self, t: Any, msg: Any, visit: Any, size: Any, pub_t: Any) -> None:
        """Each argument array-like (converted to its dtype, contiguous: the compiled kernels
        are compiled once per array layout, so a column view of a table is copied here)."""
        self.t = np.ascontiguousarray(t, dtype=np.float64)
        self.msg = np.ascontiguousarray(msg, dtype=np.int64)
        self.visit = np.ascontiguousarray(visit, dtype=np.int64)
        self.size = np.ascontiguousarray(size, dtype=np.int64)
        self.pub_t = np.ascontiguousarray(pub_t, dtype=np.float64)

    @classmethod
    def empty(cls) -> Packets:
        """No packets: a new object over shared zero-length arrays (nothing
        can be written into them), without the conversions of ``__init__``;
        the small batches of closed loops and cycles ask for many."""
        new = cls.__new__(cls)
        new.t, new.pub_t = _EMPTY_FLOAT, _EMPTY_FLOAT
        new.msg, new.visit, new.size = _EMPTY_INT, _EMPTY_INT, _EMPTY_INT
        return new

    @classmethod
    def concat(cls, parts: Iterable[Packets]) -> Packets:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name, _ in _FIELDS))

    @classmethod
    def interleave_shared(cls, parts: list[Packets]) -> list[Packets]:
        """Parts that differ only in their visits (the j-th child copies of
        the same parent packets, see :meth:`pubsim.sim.routing.RoutePlan.children_by_station`)
        joined into one part, parent by parent, in part order: k fan-out
        copies to one station at the same instants then reach it as one run
        in (time, message, visit) order instead of k runs to sort. Other
        parts are returned as they are (the result is sorted afterwards)."""
        if len(parts) < 2:
            return parts
        starts = {(p.t.__array_interface__["data"][0], len(p)) for p in parts}
        if len(starts) == len(parts):  # no two parts share their times: nothing to join (the usual case)
            return parts
        groups: dict[tuple[int, ...], list[Packets]] = {}
        for p in parts:
            # same memory (start, length, stride): same values, whatever the objects
            key = tuple(a.__array_interface__["data"][0] for a in (p.t, p.msg, p.size, p.pub_t))
            key += (len(p),) + tuple(a.strides[0] for a in (p.t, p.msg, p.size, p.pub_t))
            groups.setdefault(key, []).append(p)
        if len(groups) == len(parts):
            return parts
        return [g[0] if len(g) == 1 else cls._interleave(g) for g in groups.values()]

    @classmethod
    def _interleave(cls, group: list[Packets]) -> Packets:
        k, first = len(group), group[0]
        visit = np.stack([p.visit for p in group], axis=1).ravel()
        return cls(
            np.repeat(first.t, k), np.repeat(first.msg, k), visit, np.repeat(first.size, k), np.repeat(first.pub_t, k)
        )

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

    def split_before(self, horizon: float) -> tuple[Packets, Packets]:
        """``(packets with t < horizon, the others)``, each in input order.

        Slices (no copy) when the early packets come first, as they do in a
        station's output; a copy by mask otherwise."""
        k = _prefix_before(self.t, horizon)
        if k < 0:
            early = self.t < horizon
            return self.take(early), self.take(~early)
        if k == len(self):
            return self, Packets.empty()
        return self.take(slice(0, k)), self.take(slice(k, None))

    def sorted(self, n_visits: int) -> Packets:
        """Sorted by (time, message, visit); cheap when already sorted."""
        if len(self) < 2 or _is_ordered(self.t, self.msg, self.visit, n_visits):
            return self
        by_time = self.take(np.argsort(self.t, kind="stable"))  # timsort: fast on sorted runs (merged parts)
        if _is_ordered(by_time.t, by_time.msg, by_time.visit, n_visits):  # (keys are unique) come out of order
            return by_time
        return self.take(np.lexsort((self.order_key(n_visits), self.t)))


@njit(cache=True)
def _is_ordered(t: np.ndarray, msg: np.ndarray, visit: np.ndarray, n_visits: int) -> bool:
    """Are the packets in (time, message * n_visits + visit) order, ties strictly increasing?"""
    for i in range(1, t.shape[0]):
        if t[i] > t[i - 1]:
            continue
        if t[i] != t[i - 1]:  # earlier, or not a number
            return False
        if msg[i] * n_visits + visit[i] <= msg[i - 1] * n_visits + visit[i - 1]:
            return False
    return True


@njit(cache=True)
def _prefix_before(t: np.ndarray, horizon: float) -> int:
    """Number of entries before ``horizon`` if they are all at the front, else -1."""
    n = t.shape[0]
    k = 0
    while k < n and t[k] < horizon:
        k += 1
    for i in range(k, n):
        if t[i] < horizon:
            return -1
    return k
