"""Disk model of a broker's persistent-message store (group commit).

A persistent message is durable once the write that holds it is synced.
The disk serves writes one at a time; a write takes every persistent
message queued when the previous one ended, up to ``batch_max_messages``
(group commit, as RabbitMQ's message store and database logs do), and lasts

    sync_latency + (bytes of the batch) / bandwidth

(:class:`pubsim.sim.disciplines.BatchDiscipline` with fixed cost = sync latency
and per-message cost = size / bandwidth). Throughput bound of full batches
of B messages of ``S`` bytes: ``B / (sync_latency + B S / bandwidth)``.

With a product's store design (``BrokerParams.store``) the per-message cost
and the batch rule are those of :mod:`.store` (operations, overhead and
acknowledgement records, large-message files, sync policy and flush timer).
"""

from __future__ import annotations

import math

from ....sim.disciplines import BatchDiscipline
from ...stations.core import ModelStation
from .store import batch_rule, write_s

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
    store : StoreParams or None
        The product's store design (None: payload writes and group commit only).
    """

    def __init__(self, name, params, *, window, store=None):
        most, fixed_s = batch_rule(params, store)
        most_bytes = None if store is None else store.batch_max_bytes
        disc = BatchDiscipline(
            batch_max_messages=most,
            batch_fixed_cost_s=fixed_s,
            batch_max_bytes=math.inf if most_bytes is None else float(most_bytes),
        )
        super().__init__(name, "disk", disc, window=window)
        self.params = params
        self.store = store
        self._fixed_s = fixed_s

    def service_s(self, packets):
        return write_s(self.params, self.store, packets.size)

    @property
    def lookahead_s(self):
        return self._fixed_s + float(write_s(self.params, self.store, 0.0))
