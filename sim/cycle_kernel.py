"""A strongly connected component of FIFO stations in one compiled event loop (numba).

Why. The ILDM chain's relays and bridge links form a cycle (copies flow both
ways). The optimistic solver (:mod:`pubsim.sim.optimistic`) runs it fast at
light load, but near saturation (every probe of the SYSTEMS.md §4 search)
busy periods chain across directions, windows need many sweeps and the
dense ones go to the conservative rounds, which call every member from
Python once per lookahead (5 ms bridges: about 2,000 station calls per
simulated second). This module runs the whole component for a whole chunk
in one call instead: there are no windows, no sweeps and no Python work per
lookahead. Measured (25 Nov 2026, the shared 2-core machine at load 7-16,
so CPU time; one §4 probe on placement B SF, 1.5 s with 0.5 s warm-up,
drained): at the limit (0.85 ms per publisher, 59k msg/s) the optimistic
solver with its conservative rounds took 3.4 s CPU, this loop 0.42 s (the
loop itself 0.13 s, the rest the brokers, downlinks and build); at twice
the limit's load (0.5 ms, 100k msg/s) 5.9 s against 0.70 s.

Why per-member queues and not one heap of every copy in flight (the
closed loop's design): a saturated member's copies wait for departures far
ahead, so a global heap grows with its backlog and pays a cache miss per
level; a member's outputs are already in time order, so a queue per member
and a heap of the members' heads (13 entries on the chain) do. Measured the
same way, the loop itself: 0.56 -> 0.21 s CPU at 0.5 ms, 0.21 -> 0.13 s at
0.85 ms, records unchanged.

How. A component qualifies (:func:`eligible`) when every member describes
itself by :meth:`pubsim.sim.station.Station.compiled_spec` as a relay (one
FIFO worker with no buffer limit, demand from its cost draws,
:class:`pubsim.models.mechanisms.ildm.relay.RelayStation`) or a plain link
(one FIFO transmitter with no buffer limit, service from the packet,
``latency + jitter`` kept in order, either ``jitter_on`` mode, no loss),
no visit at a member is a delivery or a choice, and child visits are numbered after their parents.
Then every arrival's departure is known the moment it is served (FIFO by arithmetic),
so the component is a plain discrete-event simulation: arrivals are taken
in (time, message x visits + visit) order, the order in which every driver
hands a station its batch, from two sources merged on the fly: the sorted
external arrivals (what upstream stations sent, in the members' inboxes)
and the copies the members send each other, in one time-ordered queue per
sending member (a FIFO's departures and a link's order-keeping arrivals
never go back in time) merged by a heap of the queues' heads. Every child copy is
later than its parent by at least the member's lookahead (>= 0) and, at
the same time, has a larger key (a child visit is numbered after its
parent), so no copy can arrive before one already taken. Arrivals at or
after the horizon stay for the next call (back into the inboxes).

Each step is :func:`pubsim.sim.kernels._open_run` (``start = max(arrival,
free)``, the idle extra when idle) and, for links,
:func:`pubsim.sim.kernels.propagate`, with the same operations in the same
order; the relay's demand is
:meth:`pubsim.models.mechanisms.ildm.relay.RelayStation.service_s`'s sum in
its order, and the link's service is the station's own
:meth:`service_s` on each (visit, size) pair, tabulated per call. Draws come
from the stations' own streams, looked ahead in blocks and then consumed by
exactly the number used (as :mod:`pubsim.sim.closed_kernel` does), and the
stations' statistics get every served arrival: the records are identical to
the other paths' (``tests/oracles/test_cycles.py``).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from numba import njit

from . import kernels as K
from .network import Network
from .packets import Packets

__all__ = ["CompiledCycle", "eligible"]

RELAY, LINK = 0, 1
DONE, NEED_DRAWS, NEED_OUT, NEED_ROOM, BACKWARDS = range(5)
# counters (int64[5]): next external arrival, heap size, (unused), departure rows out, member out of
# draws or room
C_EXT, C_HEAP, C_EV, C_DEP, C_DRAWS = range(5)
# member constants (float64[6]): idle extra, link delay (constant jitter) or latency, acks per copy,
# table entry cost, table match cost, link latency; flags (int64[3]): relay has per-visit load, link draws
# jitter, link's jitter paid only by a packet that finds the receiver idle (LinkParams.jitter_on)
M_IDLE, M_DELAY, M_ACKS, M_ENTRY, M_MATCH, M_LATENCY = range(6)
F_LOAD, F_JITTER, F_IDLE_RX = range(3)
# member state (float64[4]): server free time, work, served, last arrival after propagation
S_FREE, S_WORK, S_SERVED, S_LAST = range(4)
# member statistics (int64[7]): arrivals and ingress arrivals in the window, started, wake-ups, busy,
# waiting and blocked ticks (pubsim.sim.station.StationStats)
ST_ARRIVALS, ST_INGRESS, ST_STARTED, ST_WAKEUPS, ST_BUSY, ST_WAITING, ST_BLOCKED = range(7)

MAX_TABLE = 2**22  # visits x distinct payload sizes tabulated; more: the component is not compiled this call


@njit(cache=True, inline="always")
def _q_less(qt: np.ndarray, qk: np.ndarray, qh: np.ndarray, a: int, b: int) -> bool:
    """Is the head of member ``a``'s queue earlier than the head of ``b``'s, in (time, key) order?"""
    ta, tb = qt[a, qh[a]], qt[b, qh[b]]
    return ta < tb or (ta == tb and qk[a, qh[a]] < qk[b, qh[b]])


@njit(cache=True, inline="always")
def _h_swap(heap: np.ndarray, hpos: np.ndarray, i: int, j: int) -> None:
    heap[i], heap[j] = heap[j], heap[i]
    hpos[heap[i]] = i
    hpos[heap[j]] = j


@njit(cache=True, inline="always")
def _h_up(heap: np.ndarray, hpos: np.ndarray, qt: np.ndarray, qk: np.ndarray, qh: np.ndarray, i: int) -> None:
    while i > 0:
        p = (i - 1) // 2
        if not _q_less(qt, qk, qh, heap[i], heap[p]):
            break
        _h_swap(heap, hpos, i, p)
        i = p


@njit(cache=True, inline="always")
def _h_down(heap: np.ndarray, hpos: np.ndarray, qt: np.ndarray, qk: np.ndarray, qh: np.ndarray, n: int) -> None:
    i = 0
    while True:
        a, b = 2 * i + 1, 2 * i + 2
        m = i
        if a < n and _q_less(qt, qk, qh, heap[a], heap[m]):
            m = a
        if b < n and _q_less(qt, qk, qh, heap[b], heap[m]):
            m = b
        if m == i:
            break
        _h_swap(heap, hpos, i, m)
        i = m


@njit(cache=True)
def cycle_run(
    horizon: float,
    nv: int,
    vmember: np.ndarray,
    child_ptr: np.ndarray,
    child_idx: np.ndarray,
    vout: np.ndarray,
    vcopies: np.ndarray,
    vload: np.ndarray,
    svc_tab: np.ndarray,
    mkind: np.ndarray,
    mconst: np.ndarray,
    mflag: np.ndarray,
    mstate: np.ndarray,
    draws: np.ndarray,
    dpos: np.ndarray,
    et: np.ndarray,
    ek: np.ndarray,
    eslot: np.ndarray,
    qt: np.ndarray,
    qk: np.ndarray,
    qs: np.ndarray,
    qh: np.ndarray,
    qn: np.ndarray,
    heap: np.ndarray,
    hpos: np.ndarray,
    psize: np.ndarray,
    ppub: np.ndarray,
    cnt: np.ndarray,
    ingress: np.ndarray,
    mwin: np.ndarray,
    mstat: np.ndarray,
    o_dep: np.ndarray,
    o_depi: np.ndarray,
) -> int:
    """Serve every arrival before ``horizon``, or stop when a buffer runs out.

    External arrivals ``et``/``ek``/``eslot`` (time, ``msg * nv + visit``,
    row of ``psize``/``ppub``) are sorted; ``cnt[C_EXT]`` is the next one.
    Copies between members wait in their sender's queue ``qt``/``qk``/``qs``
    (row = member; ``qh`` its head, ``qn`` its length): a member's output
    times never decrease (a FIFO server's departures, a link's order-keeping
    propagation), so each queue is sorted by appending (ties in time put in
    key order), and the next copy is the head of the queue whose head is
    earliest, kept in the small ``heap`` of non-empty queues (``hpos``:
    each member's place in it, -1 when out; ``cnt[C_HEAP]`` its size; why:
    the module docstring). Rows of ``psize``/``ppub``: size index (column of
    ``svc_tab``) and publish time of each packet; a copy sent to another
    member takes its parent's row, so rows are never freed during a call.
    Each member's statistics over its window ``mwin[m]`` are summed in
    ``mstat[m]`` as :meth:`pubsim.sim.station.StationStats.add` sums them
    (arrivals, ingress arrivals, started, wake-ups, busy, waiting and
    blocked ticks, each message's intervals rounded to ticks: the totals do
    not depend on batching). Returns ``DONE`` or what ran out (the state is
    consistent: call again after making room or refilling the draws).
    """
    n_ext = et.shape[0]
    kd = draws.shape[2]
    qcap = qt.shape[1]
    while True:
        n_heap = cnt[C_HEAP]
        e = cnt[C_EXT]
        r = heap[0]
        from_q = False
        if n_heap > 0:
            h = qh[r]
            from_q = e >= n_ext or qt[r, h] < et[e] or (qt[r, h] == et[e] and qk[r, h] < ek[e])
        if from_q:
            h = qh[r]
            t, key, slot = qt[r, h], qk[r, h], qs[r, h]
        elif e < n_ext:
            t, key, slot = et[e], ek[e], eslot[e]
        else:
            return DONE
        if not t < horizon:
            return DONE
        v = key % nv
        m = vmember[v]
        if dpos[m] >= kd:
            cnt[C_DRAWS] = m
            return NEED_DRAWS
        if cnt[C_DEP] >= o_dep.shape[0]:
            return NEED_OUT
        n_child = child_ptr[v + 1] - child_ptr[v]
        if qh[m] + qn[m] + n_child > qcap:
            if qh[m] > 0:  # move the queue to the front of its row
                h0, n0 = qh[m], qn[m]
                for j in range(n0):
                    qt[m, j], qk[m, j], qs[m, j] = qt[m, h0 + j], qk[m, h0 + j], qs[m, h0 + j]
                qh[m] = 0
            if qn[m] + n_child > qcap:
                cnt[C_DRAWS] = m
                return NEED_ROOM
            continue
        if from_q:
            qh[r] += 1
            qn[r] -= 1
            if qn[r] == 0:  # the queue leaves the heap
                qh[r] = 0
                n_heap -= 1
                hpos[r] = -1
                if n_heap > 0:
                    heap[0] = heap[n_heap]
                    hpos[heap[0]] = 0
                    _h_down(heap, hpos, qt, qk, qh, n_heap)
            else:
                _h_down(heap, hpos, qt, qk, qh, n_heap)
        else:
            cnt[C_EXT] = e + 1
        k = dpos[m]
        if mkind[m] == RELAY:
            dpos[m] = k + 1
            control = draws[m, 2, k]
            per_copy = draws[m, 1, k] + mconst[m, M_ACKS] * control
            svc = draws[m, 0, k] + vcopies[v] * per_copy
            if mflag[m, F_LOAD]:
                svc = svc + vload[v, 0] * control
                svc = svc + vload[v, 1] * mconst[m, M_ENTRY]
                svc = svc + vload[v, 2] * mconst[m, M_MATCH]
        else:
            svc = svc_tab[v, psize[slot]]
        f = mstate[m, S_FREE]
        start = t
        if f > t:
            start = f
        else:
            svc = svc + mconst[m, M_IDLE]
        mstate[m, S_WORK] += svc
        mstate[m, S_SERVED] += 1.0
        dep = start + svc
        mstate[m, S_FREE] = dep
        nxt = dep
        if mkind[m] == LINK:
            delay = mconst[m, M_DELAY]
            if mflag[m, F_JITTER]:
                dpos[m] = k + 1
                delay = mconst[m, M_DELAY] + draws[m, 0, k]
            nxt = K.ordered_arrival(dep, mconst[m, M_LATENCY], delay, mstate[m, S_LAST], mflag[m, F_IDLE_RX] != 0)
            mstate[m, S_LAST] = nxt
        if not nxt >= t:
            return BACKWARDS
        w0, w1 = mwin[m, 0], mwin[m, 1]
        if t >= w0 and t < w1:  # K.window_counts and K.service_window_stats, one message (admitted at t)
            mstat[m, ST_ARRIVALS] += 1
            if ingress[v]:
                mstat[m, ST_INGRESS] += 1
        if start >= w0 and start < w1:
            mstat[m, ST_STARTED] += 1
            if start == t:
                mstat[m, ST_WAKEUPS] += 1
        mstat[m, ST_BUSY] += K._ticks(start, dep, w0, w1)
        mstat[m, ST_WAITING] += K._ticks(t, start, w0, w1)
        mstat[m, ST_BLOCKED] += K._ticks(t, t, w0, w1)
        msg = key // nv
        if vout[v]:
            i = cnt[C_DEP]
            o_dep[i, 0], o_dep[i, 1] = nxt, ppub[slot]
            o_depi[i, 0], o_depi[i, 1], o_depi[i, 2] = msg, v, psize[slot]
            cnt[C_DEP] = i + 1
        for j in range(child_ptr[v], child_ptr[v + 1]):
            c = child_idx[j]
            if vmember[c] < 0:
                continue
            ck = msg * nv + c
            h = qh[m]
            i = h + qn[m]
            if qn[m] > 0 and not qt[m, i - 1] <= nxt:
                return BACKWARDS  # an output earlier than the member's last one
            while i > h and qt[m, i - 1] == nxt and qk[m, i - 1] > ck:  # ties in time: key order
                qt[m, i], qk[m, i], qs[m, i] = qt[m, i - 1], qk[m, i - 1], qs[m, i - 1]
                i -= 1
            qt[m, i], qk[m, i], qs[m, i] = nxt, ck, slot
            qn[m] += 1
            if hpos[m] < 0:  # the queue joins the heap
                heap[n_heap] = m
                hpos[m] = n_heap
                n_heap += 1
                _h_up(heap, hpos, qt, qk, qh, hpos[m])
            elif i == h:  # a new head, earlier than the old one
                _h_up(heap, hpos, qt, qk, qh, hpos[m])
        cnt[C_HEAP] = n_heap


def _member_spec(station: Any) -> dict[str, Any] | None:
    spec = station.compiled_spec()
    if spec is None or spec.get("kind") not in ("relay", "link"):
        return None
    return spec


def eligible(network: Network, members: list[int]) -> bool:
    """Can :class:`CompiledCycle` run this component (see the module docstring)?"""
    if network.has_closed_loop:
        return False
    stations = [network.stations[s] for s in members]
    if any(_member_spec(st) is None for st in stations):
        return False
    plan = network.plan
    at_member = np.isin(plan.station, np.asarray(members, dtype=np.int64))
    if np.any(plan.is_delivery[at_member]) or np.any(plan.choice[at_member]):
        return False
    if np.any(plan.child_lead_s > 0):  # copies that leave before their parent's departure: not compiled
        return False
    parent = np.repeat(np.arange(plan.n_visits), np.diff(plan.child_ptr))
    return bool(np.all(plan.child_idx > parent))  # so a copy sent at no delay still comes after its parent


class CompiledCycle:
    """Advances an :func:`eligible` component in :func:`cycle_run`, one call per horizon.

    Parameters
    ----------
    network : Network
    members : list of int
        Station indices of the component.
    block : int
        Most draws looked ahead per member and refill, output rows per
        flush, and first room of each member's queue (small values exercise
        the refills in tests).
    """

    def __init__(self, network: Network, members: list[int], block: int = 65536) -> None:
        self.net = network
        self.members = list(members)
        self.block = int(block)
        plan = network.plan
        nv = plan.n_visits
        ns = len(network.stations)
        specs = [_member_spec(network.stations[s]) for s in self.members]
        if any(sp is None for sp in specs):
            raise ValueError("the component is not one the compiled cycle runs (see eligible())")
        self.specs: list[dict[str, Any]] = [sp for sp in specs if sp is not None]
        member_of = np.full(ns, -1, dtype=np.int64)
        member_of[self.members] = np.arange(len(self.members))
        self.vmember = member_of[np.asarray(plan.station, dtype=np.int64)]
        self.outside = member_of < 0
        self.child_ptr = np.asarray(plan.child_ptr, dtype=np.int64)
        self.child_idx = np.asarray(plan.child_idx, dtype=np.int64)
        child_station = np.asarray(plan.station, dtype=np.int64)[self.child_idx]
        parent = np.repeat(np.arange(nv), np.diff(self.child_ptr))
        self.vout = np.zeros(nv, dtype=np.bool_)
        self.vout[parent[self.outside[child_station]]] = True
        self.vcopies = (plan.n_children - 1).astype(np.float64)
        nm = len(self.members)
        self.mkind = np.array([RELAY if sp["kind"] == "relay" else LINK for sp in self.specs], dtype=np.int64)
        self.mconst = np.zeros((nm, 6))
        self.mflag = np.zeros((nm, 3), dtype=np.int64)
        self.vload = np.zeros((nv, 3))
        for m, sp in enumerate(self.specs):
            self.mconst[m, M_IDLE] = sp["idle_extra_s"]
            if sp["kind"] == "relay":
                self.mconst[m, M_ACKS] = sp["acks"]
                self.mconst[m, M_ENTRY], self.mconst[m, M_MATCH] = sp["table_entry_s"], sp["table_match_s"]
                load = sp["load"]
                if load is not None:
                    self.mflag[m, F_LOAD] = 1
                    at = np.flatnonzero(self.vmember == m)
                    for j, name in enumerate(("inbound_acks", "table_entries", "table_matches")):
                        self.vload[at, j] = np.asarray(load[name])[at]
            else:
                jitter = sp["jitter"]
                self.mflag[m, F_JITTER] = 0 if jitter.dist.is_constant else 1
                # LinkStation.after_service: latency + the constant jitter (one sum), or latency + each draw
                self.mconst[m, M_DELAY] = (
                    sp["latency_s"] + jitter.dist.mean if jitter.dist.is_constant else sp["latency_s"]
                )
                self.mconst[m, M_LATENCY] = sp["latency_s"]
                self.mflag[m, F_IDLE_RX] = 1 if sp.get("idle_receiver", False) else 0
        self.ingress = np.asarray(plan.ingress, dtype=np.bool_)
        self.mwin = np.array([[network.stations[s].stats.w0, network.stations[s].stats.w1] for s in self.members])
        self._sizes = np.zeros(0, dtype=np.int64)
        self._svc_tab = np.zeros((nv, 0))

    # --- per-call inputs -----------------------------------------------------
    def _streams(self, m: int) -> list[Any]:
        sp = self.specs[m]
        if sp["kind"] == "relay":
            return list(sp["draws"])
        return [sp["jitter"]] if self.mflag[m, F_JITTER] else []

    def _refill(self, draws: np.ndarray, dpos: np.ndarray, members: Any) -> None:
        """Consume the draws the ``members`` used so far and look their next block ahead."""
        for m in members:
            for j, stream in enumerate(self._streams(m)):
                if dpos[m]:
                    stream.take(int(dpos[m]))
                draws[m, j] = copy.deepcopy(stream).take(draws.shape[2])
            dpos[m] = 0

    def _consume(self, dpos: np.ndarray) -> None:
        for m in range(len(self.members)):
            for stream in self._streams(m):
                if dpos[m]:
                    stream.take(int(dpos[m]))
            dpos[m] = 0

    def _table(self, sizes: np.ndarray) -> bool:
        """Link service of every member link visit at each payload size in ``sizes`` (a
        superset of the last table's sizes keeps it); False with too many sizes."""
        if np.all(np.isin(sizes, self._sizes)):
            return True
        sizes = np.union1d(self._sizes, sizes)
        nv = self.net.plan.n_visits
        if nv * len(sizes) > MAX_TABLE:
            return False
        tab = np.zeros((nv, len(sizes)))
        for m, sp in enumerate(self.specs):
            if sp["kind"] != "link":
                continue
            at = np.flatnonzero(self.vmember == m)
            if not len(at):
                continue
            visit = np.repeat(at, len(sizes))
            size = np.tile(sizes, len(at))
            n = len(visit)
            fake = Packets(np.zeros(n), np.zeros(n, np.int64), visit, size, np.zeros(n))
            tab[at] = np.asarray(sp["service"](fake), dtype=np.float64).reshape(len(at), len(sizes))
        self._sizes, self._svc_tab = sizes, tab
        return True

    # --- running -------------------------------------------------------------
    def advance(self, inbox: list[list[Packets]], horizon: float) -> list[tuple[int, Packets]] | None:
        """Serve every arrival before ``horizon`` at the members (their inboxes are
        replaced by what is left); returns the child copies sent outside, by
        station, or None (nothing done) when the payload sizes are too many to
        tabulate."""
        parts = [p for s in self.members for p in inbox[s] if len(p)]
        if not parts:
            return []
        ext = Packets.concat(parts)
        if not self._table(np.unique(ext.size)):
            return None
        for s in self.members:
            inbox[s] = []
        plan = self.net.plan
        nv = plan.n_visits
        key = ext.msg * nv + ext.visit
        order = np.lexsort((key, ext.t))
        et, ek = ext.t[order], key[order]
        n_ext = len(et)
        psize = np.searchsorted(self._sizes, ext.size[order]).astype(np.int64)
        ppub = ext.pub_t[order]
        eslot = np.arange(n_ext, dtype=np.int64)
        nm = len(self.members)
        # draws looked ahead per member: about a call's arrivals, at most ``block``, at most 4M in all
        b = int(min(self.block, max(1024, n_ext), max(1024, 2**22 // (3 * nm))))
        b = max(b, 1)
        draws, dpos = np.zeros((nm, 3, b)), np.zeros(nm, dtype=np.int64)
        self._refill(draws, dpos, range(nm))
        mstate = np.zeros((nm, 4))
        for m, sp in enumerate(self.specs):
            disc, last = sp["discipline"], sp.get("last")
            mstate[m] = (disc.free[0], disc.fs[K.WORK], disc.fs[K.SERVED], 0.0 if last is None else last[0])
        qcap = int(min(self.block, max(1024, n_ext // 4), max(1024, 2**21 // nm)))  # per member; doubles if short
        qt, qk, qs = np.zeros((nm, qcap)), np.zeros((nm, qcap), dtype=np.int64), np.zeros((nm, qcap), dtype=np.int64)
        qh, qn = np.zeros(nm, dtype=np.int64), np.zeros(nm, dtype=np.int64)
        heap, hpos = np.zeros(nm, dtype=np.int64), np.full(nm, -1, dtype=np.int64)
        cnt = np.zeros(5, dtype=np.int64)
        rows = min(self.block, 4 * n_ext + 16)
        mstat = np.zeros((nm, 7), dtype=np.int64)
        o_dep, o_depi = np.zeros((rows, 2)), np.zeros((rows, 3), dtype=np.int64)
        departed: list[Packets] = []
        while True:
            status = cycle_run(
                float(horizon), nv, self.vmember, self.child_ptr, self.child_idx, self.vout, self.vcopies,
                self.vload, self._svc_tab, self.mkind, self.mconst, self.mflag, mstate, draws, dpos,
                et, ek, eslot, qt, qk, qs, qh, qn, heap, hpos, psize, ppub, cnt, self.ingress, self.mwin, mstat,
                o_dep, o_depi,
            )  # fmt: skip
            self._flush(cnt, o_dep, o_depi, departed)
            if status == DONE:
                break
            if status == BACKWARDS:
                raise RuntimeError("a station of a cycle sent a copy earlier than it arrived (negative service)")
            if status == NEED_DRAWS:
                self._refill(draws, dpos, [int(cnt[C_DRAWS])])
            elif status == NEED_ROOM:  # a member's queue is full: twice the room for every member
                qt, qk, qs = (np.concatenate([a, np.empty_like(a)], axis=1) for a in (qt, qk, qs))
        self._consume(dpos)
        self._add_stats(mstat)
        for m, sp in enumerate(self.specs):  # the stations' state, as if they had served the batches
            disc, last = sp["discipline"], sp.get("last")
            disc.free[0], disc.fs[K.WORK], disc.fs[K.SERVED] = mstate[m, S_FREE], mstate[m, S_WORK], mstate[m, S_SERVED]
            if last is not None:
                last[0] = mstate[m, S_LAST]
        self._leave(inbox, ext, order, cnt, qt, qk, qs, qh, qn, psize, ppub)
        out = Packets.concat(departed)
        return plan.children_by_station(out, self.outside) if len(out) else []

    def _flush(self, cnt: np.ndarray, o_dep: np.ndarray, o_depi: np.ndarray, departed: list[Packets]) -> None:
        """Keep the departures written so far."""
        k = int(cnt[C_DEP])
        if k:
            d, di = o_dep[:k], o_depi[:k]
            departed.append(
                Packets(d[:, 0].copy(), di[:, 0].copy(), di[:, 1].copy(), self._sizes[di[:, 2]], d[:, 1].copy())
            )
        cnt[C_DEP] = 0

    def _add_stats(self, mstat: np.ndarray) -> None:
        """Add the members' tallies of the call to their statistics."""
        for m, s in enumerate(self.members):
            st = self.net.stations[s].stats
            arrivals, ingress, started, wakeups, busy, waiting, blocked = (int(x) for x in mstat[m])
            st.arrivals += arrivals
            st.ingress_arrivals += ingress
            st.served += started
            st.wakeups += wakeups
            st.busy_ticks += busy
            st.waiting_ticks += waiting
            st.blocked_ticks += blocked

    def _leave(
        self,
        inbox: list[list[Packets]],
        ext: Packets,
        order: np.ndarray,
        cnt: np.ndarray,
        qt: np.ndarray,
        qk: np.ndarray,
        qs: np.ndarray,
        qh: np.ndarray,
        qn: np.ndarray,
        psize: np.ndarray,
        ppub: np.ndarray,
    ) -> None:
        """Arrivals not served (at or after the horizon) back into the members' inboxes."""
        nv = self.net.plan.n_visits
        rest = order[int(cnt[C_EXT]) :]
        left = [ext.take(rest)] if len(rest) else []
        for m in np.flatnonzero(qn).tolist():  # copies in flight between members
            at = slice(int(qh[m]), int(qh[m] + qn[m]))
            key, slot = qk[m, at], qs[m, at]
            left.append(Packets(qt[m, at].copy(), key // nv, key % nv, self._sizes[psize[slot]], ppub[slot]))
        if left:
            for s, packets in self.net.plan.group_by_station(Packets.concat(left)):
                inbox[s].append(packets)
