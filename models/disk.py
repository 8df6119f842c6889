"""Disk model of a broker's persistent-message store (group commit).

A persistent message is durable once the write that holds it is synced.
The disk serves writes one at a time; a write takes every persistent
message queued when the previous one ended, up to ``batch_max_messages``
(group commit, as RabbitMQ's message store and database logs do), and lasts

    sync_latency + (bytes of the batch) / bandwidth

(:class:`pubsim.sim.disciplines.BatchDiscipline` with fixed cost = sync latency
and per-message cost = size / bandwidth). Throughput bound of full batches
of B messages of ``S`` bytes: ``B / (sync_latency + B S / bandwidth)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..sim.errors import ConfigError
from ..sim.station import Station

from .params import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["DiskParams", "DiskStation"]


@dataclass(frozen=True, kw_only=True)
class DiskParams:
    """A disk in the broker's path for persistent messages.

    Parameters
    ----------
    sync_latency_s : float
        Time of one fsync (write barrier), s: about 0.05-2 ms on SSDs, 5-15
        ms on 7200 rpm disks (rotation + seek).
    bandwidth_Bps : float
        Sequential write bandwidth, bytes/s.
    batch_max_messages : int
        Most messages made durable by one sync (group commit); 1 = a sync
        per message.
    provenance : Provenance
    """

    sync_latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    bandwidth_Bps: float = field(default=math.inf, metadata={"unit": "bandwidth"})
    batch_max_messages: int = field(default=1, metadata={"unit": "positive_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self):
        check_fields(self)
        if not self.bandwidth_Bps > 0:
            raise ConfigError("bandwidth_Bps", self.bandwidth_Bps, "a bandwidth > 0")

    def throughput_bound_per_s(self, size_bytes):
        """Messages per second with full batches of ``size_bytes`` messages."""
        b = self.batch_max_messages
        return b / (self.sync_latency_s + b * size_bytes / self.bandwidth_Bps)


class DiskStation(Station):
    """The disk stage of a broker: group-committed writes of persistent messages.

    Sits after the broker's worker on the route of persistent messages;
    copies go on to subscribers when their write is synced. At bind time it
    tells its broker station how many copies each persistent message makes
    (the broker's route child is the disk, not the copies).

    Parameters
    ----------
    name : str
    params : DiskParams
    broker : models.stations.BrokerStation
    window : (float, float)
    """

    def __init__(self, name, params, *, broker, window):
        from ..sim.disciplines import BatchDiscipline

        disc = BatchDiscipline(batch_max_messages=params.batch_max_messages,
                               batch_fixed_cost_s=params.sync_latency_s)
        super().__init__(name, "disk", disc, window=window)
        self.params = params
        self.broker = broker

    def bind(self, index, plan):
        super().bind(index, plan)
        mine = np.flatnonzero(plan.station == index)
        copies = plan.n_children.copy() if self.broker.copies_by_visit is None else self.broker.copies_by_visit
        copies[plan.parent[mine]] = plan.n_children[mine]
        self.broker.copies_by_visit = copies

    def service_s(self, packets):
        return packets.size / self.params.bandwidth_Bps

    @property
    def lookahead_s(self):
        return self.params.sync_latency_s
