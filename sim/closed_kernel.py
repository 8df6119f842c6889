"""Request/reply closed loops in one compiled event loop (numba).

Why. The batch driver advances a closed loop in conservative rounds one
round-trip lookahead long (:mod:`pubsim.sim.closed_loop`): every station is
called from Python once per round, so a loop of 2 ms round trips costs one
round of Python per 2 ms simulated, whatever the window (about 10k requests
per second of wall time on the 2-core machine, issue 12). Optimistic windows
do not help: request i + W depends on reply i, so a window of n round trips
needs n sweeps. This module runs the whole closed network (sources, stations
and routes) in one event loop instead: a heap of ``(time, message x visits +
visit)`` events, the reference driver's order, and a heap of the sources'
pending releases ``(time, reply message, tie)``, the order of
:class:`pubsim.models.stations.sources.ClosedLoopSource`.

What it runs (:func:`eligible` says whether a network qualifies; otherwise
the rounds run as before). Closed-loop sources without timeouts, no
open-loop source; routes that are chains (one child per visit, a delivery
visit ends its route); stations that describe themselves by
:meth:`pubsim.sim.station.Station.compiled_spec`: one FIFO server with no
buffer limit, a link (service from the packet, delay ``latency + jitter``
kept in order, either ``jitter_on`` mode, no loss) or a broker (demand
from its cost draws). Draws come from the stations' own streams, looked
ahead in blocks and then consumed by exactly the number used, so every
number is the one the other drivers use: the records are identical
(``tests/oracles/test_drivers_agree.py``).

Each station is the FIFO step of :func:`pubsim.sim.kernels.fifo_offer`
(one server, no limit: ``start = max(arrival, free)``, the idle extra when
the server is idle) with the same operations in the same order; the link's
propagation is :func:`pubsim.sim.kernels.propagate`'s.
"""

from __future__ import annotations

import copy
import heapq
from typing import Any

import numpy as np
from numba import njit

from . import kernels as K
from .disciplines import Served
from .network import Network
from .packets import Packets

__all__ = ["CompiledClosedLoop", "eligible"]

LINK, BROKER = 0, 1
DONE, NEED_DRAWS, NEED_MARKS, NEED_OUT, NEED_ROOM = range(5)
# counters (int64[6]): events out, published out, delivered out, event heap size, due heap size, free slots
C_EV, C_PUB, C_DEL, C_HEAP, C_DUE, C_FREE = range(6)


@njit(cache=True, inline="always")
def _ev_less(ht: np.ndarray, hk: np.ndarray, i: int, j: int) -> bool:
    return ht[i] < ht[j] or (ht[i] == ht[j] and hk[i] < hk[j])


@njit(cache=True, inline="always")
def _ev_swap(ht: np.ndarray, hk: np.ndarray, hs: np.ndarray, i: int, j: int) -> None:
    ht[i], ht[j] = ht[j], ht[i]
    hk[i], hk[j] = hk[j], hk[i]
    hs[i], hs[j] = hs[j], hs[i]


@njit(cache=True, inline="always")
def _ev_push(ht: np.ndarray, hk: np.ndarray, hs: np.ndarray, n: int, t: float, k: int, s: int) -> None:
    ht[n], hk[n], hs[n] = t, k, s
    i = n
    while i > 0:
        p = (i - 1) // 2
        if not _ev_less(ht, hk, i, p):
            break
        _ev_swap(ht, hk, hs, i, p)
        i = p


@njit(cache=True, inline="always")
def _ev_pop(ht: np.ndarray, hk: np.ndarray, hs: np.ndarray, n: int) -> None:
    """Remove the root of a heap of ``n`` entries (n - 1 remain)."""
    n -= 1
    ht[0], hk[0], hs[0] = ht[n], hk[n], hs[n]
    i = 0
    while True:
        a, b = 2 * i + 1, 2 * i + 2
        m = i
        if a < n and _ev_less(ht, hk, a, m):
            m = a
        if b < n and _ev_less(ht, hk, b, m):
            m = b
        if m == i:
            break
        _ev_swap(ht, hk, hs, i, m)
        i = m


@njit(cache=True, inline="always")
def _due_less(dt: np.ndarray, dk: np.ndarray, i: int, j: int) -> bool:
    """(time, reply message, tie, source) order of pending releases."""
    if dt[i] != dt[j]:
        return dt[i] < dt[j]
    for c in range(3):
        if dk[i, c] != dk[j, c]:
            return dk[i, c] < dk[j, c]
    return False


@njit(cache=True, inline="always")
def _due_swap(dt: np.ndarray, dk: np.ndarray, i: int, j: int) -> None:
    dt[i], dt[j] = dt[j], dt[i]
    for c in range(3):
        dk[i, c], dk[j, c] = dk[j, c], dk[i, c]


@njit(cache=True, inline="always")
def _due_push(dt: np.ndarray, dk: np.ndarray, n: int, t: float, m: int, q: int, p: int) -> None:
    dt[n] = t
    dk[n, 0], dk[n, 1], dk[n, 2] = m, q, p
    i = n
    while i > 0:
        par = (i - 1) // 2
        if not _due_less(dt, dk, i, par):
            break
        _due_swap(dt, dk, i, par)
        i = par


@njit(cache=True, inline="always")
def _due_pop(dt: np.ndarray, dk: np.ndarray, n: int) -> None:
    n -= 1
    dt[0] = dt[n]
    for c in range(3):
        dk[0, c] = dk[n, c]
    i = 0
    while True:
        a, b = 2 * i + 1, 2 * i + 2
        m = i
        if a < n and _due_less(dt, dk, a, m):
            m = a
        if b < n and _due_less(dt, dk, b, m):
            m = b
        if m == i:
            break
        _due_swap(dt, dk, i, m)
        i = m


@njit(cache=True)
def closed_run(
    vstation: np.ndarray,
    vchild: np.ndarray,
    vdeliv: np.ndarray,
    vdepth: np.ndarray,
    vmatched: np.ndarray,
    vcopies: np.ndarray,
    skind: np.ndarray,
    sconst: np.ndarray,
    think: np.ndarray,
    n_pub: int,
    until: float,
    sstate: np.ndarray,
    draws: np.ndarray,
    dpos: np.ndarray,
    rsize: np.ndarray,
    rroot: np.ndarray,
    rsvc: np.ndarray,
    rpos: np.ndarray,
    sent: np.ndarray,
    psize: np.ndarray,
    ppub: np.ndarray,
    psvc: np.ndarray,
    pfree: np.ndarray,
    ht: np.ndarray,
    hk: np.ndarray,
    hs: np.ndarray,
    dt: np.ndarray,
    dk: np.ndarray,
    cnt: np.ndarray,
    o_ev: np.ndarray,
    o_evi: np.ndarray,
    o_pub: np.ndarray,
    o_pubi: np.ndarray,
    o_del: np.ndarray,
    o_deli: np.ndarray,
) -> int:
    """Run until every release before ``until`` and every event is done, or a buffer runs out.

    Station constants ``sconst[s]``: idle extra (s), latency (s; links),
    cost per byte (s), constant demand (s), stretch (brokers), idle
    receiver (links: 1.0 when only a packet that finds the receiver idle
    pays its jitter, ``LinkParams.jitter_on``). State
    ``sstate[s]``: server free time, work (s), messages served, last
    arrival after propagation. ``draws[s, j, k]``: the next draws of the
    station (links: jitter in j = 0; brokers: ingress, match, delivery),
    ``dpos[s]`` used so far. ``rsize``/``rroot``/``rsvc[p, r]``: the next
    requests of source p (size, root visit, service at each link visit of
    the chain by depth), ``rpos[p]`` used so far. Returns ``DONE`` or what
    ran out (the state is consistent: call again after refilling).
    """
    nv = vstation.shape[0]
    kd = draws.shape[2]
    kr = rsize.shape[1]
    while True:
        n_heap, n_due = cnt[C_HEAP], cnt[C_DUE]
        release = n_due > 0 and dt[0] < until and (n_heap == 0 or dt[0] <= ht[0])
        if release:
            p = dk[0, 2]
            if rpos[p] >= kr:
                return NEED_MARKS
            if cnt[C_FREE] == 0 or n_heap >= ht.shape[0]:
                return NEED_ROOM
            if cnt[C_PUB] >= o_pub.shape[0]:
                return NEED_OUT
            t = dt[0]
            _due_pop(dt, dk, n_due)
            cnt[C_DUE] = n_due - 1
            r = rpos[p]
            rpos[p] = r + 1
            seq = sent[p]
            sent[p] = seq + 1
            msg = seq * n_pub + p
            slot = pfree[cnt[C_FREE] - 1]
            cnt[C_FREE] -= 1
            psize[slot] = rsize[p, r]
            ppub[slot] = t
            for j in range(rsvc.shape[2]):
                psvc[slot, j] = rsvc[p, r, j]
            root = rroot[p, r]
            _ev_push(ht, hk, hs, n_heap, t, msg * nv + root, slot)
            cnt[C_HEAP] = n_heap + 1
            i = cnt[C_PUB]
            o_pub[i] = t
            o_pubi[i, 0], o_pubi[i, 1], o_pubi[i, 2] = msg, root, rsize[p, r]
            cnt[C_PUB] = i + 1
            continue
        if n_heap == 0:
            return DONE
        key = hk[0]
        v = key % nv
        s = vstation[v]
        if dpos[s] >= kd:
            return NEED_DRAWS
        if cnt[C_EV] >= o_ev.shape[0] or cnt[C_DEL] >= o_del.shape[0] or n_due >= dt.shape[0]:
            return NEED_OUT
        t = ht[0]
        slot = hs[0]
        _ev_pop(ht, hk, hs, n_heap)
        n_heap -= 1
        msg = key // nv
        size = psize[slot]
        k = dpos[s]
        dpos[s] = k + 1
        if skind[s] == LINK:
            svc = psvc[slot, vdepth[v]]
        else:
            svc = draws[s, 0, k] + vmatched[v] * draws[s, 1, k] + vcopies[v] * draws[s, 2, k]
            svc = svc + sconst[s, 2] * (size * (1 + vcopies[v]))
            svc = svc + sconst[s, 3]
            if sconst[s, 4] != 1.0:
                svc = svc * sconst[s, 4]
        f = sstate[s, 0]
        start = t
        if f > t:
            start = f
        else:
            svc = svc + sconst[s, 0]
        sstate[s, 1] += svc
        sstate[s, 2] += 1.0
        dep = start + svc
        sstate[s, 0] = dep
        nxt = dep
        if skind[s] == LINK:
            nxt = K.ordered_arrival(dep, sconst[s, 1], sconst[s, 1] + draws[s, 0, k], sstate[s, 3], sconst[s, 5] != 0)
            sstate[s, 3] = nxt
        i = cnt[C_EV]
        o_ev[i, 0], o_ev[i, 1], o_ev[i, 2] = t, start, dep
        o_evi[i] = v
        cnt[C_EV] = i + 1
        if vdeliv[v]:
            i = cnt[C_DEL]
            o_del[i, 0], o_del[i, 1] = nxt, ppub[slot]
            o_deli[i, 0], o_deli[i, 1], o_deli[i, 2] = msg, v, size
            cnt[C_DEL] = i + 1
            p = msg % n_pub
            _due_push(dt, dk, n_due, nxt + think[p], msg, msg // n_pub, p)
            cnt[C_DUE] = n_due + 1
            pfree[cnt[C_FREE]] = slot
            cnt[C_FREE] += 1
        else:
            _ev_push(ht, hk, hs, n_heap, nxt, msg * nv + vchild[v], slot)
            n_heap += 1
        cnt[C_HEAP] = n_heap


def eligible(net: Network) -> bool:
    """Can :class:`CompiledClosedLoop` run this network (see the module docstring)?"""
    if not net.has_closed_loop or not net.closed_loop.all() or net.confirm_delay_s is not None:
        return False  # (confirms, answered at a departure, are not compiled)
    if any(src.compiled_spec() is None for src in net.sources):
        return False
    if any((st.compiled_spec() or {}).get("kind") not in ("link", "broker") for st in net.stations):
        return False  # (a relay's spec is for the compiled cycle, pubsim.sim.cycle_kernel)
    plan = net.plan
    n_child = np.diff(plan.child_ptr)
    if np.any(plan.choice) or np.any(n_child > 1):
        return False
    deliv = plan.is_delivery
    return bool(np.all(n_child[deliv] == 0) and np.all(n_child[~deliv] == 1))


def _spec(spec: dict[str, Any] | None) -> dict[str, Any]:
    if spec is None:
        raise ValueError("the network is not one the compiled closed loop runs (see eligible())")
    return spec


def _depth(plan: Any) -> np.ndarray:
    depth = np.zeros(plan.n_visits, dtype=np.int64)
    for v in range(plan.n_visits):  # parents come before their children
        if plan.parent[v] >= 0:
            depth[v] = depth[plan.parent[v]] + 1
    return depth


class CompiledClosedLoop:
    """Runs an :func:`eligible` network's closed loop to the end in :func:`closed_run`.

    Parameters
    ----------
    net : Network
    block : int
        Draws looked ahead per station and refill, and output rows per flush;
        requests looked ahead per source: a share of it.
    """

    def __init__(self, net: Network, block: int = 65536) -> None:
        self.net = net
        self.block = int(block)
        self.marks_block = max(1024, min(self.block, 4 * self.block // max(len(net.sources), 1)))
        plan = net.plan
        self.specs: list[dict[str, Any]] = [_spec(st.compiled_spec()) for st in net.stations]
        self.sources: list[dict[str, Any]] = [_spec(src.compiled_spec()) for src in net.sources]
        nv = plan.n_visits
        self.vstation = np.asarray(plan.station, dtype=np.int64)
        self.vchild = np.full(nv, -1, dtype=np.int64)
        has = np.diff(plan.child_ptr) == 1
        self.vchild[has] = plan.child_idx[plan.child_ptr[:-1][has]]
        self.vdeliv = np.asarray(plan.is_delivery, dtype=np.bool_)
        self.vdepth = _depth(plan)
        self.vmatched = np.asarray(plan.matched, dtype=np.int64)
        self.vcopies = np.asarray(plan.n_children, dtype=np.int64)
        ns = len(net.stations)
        self.skind = np.array([LINK if sp["kind"] == "link" else BROKER for sp in self.specs], dtype=np.int64)
        self.sconst = np.zeros((ns, 6))
        for s, sp in enumerate(self.specs):
            self.sconst[s] = (
                sp["idle_extra_s"],
                sp.get("latency_s", 0.0),
                sp.get("per_byte_s", 0.0),
                sp.get("constant_s", 0.0),
                sp.get("stretch", 1.0),
                float(sp.get("idle_receiver", False)),
            )
        self.think = np.array([sp["think_s"] for sp in self.sources], dtype=np.float64)

    # --- look-ahead of draws and requests --------------------------------
    def _streams(self, s: int) -> list[Any]:
        sp = self.specs[s]
        return [sp["jitter"]] if sp["kind"] == "link" else list(sp["draws"])

    def _refill_draws(self, draws: np.ndarray, dpos: np.ndarray) -> None:
        for s in range(len(self.specs)):
            streams = self._streams(s)
            for j, stream in enumerate(streams):
                if dpos[s]:
                    stream.take(int(dpos[s]))  # consume what was used
                draws[s, j] = copy.deepcopy(stream).take(self.block)
            dpos[s] = 0

    def _refill_marks(self, rsize: np.ndarray, rroot: np.ndarray, rsvc: np.ndarray, rpos: np.ndarray) -> None:
        net, plan = self.net, self.net.plan
        for p, sp in enumerate(self.sources):
            if rpos[p]:
                sp["take_marks"](int(rpos[p]))
            sizes, topics = sp["peek_marks"](self.marks_block)
            flows = net._flow_of[p, topics]
            if np.any(flows < 0):
                raise RuntimeError(f"publisher {net.names['publisher'][p]} has no route for a topic")
            root = plan.flow_root[flows]
            rsize[p], rroot[p] = sizes, root
            visit = root
            for d in range(rsvc.shape[2]):  # link service of each request at each depth of its chain
                live = visit >= 0
                first = int(visit[0])
                if first >= 0 and np.all(visit == first):  # one route (the usual case): one call per depth
                    groups = [(int(plan.station[first]), slice(None))]
                else:
                    station = np.where(live, plan.station[np.maximum(visit, 0)], -1)
                    groups = [(s, station == s) for s in np.unique(station[live]).tolist()]
                for s, at in groups:
                    if self.skind[s] == LINK:
                        n = len(sizes[at])
                        fake = Packets(np.zeros(n), np.zeros(n), visit[at], sizes[at], np.zeros(n))
                        rsvc[p, at, d] = self.specs[s]["service"](fake)
                visit = np.where(live, self.vchild[np.maximum(visit, 0)], -1)
            rpos[p] = 0

    # --- running -----------------------------------------------------------
    def run(self, until_s: float, sink: Any) -> None:
        """Publish until ``until_s`` and simulate to the end (drain), recording into ``sink``."""
        net = self.net
        ns, n_pub, b = len(net.stations), len(net.sources), self.block
        depth = int(self.vdepth.max()) + 1
        draws, dpos = np.zeros((ns, 3, b)), np.zeros(ns, dtype=np.int64)
        br = self.marks_block
        rsize, rroot = np.zeros((n_pub, br), dtype=np.int64), np.zeros((n_pub, br), dtype=np.int64)
        rsvc, rpos = np.zeros((n_pub, br, depth)), np.zeros(n_pub, dtype=np.int64)
        sent = np.array([sp["sent"] for sp in self.sources], dtype=np.int64)
        seq0 = net._seq.copy()
        if not np.array_equal(sent, seq0):
            raise RuntimeError("closed-loop sources and the network disagree on sequence numbers")
        sstate = np.zeros((ns, 4))
        for s, sp in enumerate(self.specs):
            fs, last = sp["discipline"].fs, sp.get("last")
            sstate[s] = (sp["discipline"].free[0], fs[K.WORK], fs[K.SERVED], 0.0 if last is None else last[0])
        cap = max(16, 2 * sum(int(sp["window"]) for sp in self.sources) + 16)
        psize, ppub, psvc = np.zeros(cap, dtype=np.int64), np.zeros(cap), np.zeros((cap, depth))
        pfree = np.arange(cap - 1, -1, -1, dtype=np.int64)
        ht, hk, hs = np.zeros(cap), np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64)
        due = [(t, m, q, p) for p, sp in enumerate(self.sources) for t, m, q in sp["due"]]
        dt, dk = np.zeros(cap), np.zeros((cap, 3), dtype=np.int64)
        cnt = np.zeros(6, dtype=np.int64)
        cnt[C_FREE] = cap
        for t, m, q, p in sorted(due):
            dt[cnt[C_DUE]], dk[cnt[C_DUE]] = t, (m, q, p)
            cnt[C_DUE] += 1  # sorted: a valid heap
        o_ev, o_evi = np.zeros((b, 3)), np.zeros(b, dtype=np.int64)
        o_pub, o_pubi = np.zeros(b), np.zeros((b, 3), dtype=np.int64)
        o_del, o_deli = np.zeros((b, 2)), np.zeros((b, 3), dtype=np.int64)
        self._refill_draws(draws, dpos)
        self._refill_marks(rsize, rroot, rsvc, rpos)
        while True:
            status = closed_run(
                self.vstation, self.vchild, self.vdeliv, self.vdepth, self.vmatched, self.vcopies,
                self.skind, self.sconst, self.think, n_pub, float(until_s), sstate, draws, dpos,
                rsize, rroot, rsvc, rpos, sent, psize, ppub, psvc, pfree, ht, hk, hs, dt, dk, cnt,
                o_ev, o_evi, o_pub, o_pubi, o_del, o_deli,
            )  # fmt: skip
            self._flush(sink, cnt, o_ev, o_evi, o_pub, o_pubi, o_del, o_deli)
            if status == DONE:
                break
            if status == NEED_ROOM:  # in flight: at most the sum of the windows
                raise RuntimeError("closed loop: more messages in flight than the windows allow")
            if status == NEED_DRAWS:
                self._refill_draws(draws, dpos)
            elif status == NEED_MARKS:
                self._refill_marks(rsize, rroot, rsvc, rpos)
        for s in range(ns):  # consume the draws used since the last refill
            for stream in self._streams(s):
                if dpos[s]:
                    stream.take(int(dpos[s]))
        for p, sp in enumerate(self.sources):
            if rpos[p]:
                sp["take_marks"](int(rpos[p]))
            pending = [(float(dt[i]), int(dk[i, 0]), int(dk[i, 1])) for i in range(cnt[C_DUE]) if dk[i, 2] == p]
            heapq.heapify(pending)
            sp["update"](pending, int(sent[p]))
        net._seq[:] = sent
        for s, sp in enumerate(self.specs):  # the stations' state, as if they had run the batches
            disc, last = sp["discipline"], sp.get("last")
            disc.free[0], disc.fs[K.WORK], disc.fs[K.SERVED] = sstate[s, 0], sstate[s, 1], sstate[s, 2]
            if last is not None:
                last[0] = sstate[s, 3]

    def _flush(
        self,
        sink: Any,
        cnt: np.ndarray,
        o_ev: np.ndarray,
        o_evi: np.ndarray,
        o_pub: np.ndarray,
        o_pubi: np.ndarray,
        o_del: np.ndarray,
        o_deli: np.ndarray,
    ) -> None:
        """Hand the rows written so far to the stations' statistics and the sink."""
        net, plan = self.net, self.net.plan
        k = int(cnt[C_PUB])
        if k:
            sink.add_published(Packets(o_pub[:k], o_pubi[:k, 0], o_pubi[:k, 1], o_pubi[:k, 2], o_pub[:k]))
        k = int(cnt[C_EV])
        if k:
            order = np.argsort(self.vstation[o_evi[:k]], kind="stable")  # by station, event order kept
            visit, times = o_evi[:k][order], o_ev[:k][order]
            station = self.vstation[visit]
            cuts = np.flatnonzero(np.diff(station)) + 1
            for a, b in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [k]]).tolist()):
                t = times[a:b, 0]
                n = b - a
                served = Served(
                    Packets(t, np.zeros(n, np.int64), visit[a:b], np.zeros(n, np.int64), t),
                    t,
                    times[a:b, 1],
                    times[a:b, 2],
                    Packets.empty(),
                    np.empty(0),
                    np.empty(0, dtype=np.int64),
                )
                stats = net.stations[int(station[a])].stats
                stats.add(t, plan.ingress[visit[a:b]], served, np.empty(0), np.empty(0, np.int64))
        k = int(cnt[C_DEL])
        if k:
            sink.add_delivered(Packets(o_del[:k, 0], o_deli[:k, 0], o_deli[:k, 1], o_deli[:k, 2], o_del[:k, 1]))
        cnt[C_PUB] = cnt[C_EV] = cnt[C_DEL] = 0
