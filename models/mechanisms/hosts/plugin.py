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

from ....sim.distributions import Constant
from ....sim.routing import Hop
from ... import topology as T
from ..context import CompileContext
from ..keys import StationKey, StationKind
from .card import RECEIVE, TRANSMIT, CardStation
from .cpu import SharedCpuStation
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
    """Loopback connections, network cards and the card hops of routes."""

    name = "hosts"

    def prepare(self, ctx: CompileContext) -> None:
        """CPU costs of processes on a host divided by its speed (``ctx.param_overrides``,
        ``ctx.relays``); connections within one host become loopback connections
        (``ctx.link_overrides``)."""
        g = ctx.graph
        table = T.hosts(g)
        for n in g:
            h = T.host_of(g, n)
            if h is None or table[h].speed == 1.0:
                continue
            ctx.param_overrides[n] = on_host(g.nodes[n][T.PARAMS], table[h].speed)
            if n in ctx.relays:  # a relay runs on its broker's host
                ctx.relays[n] = on_host(ctx.relays[n], table[h].speed)
        for b in ctx.relays:  # a broker and its node on one host share its CPU (.cpu)
            h = T.host_of(g, b)
            if h is not None:
                ctx.shared_cpu[b] = h
        for a, b in g.edges:
            h = T.host_of(g, a)
            if h is not None and h == T.host_of(g, b) and not _in_process(g, a, b):
                ctx.link_overrides[frozenset((a, b))] = _loopback(ctx.link_params(a, b), table[h])

    def add_stations(self, ctx: CompileContext) -> None:
        """The shared CPU of each host with a broker and its node; transmit and
        receive card stations of the hosts that connections cross."""
        g, table = ctx.graph, T.hosts(ctx.graph)
        for b, h in ctx.shared_cpu.items():
            relay, broker = ctx.station(StationKey.relay(b)), ctx.station(StationKey.broker(b))
            servers = min(table[h].cores, relay.params.workers + broker.params.workers)
            ctx.add_station(cpu_key(h), SharedCpuStation(f"cpu:{h}", relay, broker, servers=servers, window=ctx.window))
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

    def wrap_route(self, ctx: CompileContext, publisher, root: Hop) -> Hop:
        """Card hops around every link hop of a connection between hosts."""
        return _with_cards(ctx, root)


def _with_cards(ctx: CompileContext, hop: Hop) -> Hop:
    hop.children = [_with_cards(ctx, c) for c in hop.children]
    key = ctx.keys[hop.station]
    if key.kind is StationKind.RELAY and key.node in ctx.shared_cpu:  # node and broker on the host's CPU
        hop.station = ctx.index_of(cpu_key(ctx.shared_cpu[key.node]))
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
