"""Lookahead bounds for closed loops (request/reply sources) in the batch driver.

A closed-loop source releases its next request when a reply comes back, so
publications depend on deliveries. The batch driver keeps this causal with
conservative horizons (Chandy & Misra 1979): ``d[s]``, the least total
lookahead from any route root to station s, bounds how early a packet not yet
published can reach s; ``L``, the least ``d[s] + lookahead[s]`` over the
stations where closed-loop messages are delivered, bounds how early a reply
to a request not yet published can arrive. Chunks no longer than L keep
every release dependent only on replies already computed. A producer
confirm (``Network.confirm_delay_s``) is a reply issued when a message
departs its confirm visit: there the bound is that station's ``d[s] +
lookahead[s]`` plus the confirm's return delay.

Speed. Run in rounds, a closed loop costs one Python round per L of
simulated time (every station called once per round), whatever the window:
the stations' own work is compiled, the per-call overhead is not. Rounds
cannot be made longer than L by optimistic windows
(:mod:`pubsim.sim.optimistic`): request i + W depends on reply i, so a
window of n x L needs n sweeps, the same station calls. So the batch driver
runs a closed loop whose stations and sources can be compiled in one event
loop instead (:mod:`pubsim.sim.closed_kernel`), and these rounds only for
the others.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from .errors import ConfigError
from .network import Network

Components = list[tuple[list[int], bool, "nx.DiGraph | None"]]
"""Strongly connected components of the station graph in topological order:
(member stations, cyclic?, subgraph of a cyclic one)."""

__all__ = ["closed_loop_bounds"]


def closed_loop_bounds(net: Network, components: Components) -> tuple[dict[int, float], float]:
    """``(d, L)``: per-station least lookahead from the roots, and the chunk bound L, s.

    A cycle of stations (brokers forwarding both ways; a host's CPU that a
    request's route visits twice, :mod:`pubsim.models.mechanisms.hosts.cpu`) is
    advanced by conservative rounds inside each round, every member up to its
    own ``T + d[s]``; it needs a delay > 0 around every cycle."""
    plan = net.plan
    look = [st.lookahead_s for st in net.stations]
    for _, cyclic, sub in components:
        if cyclic and sub is not None:
            _check_delay_around(net, sub, look)
    g = nx.DiGraph()
    g.add_nodes_from(range(len(net.stations)))
    for u, v in plan.station_edges():
        g.add_edge(u, v, weight=look[u])
    roots = sorted(set(plan.station[plan.flow_root].tolist()))
    dist = dict.fromkeys(range(len(net.stations)), math.inf)
    dist.update(nx.multi_source_dijkstra_path_length(g, roots) if roots else {})
    closed_flows = net.closed_loop[plan.flow_publisher]
    step = math.inf
    delay = net.confirm_delay_s
    if delay is not None:  # confirms: a reply leaves its confirm visit, then takes its return delay
        for v in np.flatnonzero(np.isfinite(delay)).tolist():
            s = int(plan.station[v])
            step = min(step, dist[s] + look[s] + float(delay[v]))
    for f in range(len(plan.flow_root)):
        if not closed_flows[f] or net.confirm_flow[f]:
            continue
        if plan.leaves[plan.flow_root[f]] == 0:
            who = net.names["publisher"][plan.flow_publisher[f]]
            raise ConfigError(
                f"publisher {who!r}.topics",
                net.names["topic"][plan.flow_topic[f]],
                "a request topic some subscriber (the replier path) matches",
            )
        visits = [v for v in range(plan.n_visits) if plan.flow[v] == f and plan.is_delivery[v]]
        for v in visits:
            s = int(plan.station[v])
            step = min(step, dist[s] + look[s])
    if not step > 0:
        raise ConfigError(
            "link.latency_s",
            0,
            "a latency > 0 on request/reply paths (the round trip bounds the closed loop's lookahead)",
        )
    return dist, step


def _check_delay_around(net: Network, sub: nx.DiGraph, look: list[float]) -> None:
    """One-line error if a cycle of ``sub`` has no delay (every member's lookahead 0):
    conservative rounds could not advance it."""
    zero = nx.DiGraph([(u, v) for u, v in sub.edges if not look[u] > 0])
    if zero.number_of_edges() and not nx.is_directed_acyclic_graph(zero):
        names = sorted(net.stations[u].name for u, _ in nx.find_cycle(zero))
        raise ConfigError(
            "topology",
            f"stations {names} in a cycle with zero delay",
            "a delay > 0 around every cycle of request/reply routes (a link's or a host's loopback latency)",
        )
