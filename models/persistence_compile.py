"""Compiling broker disks (:mod:`models.disk`) into stations and routes.

Hooks called by :mod:`models.compile`: one disk station per broker with a
``disk``; on the routes of persistent publishers, each visit of such a
broker gets the disk as its only child, and the broker's copies hang below
the disk (they leave when their write is synced).
"""
from __future__ import annotations

from sim.routing import Hop

from .disk import DiskStation

__all__ = ["add_disk_stations", "insert_disks"]


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
