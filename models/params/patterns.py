"""Parameters of the messaging patterns: push/pull acknowledgements and polling.

The models are in :mod:`pubsim.models.mechanisms.patterns`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["AckParams", "PollingParams"]


@dataclass(frozen=True, kw_only=True)
class AckParams:
    """The acknowledgement a worker returns for each command.

    Parameters
    ----------
    ack_bytes : int
        Bytes of one ack at the middleware layer (MQTT PUBACK: 4).
    ack_cost_s : float
        Broker CPU to relay one ack, s (0 for brokerless ZeroMQ).
    provenance : Provenance
    """

    ack_bytes: int = field(default=4, metadata={"unit": "size"})
    ack_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class PollingParams:
    """A polling client and the sensor it polls.

    Parameters
    ----------
    poll_interval_s : float
        Time between two requests, s (> 0).
    sample_interval_s : float
        Time between two sensor samples, s (> 0).
    request_delay_s, reply_delay_s : float
        One-way delays client -> sensor and back, s, used when no simulated
        request path gives the read times (an assumption; see provenance).
    provenance : Provenance
    """

    poll_interval_s: float = field(metadata={"unit": "duration"})
    sample_interval_s: float = field(metadata={"unit": "duration"})
    request_delay_s: float = field(default=0.0, metadata={"unit": "duration"})
    reply_delay_s: float = field(default=0.0, metadata={"unit": "duration"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("poll_interval_s", "sample_interval_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(name, getattr(self, name), "an interval > 0 s")
