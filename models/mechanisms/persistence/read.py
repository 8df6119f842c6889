"""Read-back of stored messages consumed after they left memory.

A broker keeps up to ``resident`` bytes of stored messages in memory (its
own limit plus the share of the host's page cache the store's files get,
:meth:`pubsim.models.params.store.StoreParams.resident_bytes`). A message
published while more than that was stored ahead of it is kept only on disk
and read back when it is dispatched: one read of ``read_ops`` operations and
its bytes at the disk's read bandwidth
(:func:`pubsim.models.mechanisms.persistence.store.read_s`).

The bytes stored ahead of message k when it was published are those that
left this stage between k's publication and k's arrival here (the stage is
FIFO on the broker's persistent path, so whatever was ahead of k then
leaves before k): the station counts them from its own arrival history, so
the decision depends only on arrivals already seen and both drivers take
it alike. Preloaded messages (stored before the run) also pay their
acknowledgement record here (messages written in the run pay it with their
write, :mod:`.store`). The backlog counted is the one ahead of this stage
(the broker's queue and its disk), not the per-consumer queues after it.
"""

from __future__ import annotations

import numpy as np

from ....sim.disciplines import FifoDiscipline, Overflow
from ...stations.core import ModelStation
from .store import ack_s, read_s

__all__ = ["ReadStation"]


class ReadStation(ModelStation):
    """Disk reads of a broker's stored messages on dispatch (one at a time, FIFO).

    Parameters
    ----------
    name : str
    disk : DiskParams
    store : StoreParams
    resident_bytes : float
        Stored bytes held in memory; inf = everything (no read).
    window : (float, float)
    """

    def __init__(self, name, disk, store, *, resident_bytes, window):
        disc = FifoDiscipline(servers=1, capacity_messages=None, overflow=Overflow.DROP_NEWEST)
        super().__init__(name, "disk_read", disc, window=window)
        self.disk = disk
        self.store = store
        self.resident_bytes = float(resident_bytes)
        self.preloaded_flow = None  # per flow: preloaded (set in wire)
        self._n = 0  # arrivals seen so far
        self._t = np.empty(64)  # their times, in arrival order (first _n used)
        self._cum = np.zeros(65)  # bytes of the first i arrivals, i = 0.._n

    def wire(self, index, wiring):
        """Which flows are preloaded (they pay their acknowledgement record here)."""
        self.preloaded_flow = wiring.preloaded_flow

    def stored_ahead_bytes(self, packets) -> np.ndarray:
        """Bytes that left this stage between each packet's publication and its arrival (and record the arrivals)."""
        n0, k = self._n, len(packets)
        if n0 + k > len(self._t):  # grow by doubling (the reference driver brings one packet at a time)
            cap = max(2 * len(self._t), n0 + k)
            self._t = np.concatenate([self._t[:n0], np.empty(cap - n0)])
            self._cum = np.concatenate([self._cum[: n0 + 1], np.zeros(cap - n0)])
        self._t[n0 : n0 + k] = packets.t
        self._cum[n0 + 1 : n0 + k + 1] = self._cum[n0] + np.cumsum(packets.size, dtype=np.float64)
        self._n = n0 + k
        own = n0 + np.arange(k)
        first = np.minimum(np.searchsorted(self._t[: self._n], packets.pub_t, side="right"), own)
        return self._cum[own] - self._cum[first]

    def on_disk(self, packets) -> np.ndarray:
        """Which packets are read back from disk (stored beyond memory when published)."""
        return self.stored_ahead_bytes(packets) > self.resident_bytes

    def service_s(self, packets):
        size = packets.size.astype(np.float64)
        t = np.where(self.on_disk(packets), read_s(self.disk, self.store, size), 0.0)
        if self.preloaded_flow is not None:
            t = t + self.preloaded_flow[self.plan.flow[packets.visit]] * ack_s(self.disk, self.store)
        return t
