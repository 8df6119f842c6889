"""Optimistic fixed-point solver for a strongly connected component of stations.

(A component whose members are all plain FIFO relays and links, the ILDM
chains and trees, runs in the compiled event loop of
:mod:`pubsim.sim.cycle_kernel` instead, which needs no windows; this solver
takes the others: brokers with queue limits, event-driven queues, windowed
or lossy links, restarts.)

The batch driver (:mod:`pubsim.sim.drivers`) advances a cyclic component
(ILDM relays and bridges both ways, brokers bridged to each other) by
conservative rounds of one lookahead each (a bridge latency): exact, but its
Python work per station per round scales with simulated time / lookahead
(about 5k published msg/s of wall time on the ILDM 5-broker chain; a
cProfile of 2 simulated s: 4,900 station calls, 85 % of the time in the
cycle's Python bookkeeping (packet splits, inbox scans, routing), little in
the compiled queue kernels). This module replaces those rounds by an
optimistic iteration over a whole *window* of the chunk.

Why it is exact
---------------
A route tree never visits a station twice (an ILDM copy is never forwarded
back where it came from), so the station graph is cyclic only across
different messages. Given the arrivals of every member before a window's
end ``H``, each member's processing is a deterministic function of them
(draws are taken in arrival order, the same as in the reference). Iterate:
process each member on its external arrivals plus what the other members
emitted in their latest run; a member is run again (after restoring its state,
draw positions and statistics from a snapshot taken at the window start)
only when some of its arrivals changed. When no arrivals change, the outputs
are a fixed point of the component's map. With positive lookahead ``L`` on
every cycle the true trajectory is the only fixed point (induction over
``[t0, t0 + kL)``), so the result equals the conservative rounds' and the
reference driver's, record for record; only then is anything emitted to the
sink or to other components.

Why this design (measured on the ILDM 5-broker chain, placement B, PF/SF;
``benchmarks/tree_benchmark.py``)
---------------------------------------------------------------------------
* Conservative rounds: a dozen station calls per 5 ms of simulated time,
  each with a few small arrays.
* Fixed point over windows of ``window_messages`` external arrivals: what
  is used. Placement B needs 5.7 sweeps per window on average (at most 8)
  whether windows hold 1k or 65k arrivals (queue interactions are dense, so
  nearly every member changes in every sweep until the end), and each
  member runs about 3 times per window; so large windows (65536) win, the
  Python work being per window and the vectorised work per arrival. The
  window adapts: it halves after a window that does not converge within
  ``max_sweeps`` (results discarded, states restored), grows back after
  windows converging in at most half the bound; a window already at
  ``min_window`` is advanced by the conservative rounds, so results stay
  exact whatever the load. Near saturation (the §4 search) busy periods
  chain across directions and windows shrink.
* Re-running only the part of a member's window after its first changed
  arrival (checkpoints) was measured to save little: the first change lies
  on average 7-30 % into the window, and a new arrival shifts the draws of
  every later one (draws go in arrival order).
* A numba event-list kernel for the component would avoid re-running, but
  would re-implement every station type's service rule (relays, links with
  windows and loss, event-driven queues, restarts) in compiled code; the
  optimistic solver runs the stations' own :meth:`Station.process`.

Sweeps alternate direction over an order of the members by undirected
distance from a centre of the component (inward first, then outward), so
copies travelling outward or inward along a chain or tree of brokers reach
the end of it in one sweep (inward first: 5.7 sweeps per window on
placement B instead of 6.7 outward first).

Stations with ``rollback_safe = False`` (state shared with other stations)
cannot be snapshotted; a component containing one is advanced by the
conservative rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .network import Network
from .packets import Packets
from .routing import ALL_LEAVES, SOME_LEAVES, leaf_state
from .station import Station, StationOutput

__all__ = ["CycleSolver", "CycleStats", "Outcome", "route_rest", "split_output", "sweep_order"]


@dataclass
class Outcome:
    """A station's output split for routing: drops, deliveries and child
    copies by station; with ``rest``, the copies not yet routed (their
    children go to the stations outside the mask they were split with)."""

    output: StationOutput
    delivered: Packets | None
    children: list[tuple[int, Packets]]
    rest: Packets | None = None


def split_output(network: Network, out: StationOutput, to: np.ndarray | None = None) -> Outcome:
    """Deliveries (copies leaving at a delivery visit) and child copies
    grouped by station; only those to the stations of the mask ``to`` if
    given (the others later, by :func:`route_rest`)."""
    plan = network.plan
    dep = out.departed
    if len(dep) == 0:
        return Outcome(out, None, [])
    state = leaf_state(dep.visit, plan.is_delivery)  # one pass, no mask unless mixed
    if state == ALL_LEAVES:
        return Outcome(out, dep, [])
    delivered = None
    if state == SOME_LEAVES:
        leaf = plan.is_delivery[dep.visit]
        delivered = dep.take(leaf)
        dep = dep.take(~leaf)
    return Outcome(out, delivered, plan.children_by_station(dep, to), None if to is None else dep)


def route_rest(network: Network, outcome: Outcome, to: np.ndarray) -> Outcome:
    """``outcome`` with the children of its unrouted copies to the stations of ``to`` added."""
    if outcome.rest is None:
        return outcome
    more = network.plan.children_by_station(outcome.rest, to)
    return Outcome(outcome.output, outcome.delivered, outcome.children + more)


@dataclass
class CycleStats:
    """What the optimistic solver did, for benchmarks and tests.

    ``sweeps`` holds the sweeps of each converged window; ``reruns`` counts
    member runs beyond the first of each window; ``fallback_windows`` the
    windows advanced by conservative rounds after not converging;
    ``split_windows`` the windows halved because they did not converge within
    the bound; ``dense_windows`` the windows left to the conservative rounds
    because their arrivals were dense (:meth:`CycleSolver.dense`).
    """

    windows: int = 0
    sweeps: list[int] = field(default_factory=list)
    reruns: int = 0
    split_windows: int = 0
    fallback_windows: int = 0
    dense_windows: int = 0


def sweep_order(members: list[int], sub: nx.DiGraph) -> list[int]:
    """Members by undirected distance from a centre of the component (ties by index)."""
    und = sub.to_undirected()
    centre = min(nx.center(und))
    dist = nx.single_source_shortest_path_length(und, centre)
    return sorted(members, key=lambda s: (dist[s], s))


def same(a: Packets | None, b: Packets | None) -> bool:
    """Same packets in the same order (times compared bit for bit)."""
    if a is None or b is None:
        return a is b
    if len(a) != len(b):
        return False
    if len(a) == 0 or a is b:
        return True
    return bool(np.array_equal(a.t, b.t) and np.array_equal(a.msg, b.msg) and np.array_equal(a.visit, b.visit))


class CycleSolver:
    """Advance one strongly connected component to a horizon by optimistic windows.

    Parameters
    ----------
    network : sim.network.Network
    members : list of int
        Station indices of the component.
    sub : networkx.DiGraph
        The component's station graph.
    max_sweeps : int
        Most sweeps over the members per window before the window is split
        (or, if it has fewer than ``min_window`` arrivals, handed to the
        conservative rounds).
    window_messages : int
        External arrivals per window to start with.
    min_window : int
        Smallest window worth splitting further.
    cycle_lookahead_s : float
        Least lookahead sum around a cycle of the component, s.
    dense_arrivals : float
        Above this many external arrivals per ``cycle_lookahead_s`` a window
        is left to the conservative rounds (:meth:`dense`).
    """

    def __init__(
        self,
        network: Network,
        members: list[int],
        sub: nx.DiGraph,
        *,
        max_sweeps: int = 12,
        window_messages: int = 65536,
        min_window: int = 64,
        cycle_lookahead_s: float = 0.0,
        dense_arrivals: float = math.inf,
    ) -> None:
        self.net = network
        self.members = list(members)
        self.is_member = set(members)
        self.mask = np.zeros(len(network.stations), dtype=bool)
        self.mask[self.members] = True
        self.order = sweep_order(self.members, sub)
        self.max_sweeps = int(max_sweeps)
        self.window = int(window_messages)
        self.base_window = int(window_messages)
        self.min_window = int(min_window)
        self.cycle_lookahead_s = float(cycle_lookahead_s)
        self.dense_arrivals = float(dense_arrivals)
        self.stats = CycleStats()

    @staticmethod
    def supported(stations: list[Station]) -> bool:
        """Can every member be snapshotted and restored?"""
        return all(getattr(st, "rollback_safe", False) for st in stations)

    # --- one window -------------------------------------------------------
    def solve(self, external: dict[int, Packets], horizon: float) -> dict[int, Outcome] | None:
        """Fixed point of the members' runs on ``external`` arrivals (all before ``horizon``).

        Returns each member's outcome, or None (states restored to the window
        start) if it did not converge within ``max_sweeps`` sweeps."""
        stations = self.net.stations
        n_visits = self.net.plan.n_visits
        snaps = {s: stations[s].snapshot() for s in self.members}
        inputs: dict[int, dict[int, Packets]] = {s: {} for s in self.members}
        outcomes: dict[int, Outcome] = {}
        dirty = set(self.members)
        sweep = 0
        while dirty:
            if sweep == self.max_sweeps:
                for s in outcomes:
                    stations[s].restore(snaps[s])
                return None
            order = self.order if sweep % 2 == 1 else self.order[::-1]
            for s in order:
                if s not in dirty:
                    continue
                dirty.discard(s)
                station = stations[s]
                if s in outcomes:
                    station.restore(snaps[s])
                    self.stats.reruns += 1
                batch = Packets.concat([external[s], *inputs[s].values()]).sorted(n_visits)
                outcomes[s] = out = split_output(self.net, station.process(batch, horizon), self.mask)
                self._pass_on(s, out, horizon, inputs, dirty)
            sweep += 1
        self.stats.sweeps.append(sweep)
        outside = ~self.mask
        return {s: route_rest(self.net, out, outside) for s, out in outcomes.items()}

    def _pass_on(
        self, s: int, out: Outcome, horizon: float, inputs: dict[int, dict[int, Packets]], dirty: set[int]
    ) -> None:
        """Hand a member's new output to the members it feeds; mark those whose arrivals changed."""
        sent: dict[int, Packets] = {}
        for dest, packets in out.children:
            if dest in self.is_member:
                early, _ = packets.split_before(horizon)
                sent[dest] = Packets.concat([sent[dest], early]) if dest in sent else early
        for dest in set(sent) | {d for d in self.is_member if s in inputs[d]}:
            new = sent.get(dest)
            if new is not None and len(new) == 0:
                new = None
            if not same(new, inputs[dest].get(s)):
                if new is None:
                    del inputs[dest][s]
                else:
                    inputs[dest][s] = new
                dirty.add(dest)

    # --- window bounds ----------------------------------------------------
    def dense(self, pending_by_member: list[np.ndarray], bound: float) -> bool:
        """Do the arrivals before ``bound`` at some member come at more than
        ``dense_arrivals`` per cycle lookahead? Then conservative rounds are
        cheaper: each round carries many arrivals, while the fixed point
        needs more sweeps (busy periods chain across directions) and fails
        more often. Measured on placement B SF (cycle lookahead 10 ms: relay,
        bridge, relay, bridge back), one §4 probe of 1.5 s, with the
        component's arrivals counted together: near the limit (590 arrivals
        per lookahead) conservative 4.2 s, optimistic 6.1 s (9.5 sweeps a
        window, windows halved); at 250 per lookahead 2.8 s against 4.8 s; at
        50 per lookahead 4.4 s against 0.3-0.8 s; at the scenario's own load
        (25) optimistic is about 40 times faster. Hence the default 150.

        The rule is judged per member (the busiest one), not on the
        component's total: sweeps chain through busy periods at a station,
        so a large component of lightly loaded stations (the city tree of
        ``benchmarks/city_tree_benchmark.py``: 100 relays and 198 bridge
        directions, about 500 arrivals per lookahead in all, a few per
        member) converges in few sweeps, while its conservative rounds run
        every member once per lookahead in Python."""
        if not self.cycle_lookahead_s > 0 or not math.isfinite(self.dense_arrivals):
            return False
        early = [t[t < bound] for t in pending_by_member]
        counts = [len(t) for t in early]
        if not any(counts):
            return False
        first = min(float(t.min()) for t in early if len(t))
        end = bound if math.isfinite(bound) else max(float(t.max()) for t in early if len(t))
        span = max(end - first, self.cycle_lookahead_s)
        return max(counts) > self.dense_arrivals * span / self.cycle_lookahead_s

    def next_bound(self, pending_t: np.ndarray, horizon: float) -> float:
        """End of the next window: after about ``window`` pending arrivals, at most ``horizon``."""
        if len(pending_t) <= self.window:
            return horizon
        t = float(np.partition(pending_t, self.window)[self.window])
        if not t > float(pending_t.min()):  # ties at the earliest time: take them all
            t = float(np.nextafter(t, math.inf))
        return min(t, horizon)
