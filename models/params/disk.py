"""Parameters of a broker's disk for persistent messages (group commit).

The station is :class:`pubsim.models.mechanisms.persistence.disk.DiskStation`.
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
    provenance : Provenance
    """

    sync_latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    bandwidth_Bps: float = field(default=math.inf, metadata={"unit": "bandwidth"})
    batch_max_messages: int = field(default=1, metadata={"unit": "positive_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.bandwidth_Bps > 0:
            raise ConfigError("bandwidth_Bps", self.bandwidth_Bps, "a bandwidth > 0")

    def throughput_bound_per_s(self, size_bytes: float) -> float:
        """Messages per second with full batches of ``size_bytes`` messages."""
        b = self.batch_max_messages
        return b / (self.sync_latency_s + b * size_bytes / self.bandwidth_Bps)
