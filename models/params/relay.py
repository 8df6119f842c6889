"""Parameters of an ILDM interworking node (relay) paired with a broker.

The station and its demand are in :mod:`pubsim.models.mechanisms.ildm.relay`.
A node is an MQTT endpoint towards its neighbours: a copy forwarded over an
inter-node link costs the sending node a delivery (``forward_cost_s``) and
the receiving node an ingress (``relay_cost_s``), and with per-hop QoS both
ends handle the hop's acknowledgements (``control_cost_s`` each). Under
Subscription Flooding a node also matches every PUBLISH against the
inter-subscription tables its neighbours installed
(``table_entry_cost_s``, ``table_match_cost_s``); Publication Flooding
consults no table (Banno et al. 2017, SYSTEMS.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...sim.distributions import Constant, Distribution
from ...sim.errors import ConfigError
from .mapping import MAX_WORKERS, check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["RelayParams", "SENDER_ACKS", "RECEIVER_ACKS"]

_ZERO = Constant(value=0.0)


#: Ack packets the SENDING node handles per PUBLISH hop, by QoS (QoS 2: PUBREC in, PUBREL out, PUBCOMP in).
SENDER_ACKS = {0: 0, 1: 1, 2: 3}
#: Ack packets the RECEIVING node handles per PUBLISH hop, by the hop's QoS
#: (QoS 1: PUBACK out; QoS 2: PUBREC out, PUBREL in, PUBCOMP out; MQTT 3.1.1 §4.3).
RECEIVER_ACKS = {0: 0, 1: 1, 2: 3}


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
        Cost per control packet (inter-subscription, per-hop ack), s; charged
        for the acks of the copies this node sends and, when
        ``charge_inbound_acks``, of the copies it receives.
    charge_inbound_acks : bool
        Whether the receiving node also pays ``control_cost_s`` per ack packet
        of a hop that brought it a copy (``RECEIVER_ACKS`` of the hop's QoS:
        the sending node's ``hop_qos``, or the bridge hop's QoS when the
        sender is a plain broker, :func:`pubsim.models.params.bridge.hop_qos`).
        Default True: the receiver of a QoS 1 hop sends a PUBACK, of a QoS 2
        hop a PUBREC and a PUBCOMP and reads a PUBREL (MQTT 3.1.1 §4.3), so
        both ends of a hop work for it. False is the earlier sender-only model
        (results before issue 14 with ``hop_qos`` > 0).
    table_entry_cost_s : float
        Subscription Flooding only: cost per inter-subscription installed at
        this node (in the tables of the neighbours a PUBLISH may go to), per
        PUBLISH, s (a linear scan of the tables). Default 0: an assumption
        (not measured).
    table_match_cost_s : float
        Subscription Flooding only: cost per inter-subscription that matches
        the PUBLISH's topic, s. Default 0: an assumption (not measured).
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
    charge_inbound_acks: bool = field(default=True, metadata={"unit": "flag"})
    table_entry_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    table_match_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    workers: int = field(default=1, metadata={"unit": "positive_count", "max": MAX_WORKERS})
    queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if self.hop_qos not in SENDER_ACKS:
            raise ConfigError("hop_qos", self.hop_qos, "a QoS level 0, 1 or 2")
