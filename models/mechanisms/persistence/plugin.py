"""Persistence as a registry entry: broker disks (:mod:`.disk`) and broker restarts.

* one disk station per broker with a ``disk``; on the routes of persistent
  publishers each visit of such a broker gets the disk as its only child,
  and the broker's copies hang below the disk (they leave when their write
  is synced); the broker is told its copies per visit through the wiring;
* the per-subscriber queues of a restarting broker restart with it: their
  downlinks get the event-driven restart queue (same limits and overflow
  policy);
* restarting queues learn which visits survive: persistent flows in a
  durable queue.
"""

from __future__ import annotations

import numpy as np

from ....sim.routing import Hop
from ...stations.wiring import Wiring
from ..context import CompileContext
from ..keys import StationKey, StationKind
from .disk import DiskStation

__all__ = ["PERSISTENCE", "Persistence"]


class Persistence:
    """Disks, restart client queues, durable visits."""

    name = "persistence"

    def add_stations(self, ctx: CompileContext) -> None:
        """One disk station per broker with a ``disk``."""
        for name in ctx.brokers:
            disk = ctx.params(name).disk
            if disk is not None:
                ctx.add_station(StationKey.disk(name), DiskStation(f"disk:{name}", disk, window=ctx.window))

    def link_options(self, ctx: CompileContext, key: StationKey) -> dict | None:
        """A restarting broker's per-client queue restarts with it."""
        if key.kind is not StationKind.DOWNLINK:
            return None
        bp = ctx.params(ctx.home(key.node))
        if not bp.restart_at_s:
            return None
        return {"restart": {"restart_at_s": bp.restart_at_s, "downtime_s": bp.restart_downtime_s}}

    def wrap_route(self, ctx: CompileContext, publisher, root: Hop) -> Hop:
        """Put the disk between each disk-equipped broker visit and its copies (in place)."""
        if ctx.params(publisher).persistent:
            disks = {
                ctx.index_of(StationKey.broker(n)): ctx.index_of(StationKey.disk(n))
                for n in ctx.brokers
                if ctx.has(StationKey.disk(n))
            }
            _insert(root, disks)
        return root

    def wire(self, ctx: CompileContext, wiring: Wiring) -> None:
        """Copies per broker visit below each disk; durable visits of restarting queues."""
        plan = wiring.plan
        for name in ctx.brokers:  # copies made below each disk, per broker visit
            if ctx.has(StationKey.disk(name)):
                mine = np.flatnonzero(plan.station == ctx.index_of(StationKey.disk(name)))
                broker = ctx.index_of(StationKey.broker(name))
                copies = wiring.copies_by_visit.get(broker)
                copies = plan.n_children.copy() if copies is None else copies
                copies[plan.parent[mine]] = plan.n_children[mine]
                wiring.copies_by_visit[broker] = copies
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


def _insert(hop: Hop, disks: dict[int, int]) -> None:
    for child in hop.children:
        _insert(child, disks)
    if hop.station in disks:
        hop.children = [Hop(disks[hop.station], children=hop.children)]


PERSISTENCE = Persistence()
