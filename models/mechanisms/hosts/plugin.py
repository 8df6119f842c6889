"""Hosts as a registry entry: network cards on connections between hosts,
loopback on connections within one.

``prepare``: the CPU costs of every process on a host are divided by the
host's ``speed`` (:mod:`.speed`); every connection between two processes of one host becomes a
loopback connection (its link's latency becomes the host's
``loopback_latency_s``; no bandwidth limit, no jitter, no loss; its queue
limits and policy stay). A publisher's hand-off to its own ZeroMQ socket is
in-process and keeps its link.

``add_stations``: per host whose card limits anything, a transmit and a
receive card station (:class:`.card.CardStation`) if some connection crosses
it in that direction. Appended after every other station, so a topology
without hosts has exactly the stations (and records) it had before.

``prepare`` also notes each broker whose ILDM node shares its host's CPU,
and ``add_stations`` builds that host's CPU station (:mod:`.cpu`), which
replaces the relay in routes (``wrap_route``).

``wrap_route``: a copy on a connection from host A to host B passes A's
transmit card, then the link, then B's receive card; a process without a
host is on a machine of its own with a free card.
"""

from __future__ import annotations

import dataclasses
import math

import networkx as nx

from ....sim.distributions import Constant
from ....sim.errors import ConfigError
from ....sim.routing import Hop
from ... import topology as T
from ..context import CompileContext
from ..keys import StationKey, StationKind
from .card import RECEIVE, TRANSMIT, CardStation
from .cpu import HostCpuStation
from .sharing import check_shared, cpu_users
from .speed import on_host

__all__ = ["HOSTS", "Hosts", "connection_ends", "card_key", "cpu_key"]


def cpu_key(host) -> StationKey:
    """Station key of a host's shared CPU."""
    return StationKey(StationKind.CPU, (host,))


def card_key(host, direction) -> StationKey:
    """Station key of a host's card in one direction."""
    return StationKey(StationKind.CARD, (host, direction))


def connection_ends(ctx: CompileContext, key: StationKey):
    """``(sender, receiver)`` nodes of a link station's connection, or None for other stations."""
    kind, names = key.kind, key.names
    if kind is StationKind.UPLINK:
        return names[0], ctx.home(names[0])
    if kind is StationKind.DOWNLINK:
        return ctx.home(names[0]), names[0]
    if kind in (StationKind.BRIDGE, StationKind.PIPE):
        return names[0], names[1]
    return None


def _in_process(g, a, b) -> bool:
    """A publisher and its own ZeroMQ socket: an in-process hand-off, not a connection."""
    kinds = {g.nodes[a][T.KIND], g.nodes[b][T.KIND]}
    return kinds == {T.NodeKind.PUBLISHER, T.NodeKind.SOCKET}


def _loopback(link, host):
    """The link of a connection within ``host``: its loopback latency, no bandwidth limit, jitter or loss."""
    return dataclasses.replace(
        link,
        latency_s=host.loopback_latency_s,
        jitter_s=Constant(value=0.0),
        bandwidth_Bps=math.inf,
        loss_probability=0.0,
    )


class Hosts:
    """Loopback connections, network cards, shared host CPUs and their hops in routes."""

    name = "hosts"

    def prepare(self, ctx: CompileContext) -> None:
        """CPU costs of processes on a host divided by its speed (``ctx.param_overrides``,
        ``ctx.relays``); the processes of each shared host (``ctx.shared_cpu``, :mod:`.cpu`);
        connections within one host become loopback connections (``ctx.link_overrides``)."""
        g = ctx.graph
        table = T.hosts(g)
        for n in g:
            h = T.host_of(g, n)
            if h is None or table[h].speed == 1.0:
                continue
            ctx.param_overrides[n] = on_host(g.nodes[n][T.PARAMS], table[h].speed)
            if n in ctx.relays:  # a relay runs on its broker's host
                ctx.relays[n] = on_host(ctx.relays[n], table[h].speed)
        for h, users in cpu_users(ctx).items():
            if sum(w for _, w in users.values()) >= 2:
                check_shared(ctx, h, users)
                ctx.shared_cpu.update(dict.fromkeys(users, h))
        for a, b in g.edges:
            h = T.host_of(g, a)
            if h is not None and h == T.host_of(g, b) and not _in_process(g, a, b):
                ctx.link_overrides[frozenset((a, b))] = _loopback(ctx.link_params(a, b), table[h])

    def add_stations(self, ctx: CompileContext) -> None:
        """The CPU station of each shared host; transmit and receive card stations
        of the hosts that connections cross."""
        for h in dict.fromkeys(ctx.shared_cpu.values()):
            ctx.add_station(cpu_key(h), _cpu_station(ctx, h))
        _add_cards(ctx)

    def wrap_route(self, ctx: CompileContext, publisher, root: Hop) -> Hop:
        """Host CPU hops before the visits of processes on shared hosts; card hops
        around every link hop of a connection between hosts (none without hosts)."""
        if not T.hosts(ctx.graph):
            return root  # every station on a host of its own: no card, no shared CPU
        return _with_cards(ctx, root)

    def plan_options(self, ctx: CompileContext, flows) -> dict:
        """No option; a one-line error if routes pass a host's CPU station twice
        with no delay in between (a cycle the drivers cannot advance)."""
        if ctx.shared_cpu:
            _check_zero_delay_cycles(ctx, [root for _, _, root in flows])
            _check_closed_loops(ctx, flows)
        return {}


def _check_closed_loops(ctx: CompileContext, flows) -> None:
    """A request/reply client whose request starts on a shared CPU (its encode stage) and
    whose reply is processed there, on a CPU with no least delay: the closed-loop rounds
    would have no lookahead (a new request may reach the CPU at once). One-line error."""
    pubs = ctx.publishers
    closed = [root for p, _, root in flows if getattr(ctx.params(pubs[p]), "arrival", None) == "closed_loop"]
    cpus = {ctx.index_of(cpu_key(h)): h for h in set(ctx.shared_cpu.values())}
    roots = {root.station for _, _, root in flows}
    for i, h in cpus.items():
        if i in roots and not ctx.stations[i].lookahead_s > 0 and any(_delivers_after(r, i) for r in closed):
            raise ConfigError(
                f"host {h!r}",
                "CPU costs with a least value of 0",
                "a least CPU cost > 0 (e.g. constant or uniform costs) of the processes on a CPU where "
                "request/reply clients encode their requests and process their replies",
            )


def _delivers_after(hop: Hop, cpu: int) -> bool:
    """Does a visit of station ``cpu`` in the route below ``hop`` lead straight to a delivery?"""
    stack = [hop]
    while stack:
        h = stack.pop()
        if h.station == cpu and any(c.subscriber >= 0 for c in h.children):
            return True
        stack.extend(h.children)
    return False


def _check_zero_delay_cycles(ctx: CompileContext, roots) -> None:
    """A cycle of routes through a shared host's CPU station whose stations all have zero
    lookahead (e.g. a broker and its subscriber on one host with a loopback latency of 0:
    each message visits the CPU twice) cannot be advanced: one-line error."""
    zero = [st.lookahead_s <= 0 for st in ctx.stations]
    edges = set()
    stack = list(roots)
    while stack:
        hop = stack.pop()
        for child in hop.children:
            if zero[hop.station] and zero[child.station]:
                edges.add((hop.station, child.station))
            stack.append(child)
    graph = nx.DiGraph(edges)
    cpus = {ctx.index_of(cpu_key(h)): h for h in set(ctx.shared_cpu.values())}
    for component in nx.strongly_connected_components(graph):
        found = [i for i in component if i in cpus]
        if found and (len(component) > 1 or graph.has_edge(found[0], found[0])):
            h = cpus[found[0]]
            names = sorted(ctx.stations[i].name for i in component)
            handoff = [i for i in component if _is_handoff(ctx, i)]
            if handoff:  # a publisher's encode stage and its ZeroMQ socket, both on the host's CPU
                raise ConfigError(
                    "handoff.latency_s",
                    ctx.stations[handoff[0]].params.latency_s,
                    f"> 0 or CPU costs > 0 (stations {names} form a cycle with zero delay through host {h!r}'s CPU)",
                )
            raise ConfigError(
                f"host {h!r}.loopback_latency_s",
                T.hosts(ctx.graph)[h].loopback_latency_s,
                f"> 0 (stations {names} form a cycle with zero delay through the host's CPU)",
            )


def _add_cards(ctx: CompileContext) -> None:
    """Transmit and receive card stations of the hosts that connections cross."""
    g, table = ctx.graph, T.hosts(ctx.graph)
    crossing: dict = {}
    for idx, key in enumerate(list(ctx.keys)):
        ends = connection_ends(ctx, key)
        if ends is None:
            continue
        src, dst = (T.host_of(g, n) for n in ends)
        if src == dst:
            continue
        link = ctx.stations[idx].params
        for h, d in ((src, TRANSMIT), (dst, RECEIVE)):
            if h is not None and table[h].has_card:
                crossing.setdefault((h, d), {})[idx] = link.overhead_bytes
    for h in sorted(table):
        for d in (TRANSMIT, RECEIVE):
            if (h, d) in crossing:
                ctx.add_station(
                    card_key(h, d),
                    CardStation(
                        f"card:{h}:{d}",
                        table[h],
                        direction=d,
                        protocol=ctx.protocol,
                        overhead_bytes=crossing[(h, d)],
                        window=ctx.window,
                    ),
                )


def _cpu_station(ctx: CompileContext, h) -> HostCpuStation:
    """The CPU station of shared host ``h`` (:mod:`.cpu`)."""
    nodes = [n for n, host in ctx.shared_cpu.items() if host == h]
    processes, relays, caps, limits, idle, batches = {}, {}, {}, {}, {}, {}
    brokers = [n for n in nodes if n in ctx.tables]
    for n in nodes:
        key = _process_key(ctx, n)
        idx = ctx.index_of(key)
        processes[idx] = ctx.stations[idx]
        caps[idx] = ctx.params(n).workers if n in ctx.tables else 1
        if key.kind is StationKind.SOCKET:  # its context's one I/O thread, its own wake-up and writes
            idle[idx] = ctx.params(n).idle_wakeup_cost_s
            batches[idx] = ctx.stations[idx].batch_rule
        if n in ctx.relays:
            relays[idx] = ctx.station(StationKey.relay(n))
            caps[idx] += ctx.relays[n].workers
        queue = ctx.relays[n].queue_messages if n in ctx.relays else getattr(ctx.params(n), "queue_messages", None)
        limits[idx] = queue if n in ctx.tables else None
    for b in brokers:
        for field_name, used in (
            ("idle_exit", ctx.params(b).idle_exit is not None),
            ("wake_curve", ctx.params(b).wake_curve is not None),
            ("sleep_entry_s", ctx.params(b).sleep_entry_s > 0),
            ("copies_in_turn", ctx.params(b).copies_in_turn),
        ):
            if used:
                raise ConfigError(
                    f"broker {b!r}.{field_name}",
                    "set",
                    f"unset on a broker that shares host {h!r}'s CPU with other processes "
                    f"(the {field_name.removesuffix('_s').replace('_', ' ')} is modelled for a broker's own CPU)",
                )
    servers = min(T.hosts(ctx.graph)[h].cores, sum(caps.values()))
    background = sum(ctx.params(b).background_cpu_fraction for b in brokers)
    if background >= servers:
        raise ConfigError(f"host {h!r}.background_cpu_fraction", background, f"less than its {servers} CPU servers")
    return HostCpuStation(
        f"cpu:{h}",
        processes,
        relays=relays,
        servers=servers,
        caps=caps,
        limits=limits,
        idle_extra_s=max((ctx.params(b).idle_wakeup_cost_s for b in brokers), default=0.0),
        background_cores=background,
        window=ctx.window,
        idle=idle,
        batches={i: b for i, b in batches.items() if b is not None},
    )


def _is_handoff(ctx: CompileContext, i: int) -> bool:
    """Is station ``i`` the in-process hand-off from a publisher to its ZeroMQ socket?"""
    ends = connection_ends(ctx, ctx.keys[i])
    return ends is not None and _in_process(ctx.graph, *ends)


def _process_key(ctx: CompileContext, n) -> StationKey:
    """Key of the station whose CPU stage a host CPU visit charges for node ``n``."""
    if n in ctx.tables:
        return StationKey.broker(n)
    if n in ctx.publishers:
        return StationKey.encode(n)
    if n in ctx.sockets:
        return StationKey.socket(n)
    return StationKey.subscriber(n)


#: Stations whose work a shared host's CPU station charges (the visit before theirs).
_ON_CPU = (StationKind.RELAY, StationKind.BROKER, StationKind.ENCODE, StationKind.SUBSCRIBER, StationKind.SOCKET)


def _with_cards(ctx: CompileContext, hop: Hop) -> Hop:
    hop.children = [_with_cards(ctx, c) for c in hop.children]
    key = ctx.keys[hop.station]
    if key.node in ctx.shared_cpu and key.kind in _ON_CPU:
        cpu = ctx.index_of(cpu_key(ctx.shared_cpu[key.node]))
        if key.kind is StationKind.RELAY:  # node and broker: one visit (the broker's takes no time)
            hop.station = cpu
            return hop
        if not (key.kind is StationKind.BROKER and key.node in ctx.relays):  # a node's broker: charged there
            return Hop(cpu, children=[hop])
        return hop
    ends = connection_ends(ctx, ctx.keys[hop.station])
    if ends is None:
        return hop
    src, dst = (T.host_of(ctx.graph, n) for n in ends)
    if src == dst:
        return hop
    rx = card_key(dst, RECEIVE)
    if ctx.has(rx):
        hop.children = [Hop(ctx.index_of(rx), subscriber=hop.subscriber, children=hop.children)]
        hop.subscriber = -1
    tx = card_key(src, TRANSMIT)
    return Hop(ctx.index_of(tx), children=[hop]) if ctx.has(tx) else hop


HOSTS = Hosts()
