"""Parameters of an ILDM interworking node (relay) paired with a broker.

The station and its demand are in :mod:`pubsim.models.mechanisms.ildm.relay`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...sim.distributions import Constant, Distribution
from ...sim.errors import ConfigError
from .mapping import MAX_WORKERS, check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["RelayParams", "SENDER_ACKS"]

_ZERO = Constant(value=0.0)


#: Ack packets the SENDING node handles per PUBLISH hop, by QoS (QoS 2: PUBREC in, PUBREL out, PUBCOMP in).
SENDER_ACKS = {0: 0, 1: 1, 2: 3}


@dataclass(frozen=True, kw_only=True)
class RelayParams:
    """An interworking node paired with a broker.

    Parameters
    ----------
    relay_cost_s : Distribution
        Cost per PUBLISH handled (receive, parse, hand to the local broker), s.
    forward_cost_s : Distribution
        Cost per copy forwarded to a neighbour node, s.
    control_cost_s : Distribution
        Cost per control packet (inter-subscription, per-hop ack), s.
    hop_qos : int
        QoS level (0, 1, 2) of the copies this node sends to its neighbours.
    workers : int
        Worker threads of the node (1: an event loop).
    queue_messages : int or None
        Limit of the node's input queue (including those in service); None = unlimited.
    provenance : Provenance
    """

    relay_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    forward_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    control_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    hop_qos: int = field(default=0, metadata={"unit": "count"})
    workers: int = field(default=1, metadata={"unit": "positive_count", "max": MAX_WORKERS})
    queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if self.hop_qos not in SENDER_ACKS:
            raise ConfigError("hop_qos", self.hop_qos, "a QoS level 0, 1 or 2")
