"""Parameters of a host: a machine that processes are placed on.

A host has ``cores`` of relative ``speed`` (the calibration machine = 1.0:
every CPU cost of a process on the host is divided by it) and one network
card, full duplex, with a transmit and a receive queue of ``card_Bps`` each.
Connections between processes on different hosts pass the sender's transmit
queue and the receiver's receive queue; connections between processes on one
host skip the card (loopback, ``loopback_latency_s``). The stations are in
:mod:`pubsim.models.mechanisms.hosts`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...sim.errors import ConfigError
from .mapping import MAX_WORKERS, check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["HostParams"]


@dataclass(frozen=True, kw_only=True)
class HostParams:
    """A machine: cores, relative CPU speed, one network card.

    Parameters
    ----------
    cores : int
        CPU cores (vCPUs) the processes on the host share.
    speed : float
        CPU speed relative to the calibration machine (1.0): every CPU cost
        of a process placed on the host (broker, relay, socket, client
        processing) is divided by it.
    card_Bps : float
        Rate of the network card in each direction (full duplex), bytes/s;
        ``inf`` = no card limit.
    card_latency_s : float
        Time a frame spends in the card after transmission or reception
        (driver, interrupt moderation), s.
    loopback_latency_s : float
        One-way latency of a connection between two processes of the host
        (the loopback interface; it replaces the link's latency, jitter and
        bandwidth), s.
    memory_bytes : int or None
        Memory of the host, bytes (for mechanisms that need it; None = not stated).
    provenance : Provenance
    """

    cores: int = field(default=1, metadata={"unit": "positive_count", "max": MAX_WORKERS})
    speed: float = field(default=1.0, metadata={"unit": "float"})
    card_Bps: float = field(default=math.inf, metadata={"unit": "bandwidth"})
    card_latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    loopback_latency_s: float = field(default=0.0, metadata={"unit": "duration"})
    memory_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.speed > 0:
            raise ConfigError("speed", self.speed, "a relative CPU speed > 0 (calibration machine = 1.0)")
        if not self.card_Bps > 0:
            raise ConfigError("card_Bps", self.card_Bps, "a card rate > 0 bytes/s (or inf)")

    @property
    def has_card(self) -> bool:
        """Whether the card limits anything (finite rate or a latency)."""
        return self.card_Bps < math.inf or self.card_latency_s > 0
