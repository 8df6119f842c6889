"""The interworking node (relay) of a broker in ILDM (SYSTEMS.md §3).

In ILDM clients publish to their node, not to the broker: the node hands each
PUBLISH to its local broker and forwards copies to neighbour nodes over the
tree links. With a relay the route of a publication is::

    uplink -> relay(Ik) -> { broker(Ik) -> downlinks ;
                             link Ik->Ij -> relay(Ij) -> ... }

Service demand of one PUBLISH at a relay (seconds of its worker's time)::

    relay + copies * (forward + acks(hop_qos) * control)

where ``copies`` is the number of copies sent to neighbour nodes (the copy
handed to the local broker is part of ``relay``) and ``acks`` the MQTT
acknowledgements the sender handles per hop: 0 at QoS 0, 1 (PUBACK) at QoS 1,
2 (PUBREC received, PUBREL sent; PUBCOMP closes it) at QoS 2. Ack handling is
charged to the message that caused it (a modelling assumption: acks arrive
later, but a FIFO worker pays for them all the same).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..sim.disciplines import FifoDiscipline, Overflow
from ..sim.distributions import Constant, Distribution
from ..sim.errors import ConfigError
from ..sim.station import Station

from .params import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["RelayParams", "RelayStation", "SENDER_ACKS"]

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
    workers: int = field(default=1, metadata={"unit": "positive_count"})
    queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self):
        check_fields(self)
        if self.hop_qos not in SENDER_ACKS:
            raise ConfigError("hop_qos", self.hop_qos, "a QoS level 0, 1 or 2")


class RelayStation(Station):
    """A relay node: FIFO workers, demand as in the module docstring.

    The local broker is always the first child of a relay visit, so the
    copies to neighbour nodes are the visit's other children.
    """

    def __init__(self, name, params, *, streams, window):
        cap = None if params.queue_messages is None else params.queue_messages + params.workers
        disc = FifoDiscipline(servers=params.workers, capacity_messages=cap, overflow=Overflow.DROP_NEWEST)
        super().__init__(name, "relay", disc, servers=params.workers, window=window)
        self.params = params
        self.acks = SENDER_ACKS[params.hop_qos]
        self.relay = streams.draws(params.relay_cost_s, name, "relay")
        self.forward = streams.draws(params.forward_cost_s, name, "forward")
        self.control = streams.draws(params.control_cost_s, name, "control")

    def service_s(self, packets):
        n = len(packets)
        copies = (self.plan.n_children[packets.visit] - 1).astype(np.float64)
        per_copy = self.forward.take(n) + self.acks * self.control.take(n)
        return self.relay.take(n) + copies * per_copy

    @property
    def lookahead_s(self):
        return self.params.relay_cost_s.min_value
