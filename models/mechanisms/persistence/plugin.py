"""Persistence as a registry entry: broker disks (:mod:`.disk`), product
stores (:mod:`.store`), read-back (:mod:`.read`), send modes (:mod:`.sending`)
and broker restarts.

* one disk station per broker with a ``disk`` (its store design, if any,
  sets the per-message cost and the sync policy), then one read station per
  broker with a ``store``; on the routes of persistent publishers each visit
  of such a broker gets ``disk -> read`` as its only chain of children
  (the read only where the store keeps a limited memory, the disk not for
  preloaded publishers), and the broker's copies hang below the chain (they
  leave when their write is synced and, if needed, read back); the broker
  is told its copies per visit through the wiring;
* a producer that waits for confirms (``send_mode`` not ``async``) is
  answered when its message leaves the first broker's disk (the sync that
  made it durable), or that broker when it has no disk, plus the return
  latency of its uplink (:func:`.sending.confirm_delays`);
* a ``transactions`` producer's closed-loop source opens its window N
  messages at a time (:class:`.sending.TransactionSource`);
* the per-subscriber queues of a restarting broker restart with it: their
  downlinks get the event-driven restart queue (same limits and overflow
  policy);
* restarting queues learn which visits survive: persistent flows in a
  durable queue.
"""

from __future__ import annotations

import numpy as np

from ....sim.routing import Hop
from ... import topology as T
from ...stations.wiring import Wiring
from ..context import CompileContext
from ..keys import StationKey, StationKind
from .disk import DiskStation
from .read import ReadStation
from .sending import TransactionSource, confirm_delays

__all__ = ["PERSISTENCE", "Persistence"]


class Persistence:
    """Disks, read stations, transaction sources, restart client queues, durable visits."""

    name = "persistence"

    def add_stations(self, ctx: CompileContext) -> None:
        """One disk station per broker with a ``disk``, then one read station per broker with a ``store``."""
        for name in ctx.brokers:
            bp = ctx.params(name)
            if bp.disk is not None:
                disk = DiskStation(f"disk:{name}", bp.disk, window=ctx.window, store=bp.store)
                ctx.add_station(StationKey.disk(name), disk)
        for name in ctx.brokers:
            bp = ctx.params(name)
            if bp.store is not None:
                resident = bp.store.resident_bytes(_host_memory(ctx, name))
                read = ReadStation(f"read:{name}", bp.disk, bp.store, resident_bytes=resident, window=ctx.window)
                ctx.add_station(StationKey.read(name), read)

    def link_options(self, ctx: CompileContext, key: StationKey) -> dict | None:
        """A restarting broker's per-client queue restarts with it."""
        if key.kind is not StationKind.DOWNLINK:
            return None
        bp = ctx.params(ctx.home(key.node))
        if not bp.restart_at_s:
            return None
        return {"restart": {"restart_at_s": bp.restart_at_s, "downtime_s": bp.restart_downtime_s}}

    def wrap_route(self, ctx: CompileContext, publisher, root: Hop) -> Hop:
        """Put the disk (and read) chain between each persistent broker visit and its copies (in place)."""
        pp = ctx.params(publisher)
        if pp.persistent:
            chains = {}
            for n in ctx.brokers:
                bp = ctx.params(n)
                chain = [] if pp.preloaded or bp.disk is None else [ctx.index_of(StationKey.disk(n))]
                if bp.store is not None and (pp.preloaded or bp.store.memory_bytes is not None):
                    chain.append(ctx.index_of(StationKey.read(n)))
                if chain:
                    chains[ctx.index_of(StationKey.broker(n))] = chain
            _insert(root, chains)
        return root

    def wrap_source(self, ctx: CompileContext, publisher, source):
        """A transactions producer opens its window N messages at a time."""
        pp = ctx.params(publisher)
        if pp.send_mode == "transactions":
            return TransactionSource(source, pp.transaction_messages)
        return source

    def wire(self, ctx: CompileContext, wiring: Wiring) -> None:
        """Copies per broker visit below each chain; preloaded flows; durable visits of restarting queues."""
        plan = wiring.plan
        stages = {ctx.index_of(k) for n in ctx.brokers for k in (StationKey.disk(n), StationKey.read(n)) if ctx.has(k)}
        brokers = {ctx.index_of(StationKey.broker(n)) for n in ctx.brokers}
        heads: dict[int, list[int]] = {}  # broker station -> first visits of its chains
        for v in np.flatnonzero(np.isin(plan.station, sorted(stages))).tolist():
            up = int(plan.parent[v])
            if up >= 0 and int(plan.station[up]) in brokers:
                heads.setdefault(int(plan.station[up]), []).append(v)
        for broker, vs in heads.items():  # copies made below each chain, per broker visit
            copies = wiring.copies_by_visit.get(broker)
            copies = plan.n_children.copy() if copies is None else copies
            for v in vs:
                copies[plan.parent[v]] = plan.n_children[_chain_end(plan, v, stages)]
            wiring.copies_by_visit[broker] = copies
        pre = np.array([ctx.params(ctx.publishers[int(p)]).preloaded for p in plan.flow_publisher], dtype=bool)
        if pre.any():
            wiring.preloaded_flow = pre
        persistent = np.array([ctx.params(ctx.publishers[int(p)]).persistent for p in plan.flow_publisher], dtype=bool)
        durable = persistent[plan.flow] if len(plan.flow) else np.zeros(0, bool)
        owners = {ctx.index_of(StationKey.broker(name)): name for name in ctx.brokers}
        for s in ctx.subscribers:
            if ctx.has(StationKey.downlink(s)):
                owners[ctx.index_of(StationKey.downlink(s))] = ctx.home(s)
        for idx, name in owners.items():
            bp = ctx.params(name)
            if bp.restart_at_s:  # restarting queues only (sim.restart.RestartQueueDiscipline)
                wiring.durable_visit[idx] = durable & bool(bp.durable_queue)
        wiring.confirm_delay_s = confirm_delays(ctx, plan)


def _host_memory(ctx: CompileContext, broker) -> int | None:
    """Memory of the broker's host, bytes, or None (no host, or not stated)."""
    host = T.host_of(ctx.graph, broker)
    return None if host is None else T.hosts(ctx.graph)[host].memory_bytes


def _chain_end(plan, v: int, stages: set[int]) -> int:
    """Last visit of the persistence chain starting at visit ``v``."""
    while plan.n_children[v] == 1:
        child = int(plan.child_idx[plan.child_ptr[v]])
        if int(plan.station[child]) not in stages:
            break
        v = child
    return v


def _insert(hop: Hop, chains: dict[int, list[int]]) -> None:
    for child in hop.children:
        _insert(child, chains)
    if hop.station in chains:
        below = hop.children
        for station in reversed(chains[hop.station]):
            below = [Hop(station, children=below)]
        hop.children = below


PERSISTENCE = Persistence()
