"""Parameters of a broker's disk for persistent messages.

The station is :class:`pubsim.models.mechanisms.persistence.disk.DiskStation`
(writes, group commit) and, for messages read back from the disk on
consumption, :class:`pubsim.models.mechanisms.persistence.read.ReadStation`.
Without a store design (``BrokerParams.store`` None) only ``sync_latency_s``,
``bandwidth_Bps`` and ``batch_max_messages`` are used, as before; the store
(:mod:`pubsim.models.params.store`) adds the per-operation latency, the read
bandwidth and what each product writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["DiskParams"]


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
    read_bandwidth_Bps : float
        Sequential read bandwidth, bytes/s (messages read back on consume;
        used with a store).
    op_latency_s : float
        Latency of one read or write operation besides its transfer time, s
        (command overhead on an SSD, a seek on a hard disk); used with a
        store, which says how many operations a message costs.
    provenance : Provenance
    """

    sync_latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    bandwidth_Bps: float = field(default=math.inf, metadata={"unit": "bandwidth"})
    batch_max_messages: int = field(default=1, metadata={"unit": "positive_count"})
    read_bandwidth_Bps: float = field(default=math.inf, metadata={"unit": "bandwidth"})
    op_latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.bandwidth_Bps > 0:
            raise ConfigError("bandwidth_Bps", self.bandwidth_Bps, "a bandwidth > 0")
        if not self.read_bandwidth_Bps > 0:
            raise ConfigError("read_bandwidth_Bps", self.read_bandwidth_Bps, "a bandwidth > 0")

    def throughput_bound_per_s(self, size_bytes: float) -> float:
        """Messages per second with full batches of ``size_bytes`` messages (no store)."""
        b = self.batch_max_messages
        return b / (self.sync_latency_s + b * size_bytes / self.bandwidth_Bps)
