"""Static route trees: where each copy of a message goes.

A *flow* is a (publisher, topic) pair. Its route tree lists the stations a
message of that flow visits: the publisher's uplink, a broker, the copies sent
on to subscribers or neighbour brokers, down to the subscriber stations where
copies are delivered. Each node of a tree is a *visit*. Visits are numbered in
depth-first pre-order, so a child always has a larger number than its parent;
packets at the same time are processed by (message id, visit), a total order
that both drivers use, so simultaneous events resolve identically.

A *choice* visit (``Hop(choice=True)``) is where one copy goes on to one of
several alternatives (a shared subscription's group: one member per
message). Its children are the alternatives, all at the choice visit's own
station: the station picks one per packet before service (rewriting the
packet's visit to the chosen child, in arrival order, so both drivers pick
alike) and the copy continues from there. Deliveries below a choice visit
count once (``leaves`` is the largest of its alternatives'), and the edge from
a choice visit to its alternatives is not a move between stations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from .packets import Packets

__all__ = ["Hop", "RoutePlan", "leaf_state", "NO_LEAVES", "ALL_LEAVES", "SOME_LEAVES"]


@dataclass
class Hop:
    """One node of a route tree while it is being built.

    Parameters
    ----------
    station : int
        Index of the station visited.
    matched : int
        Subscriptions matched at this visit (brokers; 0 elsewhere).
    subscriber : int
        Subscriber index if the copy is delivered when it leaves this visit,
        else -1.
    ingress : bool
        True at the first broker visit after the publisher (counts as ingress).
    link : bool
        True if the station is a link (counted in a delivery's hops).
    children : list of Hop
    choice : bool
        True if the children are alternatives at this hop's station, one
        taken per packet (see the module docstring).
    """

    station: int
    matched: int = 0
    subscriber: int = -1
    ingress: bool = False
    link: bool = False
    children: list[Hop] = field(default_factory=list)
    choice: bool = False


class RoutePlan:
    """All route trees, flattened into arrays indexed by visit.

    Attributes
    ----------
    station, parent, depth, hops, matched, subscriber, leaves, flow : ndarray
        Per visit. ``hops`` counts the links crossed up to and including the
        visit. ``leaves`` is the number of deliveries below (and at) a
        visit, used to count deliveries lost with a dropped copy.
    child_ptr, child_idx : ndarray
        Children in CSR form: children of ``v`` are
        ``child_idx[child_ptr[v]:child_ptr[v+1]]``.
    flow_publisher, flow_topic, flow_root : ndarray
        Per flow.
    choice : ndarray of bool
        Per visit: its children are alternatives (one taken per packet).
    child_lead_s : ndarray of float
        Per visit: how much earlier than its parent's departure the copy
        leaves, s (>= 0; 0 = at the departure). A broker that writes each copy
        as it routes it (:mod:`pubsim.models.mechanisms.turns`) sends all but
        its last copy before its service ends; set once by the mechanisms
        that wire the plan, never larger than what the parent's station
        guarantees to have served by then (its lookahead holds).
    """

    def __init__(
        self, flows: Iterable[tuple[int, int, Hop]], flow_priority: Sequence[int] | np.ndarray | None = None
    ) -> None:
        """``flows``: iterable of (publisher index, topic index, root Hop);
        ``flow_priority``: priority of each flow's messages (default 0)."""
        rows: list[tuple[Any, ...]] = []
        children: list[list[int]] = []
        flow_rows: list[tuple[int, int, int]] = []
        for f, (pub, topic, root) in enumerate(flows):
            flow_rows.append((pub, topic, len(rows)))
            self._flatten(root, -1, 0, f, rows, children)
        cols = list(zip(*rows)) if rows else [()] * 9
        (
            self.station,
            self.parent,
            self.depth,
            self.matched,
            self.subscriber,
            self.ingress,
            self.link,
            self.flow,
            self.choice,
        ) = (np.asarray(c, dtype=np.int64) for c in cols)
        self.ingress = self.ingress.astype(bool)
        self.choice = self.choice.astype(bool)
        self.hops = self._count_hops()
        counts = np.array([len(c) for c in children], dtype=np.int64)
        self.child_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.child_idx = np.array([c for cs in children for c in cs], dtype=np.int64)
        self.n_children = counts
        self.child_lead_s = np.zeros(len(self.station))
        self.leaves = self._count_leaves()
        fr = np.asarray(flow_rows, dtype=np.int64).reshape(-1, 3)
        self.flow_publisher, self.flow_topic, self.flow_root = fr[:, 0], fr[:, 1], fr[:, 2]
        self.is_delivery = self.subscriber >= 0
        self.n_stations = int(self.station.max()) + 1 if len(self.station) else 0
        self.flow_priority = (
            np.zeros(len(self.flow_root), dtype=np.int64)
            if flow_priority is None
            else np.asarray(flow_priority, dtype=np.int64)
        )

    @staticmethod
    def _flatten(
        hop: Hop, parent: int, depth: int, flow: int, rows: list[tuple[Any, ...]], children: list[list[int]]
    ) -> None:
        v = len(rows)
        rows.append((hop.station, parent, depth, hop.matched, hop.subscriber, hop.ingress, hop.link, flow, hop.choice))
        children.append([])
        if hop.choice and any(c.station != hop.station for c in hop.children):
            raise ValueError(f"the alternatives of a choice visit must be at its station {hop.station}")
        for child in hop.children:
            children[v].append(len(rows))
            RoutePlan._flatten(child, v, depth + 1, flow, rows, children)

    def _count_leaves(self) -> np.ndarray:
        leaves = self.is_delivery_array().astype(np.int64)
        for v in range(len(self.station) - 1, -1, -1):  # children come after parents
            p = self.parent[v]
            if p < 0:
                continue
            if self.choice[p]:  # one alternative is taken: the largest stands for it
                leaves[p] = max(leaves[p], leaves[v])
            else:
                leaves[p] += leaves[v]
        return leaves

    def _count_hops(self) -> np.ndarray:
        hops = self.link.copy()
        for v in range(len(hops)):  # parents come before children
            if self.parent[v] >= 0:
                hops[v] += hops[self.parent[v]]
        return hops

    def is_delivery_array(self) -> np.ndarray:
        """Per visit: is a copy delivered when it leaves the visit."""
        return np.asarray(self.subscriber) >= 0

    @property
    def n_visits(self) -> int:
        return len(self.station)

    def station_edges(self) -> set[tuple[int, int]]:
        """Set of (from station, to station) pairs used by any route (a choice
        visit's alternatives are at its own station: not an edge)."""
        moves = self.parent >= 0
        moves[moves] = ~self.choice[self.parent[moves]]
        par = self.parent[moves]
        child = np.nonzero(moves)[0]
        return set(zip(self.station[par].tolist(), self.station[child].tolist()))

    def children_by_station(self, packets: Packets, to: np.ndarray | None = None) -> list[tuple[int, Packets]]:
        """Child copies of departing packets, grouped by the station they go to
        (only the stations where the boolean mask ``to`` is True, if given).

        Returns a list of ``(station, Packets)``. When every packet has the
        same number ``k`` of children and the j-th child of every packet goes
        to the same station (a broker fanning out to the same subscribers),
        the groups share the parents' arrays and only the visit differs: no
        copying.
        """
        if len(packets) == 0:
            return []
        child, station = _shared_children(packets.visit, self.child_ptr, self.child_idx, self.station)
        if len(station):
            return [
                (int(station[j]), self._led(Packets(packets.t, packets.msg, child[j], packets.size, packets.pub_t)))
                for j in range(len(station))
                if to is None or to[station[j]]
            ]
        keep = np.ones(self.n_stations, dtype=np.bool_) if to is None else to
        parent, child, dest, cuts = _children_grouped(packets.visit, self.child_ptr, self.child_idx, self.station, keep)
        groups = []
        for g in range(len(dest)):
            a, b = cuts[g], cuts[g + 1]
            idx = parent[a:b]
            groups.append(
                (
                    int(dest[g]),
                    self._led(
                        Packets(packets.t[idx], packets.msg[idx], child[a:b], packets.size[idx], packets.pub_t[idx])
                    ),
                )
            )
        return groups

    def _led(self, copies: Packets) -> Packets:
        """``copies`` (times = their parents' departures) at the times they leave: each
        ``child_lead_s`` earlier, in time order again (ties by
        :meth:`Packets.order_key`). Unchanged (no copy) where no copy leads."""
        lead = self.child_lead_s[copies.visit]
        if not lead.any():
            return copies
        out = copies.with_time(copies.t - lead)
        t = out.t
        if len(t) > 1 and np.any(t[1:] < t[:-1]):
            out = out.take(np.lexsort((out.order_key(len(self.station)), t)))
        return out

    def group_by_station(self, packets: Packets) -> list[tuple[int, Packets]]:
        """``[(station, Packets)]`` of packets at their visits' stations, order kept."""
        if len(packets) == 0:
            return []
        station = self.station[packets.visit]
        if np.all(station == station[0]):
            return [(int(station[0]), packets)]
        small = station.astype(np.uint16) if station.max() < 2**16 else station
        order = np.argsort(small, kind="stable")  # radix sort for 16-bit keys
        cuts = np.flatnonzero(np.diff(station[order])) + 1
        return [(int(station[part[0]]), packets.take(part)) for part in np.split(order, cuts)]


NO_LEAVES, ALL_LEAVES, SOME_LEAVES = 0, 1, 2


@njit(cache=True)
def leaf_state(visit: np.ndarray, is_delivery: np.ndarray) -> int:
    """Are the packets at ``visit`` delivered where they leave? ``ALL_LEAVES``,
    ``NO_LEAVES`` or ``SOME_LEAVES`` (an empty batch: ``ALL_LEAVES``), in one
    pass without the mask ``is_delivery[visit]``.

    Parameters
    ----------
    visit : numpy.ndarray
        Route visit of each packet (int64).
    is_delivery : numpy.ndarray
        Per visit: a copy is delivered when it leaves it (bool).
    """
    n = visit.shape[0]
    if n == 0:
        return ALL_LEAVES
    first = is_delivery[visit[0]]
    for i in range(1, n):
        if is_delivery[visit[i]] != first:
            return SOME_LEAVES
    return ALL_LEAVES if first else NO_LEAVES


@njit(cache=True)
def _shared_children(
    visit: np.ndarray, child_ptr: np.ndarray, child_idx: np.ndarray, station: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Child visits ``child[j, i]`` of packets at ``visit[i]`` and the station
    ``j`` of every packet's ``j``-th child goes to, when every packet has the
    same number ``k > 0`` of children and the ``j``-th children all go to the
    same station; else empty arrays (one pass, stops at the first mismatch)."""
    n = visit.shape[0]
    k = child_ptr[visit[0] + 1] - child_ptr[visit[0]]
    none = (np.empty((0, 0), dtype=np.int64), np.empty(0, dtype=np.int64))
    if k == 0:
        return none
    dest = np.empty(k, dtype=np.int64)
    for j in range(k):
        dest[j] = station[child_idx[child_ptr[visit[0]] + j]]
    child = np.empty((k, n), dtype=np.int64)
    checked = np.zeros(child_ptr.shape[0], dtype=np.bool_)  # visits whose children were checked
    for i in range(n):
        v = visit[i]
        if checked[v]:
            continue
        first = child_ptr[v]
        if child_ptr[v + 1] - first != k:
            return none
        for j in range(k):
            if station[child_idx[first + j]] != dest[j]:
                return none
        checked[v] = True
    for j in range(k):  # row by row: sequential writes
        row = child[j]
        for i in range(n):
            row[i] = child_idx[child_ptr[visit[i]] + j]
    return child, dest


@njit(cache=True)
def _children_grouped(
    visit: np.ndarray, child_ptr: np.ndarray, child_idx: np.ndarray, station: np.ndarray, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Child copies of packets at ``visit`` going to stations where ``keep``
    is True, grouped by station in one pass and a counting sort: ``(parent, child, dest, cuts)`` where
    group ``g`` goes to station ``dest[g]`` and holds the copies
    ``cuts[g]:cuts[g + 1]`` (parent packet index and child visit), in
    (parent, child) order within a group, groups by station index: what
    :meth:`RoutePlan.expand` then :meth:`RoutePlan.group_by_station` give."""
    n = visit.shape[0]
    n_stations = keep.shape[0]
    count = np.zeros(n_stations + 1, dtype=np.int64)
    total = 0
    for i in range(n):
        for k in range(child_ptr[visit[i]], child_ptr[visit[i] + 1]):
            if keep[station[child_idx[k]]]:
                count[station[child_idx[k]] + 1] += 1
                total += 1
    n_groups = 0
    for s in range(n_stations):
        if count[s + 1] > 0:
            n_groups += 1
        count[s + 1] += count[s]
    fill = count[:n_stations].copy()
    parent = np.empty(total, dtype=np.int64)
    child = np.empty(total, dtype=np.int64)
    for i in range(n):
        for k in range(child_ptr[visit[i]], child_ptr[visit[i] + 1]):
            c = child_idx[k]
            if not keep[station[c]]:
                continue
            j = fill[station[c]]
            parent[j] = i
            child[j] = c
            fill[station[c]] = j + 1
    dest = np.empty(n_groups, dtype=np.int64)
    cuts = np.empty(n_groups + 1, dtype=np.int64)
    g = 0
    for s in range(n_stations):
        if count[s + 1] > count[s]:
            dest[g] = s
            cuts[g] = count[s]
            g += 1
    cuts[n_groups] = total
    return parent, child, dest, cuts
