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

from ....sim.disciplines import BatchDiscipline
from ...stations.core import ModelStation

__all__ = ["DiskStation"]


class DiskStation(ModelStation):
    """The disk stage of a broker: group-committed writes of persistent messages.

    Sits after the broker's worker on the route of persistent messages;
    copies go on to subscribers when their write is synced. The broker's
    route child is then the disk, not the copies: the persistence
    mechanism's ``wire`` hook gives the broker its copies per visit
    (:class:`pubsim.models.stations.wiring.Wiring`).

    Parameters
    ----------
    name : str
    params : DiskParams
    window : (float, float)
    """

    def __init__(self, name, params, *, window):
        disc = BatchDiscipline(batch_max_messages=params.batch_max_messages, batch_fixed_cost_s=params.sync_latency_s)
        super().__init__(name, "disk", disc, window=window)
        self.params = params

    def service_s(self, packets):
        return packets.size / self.params.bandwidth_Bps

    @property
    def lookahead_s(self):
        return self.params.sync_latency_s
