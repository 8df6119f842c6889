"""Compiling broker disks (:mod:`models.disk`) into stations and routes.

Hooks called by :mod:`models.compile`: one disk station per broker with a
``disk``; on the routes of persistent publishers, each visit of such a
broker gets the disk as its only child, and the broker's copies hang below
the disk (they leave when their write is synced).
"""
from __future__ import annotations

from sim.routing import Hop

from .disk import DiskStation

__all__ = ["add_disk_stations", "insert_disks", "mark_durable"]


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


def mark_durable(b, plan):
    """Tell restarting brokers which visits survive: persistent flows in a durable queue."""
    import numpy as np

    persistent = np.array([b._p(b.pubs[int(p)]).persistent for p in plan.flow_publisher], dtype=bool)
    for name in b.brokers:
        st = b.stations[b.index[("broker", name)]]
        if hasattr(st.discipline, "durable_visit"):
            durable = persistent[plan.flow] if len(plan.flow) else np.zeros(0, bool)
            st.discipline.durable_visit = durable & bool(b._p(name).durable_queue)
