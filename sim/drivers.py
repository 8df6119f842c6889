"""The two drivers: the fast batch path and the event-by-event reference.

Both run the same stations (:mod:`pubsim.sim.station`) on the same route plan and
hand every station its arrivals in the same order: by time, then by (message,
visit). They differ only in how they get there.

* :class:`BatchDriver` processes whole batches station by station. Time is cut
  into chunks of publications; a station processes every arrival earlier than
  the chunk's end (its *horizon*) and keeps later ones for the next chunk.
  Stations are visited in topological order of their strongly connected
  components. A cycle (two brokers forwarding to each other) runs in one
  compiled event loop per chunk when its members are plain FIFO relays and
  links (:mod:`pubsim.sim.cycle_kernel`); otherwise it is advanced by
  optimistic windows solved to a fixed point with rollback
  (:mod:`pubsim.sim.optimistic`, which explains the choice), falling back to
  conservative rounds whose horizons come from a lookahead bound (Chandy &
  Misra 1979): a station may process arrivals earlier than the least time any
  packet can still reach it.
* :class:`ReferenceDriver` is a SimPy simulation with one event per hop in
  global time order, ties broken by the same (message, visit) key. It exists
  to test the fast path.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Generator
from typing import Any

import networkx as nx
import numpy as np
import simpy

from .closed_kernel import CompiledClosedLoop, eligible
from .closed_loop import Components, closed_loop_bounds
from .cycle_kernel import CompiledCycle
from .cycle_kernel import eligible as cycle_eligible
from .network import Network
from .optimistic import CycleSolver, CycleStats, Outcome, split_output
from .packets import Packets
from .records import RecordSink, StreamSink
from .station import Station, StationOutput

Sink = RecordSink | StreamSink
Progress = Callable[[float, float], object]

__all__ = ["BatchDriver", "ReferenceDriver"]


def _route(network: Network, sink: Sink, station: Station, out: StationOutput) -> list[tuple[int, Packets]]:
    """Record deliveries and drops of a station's output.

    Returns the child copies as ``[(station index, Packets)]``."""
    return _record(network, sink, station.index, split_output(network, out))


def _record(network: Network, sink: Sink, s: int, outcome: Outcome) -> list[tuple[int, Packets]]:
    """Record the drops and deliveries of station ``s``'s split output; return its child copies."""
    out = outcome.output
    if len(out.dropped):
        sink.add_dropped(out.dropped, out.drop_t, s, out.drop_code)
    if network.confirm_delay_s is not None and network.has_closed_loop:
        network.on_departed(out.departed)  # confirms (issued where a message departs)
    if outcome.delivered is not None:
        sink.add_delivered(outcome.delivered)
        if network.has_closed_loop:
            network.on_delivered(outcome.delivered)
    return outcome.children


class BatchDriver:
    """Fast path: batches of messages, FIFO hops by arithmetic.

    Parameters
    ----------
    network : sim.network.Network
    sink : sim.records.RecordSink or sim.records.StreamSink
    chunk_messages : int
        Target publications per chunk; bounds memory for long runs.
    cycles : {"compiled", "optimistic", "conservative"}
        How strongly connected components are advanced: in one compiled
        event loop per chunk where the members qualify
        (:mod:`pubsim.sim.cycle_kernel`), else by optimistic windows
        (:mod:`pubsim.sim.optimistic`); optimistic windows only; or
        conservative rounds only.
    cycle_window_messages : int
        Arrivals per optimistic window (the window adapts below it).
    cycle_max_sweeps : int
        Sweeps over a component before a window is declared not converging.
    cycle_dense_arrivals : float
        Above this many arrivals per cycle lookahead, conservative rounds
        are cheaper and used (:meth:`pubsim.sim.optimistic.CycleSolver.dense`).
    cycle_block : int
        Draws looked ahead, output rows and first queue room per member of
        the compiled cycle (:class:`pubsim.sim.cycle_kernel.CompiledCycle`).
    closed_loop : {"compiled", "rounds"}
        How a request/reply closed loop is run to the end: in one compiled
        event loop when the network qualifies
        (:mod:`pubsim.sim.closed_kernel`), else (or with "rounds") by
        conservative rounds one round-trip lookahead long.
    fused_stations : bool
        Serve the stations that qualify in one compiled pass per batch
        (:mod:`pubsim.sim.station_pass`; the same records); False: the
        plain path everywhere (for comparisons).
    """

    def __init__(
        self,
        network: Network,
        sink: Sink,
        *,
        chunk_messages: int = 250_000,
        cycles: str = "compiled",
        cycle_window_messages: int = 65536,
        cycle_max_sweeps: int = 12,
        cycle_dense_arrivals: float = 150.0,
        cycle_block: int = 65536,
        closed_loop: str = "compiled",
        fused_stations: bool = True,
    ) -> None:
        if cycles not in ("compiled", "optimistic", "conservative"):
            raise ValueError(f"cycles must be 'compiled', 'optimistic' or 'conservative', got {cycles!r}")
        if closed_loop not in ("compiled", "rounds"):
            raise ValueError(f"closed_loop must be 'compiled' or 'rounds', got {closed_loop!r}")
        self.closed_compiled = closed_loop == "compiled" and eligible(network)
        self.net = network
        self.sink = sink
        for station in network.stations:
            station.fused_pass = bool(fused_stations)  # one compiled pass where a station qualifies
        self.chunk_messages = int(chunk_messages)
        self.inbox: list[list[Packets]] = [[] for _ in network.stations]
        self._components = self._station_components()
        self._cycle_cache: dict[tuple[int, ...], tuple[np.ndarray, list[list[int]]]] = {}
        self._solvers: dict[tuple[int, ...], CycleSolver] = {}
        self._compiled: dict[tuple[int, ...], CompiledCycle] = {}
        for members, cyclic, sub in self._components:
            stations = [network.stations[s] for s in members]
            if cyclic and cycles == "compiled" and cycle_eligible(network, members):
                self._compiled[tuple(members)] = CompiledCycle(network, members, block=cycle_block)
            if cyclic and sub is not None and cycles != "conservative" and CycleSolver.supported(stations):
                dist, _ = self._cycle_tables(members, sub)
                self._solvers[tuple(members)] = CycleSolver(
                    network,
                    members,
                    sub,
                    max_sweeps=cycle_max_sweeps,
                    window_messages=cycle_window_messages,
                    cycle_lookahead_s=float(np.diag(dist).min()),
                    dense_arrivals=cycle_dense_arrivals,
                )

    @property
    def cycle_stats(self) -> dict[tuple[str, ...], CycleStats]:
        """What the optimistic solver did per cyclic component (by member names)."""
        names = [st.name for st in self.net.stations]
        return {tuple(names[s] for s in key): sol.stats for key, sol in self._solvers.items()}

    @property
    def compiled_cycles(self) -> list[tuple[str, ...]]:
        """Cyclic components run by the compiled event loop (member names)."""
        names = [st.name for st in self.net.stations]
        return [tuple(names[s] for s in key) for key in self._compiled]

    def _station_components(self) -> Components:
        g = nx.DiGraph()
        g.add_nodes_from(range(len(self.net.stations)))
        g.add_edges_from(self.net.plan.station_edges())
        cond = nx.condensation(g)
        comps: Components = []
        # ties broken by station index, so simultaneous drops at independent
        # stations are recorded in the reference driver's (visit) order
        for c in nx.lexicographical_topological_sort(cond, key=lambda c: min(cond.nodes[c]["members"])):
            members = sorted(cond.nodes[c]["members"])
            cyclic = len(members) > 1 or g.has_edge(members[0], members[0])
            comps.append((members, cyclic, g.subgraph(members).copy() if cyclic else None))
        return comps

    # --- driving ---------------------------------------------------------
    def run(self, until_s: float, *, drain: bool = True, progress: Progress | None = None) -> Sink:
        """Publish until ``until_s`` and process; with ``drain`` let every
        message finish. ``progress(done_s, total_s)`` is called per chunk."""
        chunk_s = self._chunk_s(until_s)
        if self.closed_compiled and drain:
            closed_loop_bounds(self.net, self._components)  # the same checks (ConfigError) as the rounds
            CompiledClosedLoop(self.net).run(until_s, self.sink)
            if progress:
                progress(until_s, until_s)
            return self.sink
        if self.net.has_closed_loop:
            return self._run_closed(until_s, chunk_s, drain, progress)
        t0 = 0.0
        while t0 < until_s:
            t1 = min(t0 + chunk_s, until_s)
            self._publish(t1)
            self._process_all(t1)
            t0 = t1
            if progress:
                progress(t1, until_s)
        if drain:
            self._publish(until_s)
            self._process_all(math.inf)
        return self.sink

    def _chunk_s(self, until_s: float) -> float:
        """Chunk length, s: ``chunk_messages`` at the steady publication rate
        plus the finite schedules' messages spread over the run. A schedule
        counts as its number of messages, not ``n / span``: many messages at
        one instant must not make the chunks tiny (issue 12)."""
        rate = self.net.mean_publish_rate_per_s
        if until_s > 0 and math.isfinite(until_s):
            rate += self.net.scheduled_before(until_s) / until_s
        return until_s if rate <= 0 else max(self.chunk_messages / rate, 1e-9)

    def _run_closed(self, until_s: float, chunk_s: float, drain: bool, progress: Progress | None) -> Sink:
        """Closed loops (request/reply): conservative synchronisation.

        Every source is published up to a safe time T; a station s is then
        processed up to ``T + d[s]``, with ``d[s]`` the least lookahead from
        any route root to s (no packet not yet published can reach s
        earlier). Every reply earlier than ``T + L``, ``L`` the least such
        bound at the reply's delivery station plus its own lookahead, is then
        known, so closed-loop sources can release requests up to ``T + L``
        (Chandy & Misra 1979; needs L > 0: positive link latency).
        """
        dist, step = closed_loop_bounds(self.net, self._components)
        t = 0.0
        while t < until_s:
            t = min(t + min(step, chunk_s), until_s)
            self._publish(t)
            for members, cyclic, sub in self._components:
                if cyclic and sub is not None:  # every member up to its own bound (:mod:`.closed_loop`),
                    order = sorted(members, key=lambda s: (dist[s], s))  # swept nearest the roots first
                    self._conservative_cycle(order, sub, np.array([min(t + dist[s], until_s) for s in order]))
                else:
                    self._process_station(members[0], min(t + dist[members[0]], until_s))
            if progress:
                progress(t, until_s)
        if drain:
            self._publish(until_s)
            self._process_all(math.inf)
        return self.sink

    def _publish(self, until_s: float) -> None:
        parts = self.net.publication_parts(until_s)
        if parts:
            self.sink.add_published(Packets.concat(parts))
            for part in parts:  # per publisher: no regrouping of the whole (a station's inbox is sorted anyway)
                self._dispatch(self.net.plan.group_by_station(part))

    def _dispatch(self, groups: list[tuple[int, Packets]]) -> None:
        for station, packets in groups:
            self.inbox[station].append(packets)

    def _process_all(self, horizon: float) -> None:
        for members, cyclic, sub in self._components:
            if cyclic:
                self._process_cycle(members, sub, horizon)
            else:
                self._process_station(members[0], horizon)

    def _process_station(self, s: int, horizon: float) -> bool:
        station = self.net.stations[s]
        parts = self.inbox[s]
        if not parts and not station.discipline.event_driven:
            return False
        split = [p.split_before(horizon) for p in parts]  # slices, no copy, for time-ordered parts
        batch = Packets.concat(Packets.interleave_shared([e for e, _ in split]))
        self.inbox[s] = [late for _, late in split if len(late)]
        n_early = len(batch)
        if n_early == 0 and not (station.discipline.event_driven and station.next_wake() is not None):
            return False
        out = station.process(batch.sorted(self.net.plan.n_visits), horizon)
        self._dispatch(_route(self.net, self.sink, station, out))
        return True

    def _pending_s(self, s: int) -> float:
        t = min((float(p.t.min()) for p in self.inbox[s] if len(p)), default=math.inf)
        wake = self.net.stations[s].next_wake()
        return t if wake is None else min(t, wake)

    def _process_cycle(self, members: list[int], sub: nx.DiGraph, horizon: float) -> None:
        """Advance a strongly connected component to ``horizon``: by optimistic
        windows (:mod:`pubsim.sim.optimistic`) if its stations can be rolled
        back, else by conservative rounds; in one compiled call where it qualifies
        (:mod:`pubsim.sim.cycle_kernel`)."""
        compiled = self._compiled.get(tuple(members))
        if compiled is not None:
            out = compiled.advance(self.inbox, horizon)
            if out is not None:
                self._dispatch(out)
                return
        solver = self._solvers.get(tuple(members))
        if solver is None:
            self._conservative_cycle(members, sub, horizon)
            return
        while True:
            parts = [p.t for s in members for p in self.inbox[s] if len(p)]
            wakes = [w for s in members if (w := self.net.stations[s].next_wake()) is not None]
            if not parts and not wakes:
                return
            pending = np.concatenate(parts + [np.array(wakes)])
            if not float(pending.min()) < horizon:
                return
            arrivals = np.concatenate(parts) if parts else pending
            bound = solver.next_bound(arrivals, horizon)
            by_member = [np.concatenate(ts) if ts else arrivals[:0] for ts in self._member_times(members)]
            if solver.dense(by_member, bound):
                solver.stats.dense_windows += 1
                self._conservative_cycle(members, sub, bound)
                done = True
            else:
                done = self._cycle_window(solver, members, sub, bound)
            if done and bound >= horizon:
                return

    def _member_times(self, members: list[int]) -> list[list[np.ndarray]]:
        """Arrival times held in each member's inbox."""
        return [[p.t for p in self.inbox[s] if len(p)] for s in members]

    def _cycle_window(self, solver: CycleSolver, members: list[int], sub: nx.DiGraph, bound: float) -> bool:
        """One optimistic window up to ``bound``; on no convergence, a smaller
        window next time (returns False: nothing done), or conservative
        rounds for a window already small."""
        external: dict[int, Packets] = {}
        for s in members:
            split = [p.split_before(bound) for p in self.inbox[s]]
            external[s] = Packets.concat([e for e, _ in split])
            self.inbox[s] = [late for _, late in split if len(late)]
        outcomes = solver.solve(external, bound)
        solver.stats.windows += 1
        if outcomes is None:
            for s in members:
                if len(external[s]):
                    self.inbox[s].append(external[s])
            n = sum(len(p) for p in external.values())
            if solver.window > solver.min_window:  # the window shrinks strictly down to min_window
                solver.window = max(solver.min_window, min(solver.window, n) // 2)
                solver.stats.split_windows += 1
                return False
            solver.stats.fallback_windows += 1
            self._conservative_cycle(members, sub, bound)
            return True
        if solver.stats.sweeps[-1] <= solver.max_sweeps // 2:  # grow back only with room to spare
            solver.window = min(solver.base_window, 2 * solver.window)
        for s in members:
            for dest, packets in _record(self.net, self.sink, s, outcomes[s]):
                if dest in solver.is_member:
                    packets = packets.split_before(bound)[1]  # the early ones were arrivals of this window
                if len(packets):
                    self.inbox[dest].append(packets)
        return True

    def _conservative_cycle(self, members: list[int], sub: nx.DiGraph, horizon: float | np.ndarray) -> None:
        """Advance a strongly connected component to ``horizon`` by conservative rounds.

        Gauss-Seidel sweeps: each member is processed up to its current bound
        ``h[u] = min(horizon, min_s pend[s] + D[s, u])`` (``D`` the least
        lookahead sum over paths s -> ... -> u, :func:`_lookahead_closure`),
        recomputed after every member that advanced, so a sweep carries the
        progress of earlier members to later ones. ``horizon`` may be one per
        member (closed loops: each up to its own lookahead bound from the roots,
        which no member's pending work can undercut)."""
        dist, succ = self._cycle_tables(members, sub)
        pend = np.array([self._pending_s(s) for s in members])
        limit = np.broadcast_to(np.asarray(horizon, dtype=float), pend.shape)
        while (pend < limit).any():
            progressed = False
            for i, s in enumerate(members):
                if pend[i] >= limit[i]:
                    continue
                h = min(float(limit[i]), float((pend + dist[:, i]).min()))
                if pend[i] >= h:
                    continue
                progressed |= self._process_station(s, h)
                for j in succ[i]:
                    pend[j] = self._pending_s(members[j])
            if not progressed:
                names = [self.net.stations[s].name for s in members]
                raise RuntimeError(f"stations {names} form a cycle with zero delay; give a link latency > 0")

    def _cycle_tables(self, members: list[int], sub: nx.DiGraph) -> tuple[np.ndarray, list[list[int]]]:
        key = tuple(members)
        if key not in self._cycle_cache:
            look = [self.net.stations[s].lookahead_s for s in members]
            pos = {s: i for i, s in enumerate(members)}
            edges = [(pos[a], pos[b]) for a, b in sub.edges]
            succ = [[i] + sorted({b for a, b in edges if a == i and b != i}) for i in range(len(members))]
            self._cycle_cache[key] = (_lookahead_closure(look, edges), succ)
        return self._cycle_cache[key]

    def in_flight_deliveries(self) -> int:
        """Deliveries still owed by packets held in inboxes or queues."""
        leaves = self.net.plan.leaves
        held = sum(int(leaves[p.visit].sum()) for parts in self.inbox for p in parts)
        return held + sum(_held_deliveries(st, leaves) for st in self.net.stations)


def _lookahead_closure(look_s: list[float], edges: list[tuple[int, int]]) -> np.ndarray:
    """Least lookahead sum over paths of one or more edges (Floyd-Warshall).

    ``D[s, u]`` is the least ``look_s[s] + ... + look_s[v]`` over paths
    s -> ... -> v -> u; ``inf`` where u is unreachable from s. A packet
    pending at s at time t cannot reach u before ``t + D[s, u]``."""
    n = len(look_s)
    d = np.full((n, n), math.inf)
    for a, b in edges:
        d[a, b] = min(d[a, b], look_s[a])
    for k in range(n):
        d = np.minimum(d, d[:, k : k + 1] + d[k : k + 1, :])
    return d


def _held_deliveries(station: Station, leaves: np.ndarray) -> int:
    """Deliveries owed by the messages a station's discipline holds."""
    return int(leaves[station.discipline.held_visits()].sum())


class ReferenceDriver:
    """Reference: SimPy, one event per hop, global (time, message, visit) order.

    Publishers are SimPy processes that emit at their publication times. A hop
    is a SimPy timeout that delivers one packet to a station; packets due at
    the same instant are processed in key order by a zero-delay flush event.
    Event-driven stations get a wake-up event at each service completion after
    which a waiting message starts.
    """

    def __init__(self, network: Network, sink: Sink) -> None:
        self.net = network
        self.sink = sink
        for station in network.stations:
            station.fused_pass = False  # the plain path, one message at a time
        self.env = simpy.Environment()
        self.pending: list[tuple[int, int, Packets]] = []
        self._flush_due = False
        self._counter = itertools.count()
        self._wakes: set[tuple[int, float]] = set()
        self._in_transit: dict[int, Packets] = {}

    def run(self, until_s: float, *, drain: bool = True, progress: Progress | None = None) -> Sink:
        """Publish until ``until_s`` and simulate (to the end with ``drain``;
        else stop at ``until_s``). ``progress`` is not called."""
        self._until = until_s
        self._source_wakes: set[float] = set()
        pubs = self.net.publications(until_s, known_s=0.0)
        self.sink.add_published(pubs)
        if self.net.has_closed_loop:
            self._release()  # schedules the first timeout's wake-up, if any
        pub_of = self.net.plan.flow_publisher[self.net.plan.flow[pubs.visit]]
        for p in np.unique(pub_of):
            self.env.process(self._publisher(pubs.take(pub_of == p)))
        self.env.run(until=None if drain else until_s)
        return self.sink

    def _release(self, _event: object = None) -> None:
        """Requests that replies just released (closed-loop sources), sent at their times;
        a source's timeout after now waits for a wake-up at its time."""
        pubs = self.net.publications(self._until, known_s=self.env.now)
        if len(pubs):
            self.sink.add_published(pubs)
            self._send(self.net.plan.group_by_station(pubs))
        wake = self.net.next_source_wake()
        if wake is not None and wake < self._until and wake not in self._source_wakes:
            self._source_wakes.add(wake)
            self.env.timeout(max(wake - self.env.now, 0.0)).callbacks.append(self._release)

    def _publisher(self, packets: Packets) -> Generator[Any, Any, None]:
        for i in range(len(packets)):
            t = float(packets.t[i])
            if t > self.env.now:
                yield self.env.timeout(t - self.env.now)
            self._arrive_now(packets.take(slice(i, i + 1)))

    def _key(self, p: Packets) -> int:
        return int(p.msg[0]) * self.net.plan.n_visits + int(p.visit[0])

    def _arrive_now(self, packet: Packets, _event: object = None) -> None:
        self._in_transit.pop(id(packet), None)
        heapq.heappush(self.pending, (self._key(packet), next(self._counter), packet))
        if not self._flush_due:
            self._flush_due = True
            self.env.timeout(0).callbacks.append(self._flush)

    def _send(self, groups: list[tuple[int, Packets]]) -> None:
        packets = Packets.concat([p for _, p in groups])
        for i in range(len(packets)):
            p = packets.take(slice(i, i + 1))
            delay = float(p.t[0]) - self.env.now
            if delay <= 0:
                self._arrive_now(p)
            else:
                self._in_transit[id(p)] = p
                self.env.timeout(delay).callbacks.append(self._arrival_callback(p))

    def _arrival_callback(self, packet: Packets) -> Callable[[object], None]:
        return lambda _event: self._arrive_now(packet)

    def _flush(self, _event: object) -> None:
        self._flush_due = False
        while self.pending:
            _, _, packet = heapq.heappop(self.pending)
            station = self.net.stations[int(self.net.plan.station[packet.visit[0]])]
            self._serve(station, packet)

    def _serve(self, station: Station, packet: Packets) -> None:
        out = station.process(packet, self.env.now)
        self._send(_route(self.net, self.sink, station, out))
        if self.net.has_closed_loop:
            self._release()
        wake = station.next_wake()
        if wake is not None and (station.index, wake) not in self._wakes:
            self._wakes.add((station.index, wake))
            ev = self.env.timeout(wake - self.env.now)
            ev.callbacks.append(self._wake_callback(station, wake))

    def _wake_callback(self, station: Station, wake: float) -> Callable[[object], None]:
        return lambda _event: self._wake(station, wake)

    def _wake(self, station: Station, wake: float) -> None:
        self._wakes.discard((station.index, wake))
        self._serve(station, Packets.empty())

    def in_flight_deliveries(self) -> int:
        leaves = self.net.plan.leaves
        held = sum(int(leaves[p.visit].sum()) for p in self._in_transit.values())
        held += sum(int(leaves[p.visit].sum()) for _, _, p in self.pending)
        return held + sum(_held_deliveries(st, leaves) for st in self.net.stations)
