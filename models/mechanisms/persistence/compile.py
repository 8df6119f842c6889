"""Compiling broker disks (:mod:`pubsim.models.mechanisms.persistence.disk`) into stations and routes.

Hooks called by :mod:`pubsim.models.assembly.build`: one disk station per broker with a
``disk``; on the routes of persistent publishers, each visit of such a
broker gets the disk as its only child, and the broker's copies hang below
the disk (they leave when their write is synced).
"""
from __future__ import annotations

from ....sim.routing import Hop

from .disk import DiskStation

__all__ = ["add_disk_stations", "insert_disks", "mark_durable", "restart_client_queues"]


def add_disk_stations(b):
    for name in b.brokers:
        disk = b._p(name).disk
        if disk is not None:
            broker = b.stations[b.index[("broker", name)]]
            b._station(("disk", name), DiskStation(f"disk:{name}", disk, broker=broker, window=b.window))


def insert_disks(b, hop):
    """Put the disk between each disk-equipped broker visit and its copies (in place)."""
    disks = {b.index[("broker", n)]: b.index[("disk", n)] for n in b.brokers if ("disk", n) in b.index}
    _insert(hop, disks)


def _insert(hop, disks):
    for child in hop.children:
        _insert(child, disks)
    if hop.station in disks:
        hop.children = [Hop(disks[hop.station], children=hop.children)]


def restart_client_queues(b):
    """Per-subscriber queues of a restarting broker restart with it: their
    downlinks get the event-driven restart queue (same limits and overflow policy)."""
    from ....sim.disciplines import Overflow
    from ....sim.errors import ConfigError
    from ....sim.restart import RestartQueueDiscipline

    from ... import topology as T
    from ..priority.channels import downlink_queue

    for s in b.subs:
        home = T.home_broker(b.g, s)
        if ("down", s) not in b.index or not b._p(home).restart_at_s:
            continue
        bp, link = b._p(home), b.g.edges[s, home][T.PARAMS]
        st = b.stations[b.index[("down", s)]]
        q = downlink_queue(link, bp, st.name)  # keeps the queue's overflow policy (models.mechanisms.priority.channels)
        if q["overflow"] == Overflow.BACKPRESSURE:
            raise ConfigError(f"{st.name}.overflow", q["overflow"], "not backpressure with restart_at_s")
        st.discipline = RestartQueueDiscipline(
            servers=1, capacity_messages=q["queue_messages"], capacity_bytes=q["queue_bytes"],
            overflow=q["overflow"], disk_cost_s=q["disk_cost_s"],
            restart_at_s=bp.restart_at_s, downtime_s=bp.restart_downtime_s)
        b.restart_owner = getattr(b, "restart_owner", {})
        b.restart_owner[b.index[("down", s)]] = home


def mark_durable(b, plan):
    """Tell restarting queues which visits survive: persistent flows in a durable queue."""
    import numpy as np

    persistent = np.array([b._p(b.pubs[int(p)]).persistent for p in plan.flow_publisher], dtype=bool)
    durable = persistent[plan.flow] if len(plan.flow) else np.zeros(0, bool)
    owners = {b.index[("broker", name)]: name for name in b.brokers}
    owners.update(getattr(b, "restart_owner", {}))
    for idx, name in owners.items():
        st = b.stations[idx]
        if hasattr(st.discipline, "durable_visit"):
            st.discipline.durable_visit = durable & bool(b._p(name).durable_queue)
