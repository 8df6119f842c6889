"""The interworking node (relay) of a broker in ILDM (SYSTEMS.md §3).

In ILDM clients publish to their node, not to the broker: the node hands each
PUBLISH to its local broker and forwards copies to neighbour nodes over the
tree links. With a relay the route of a publication is::

    uplink -> relay(Ik) -> { broker(Ik) -> downlinks ;
                             link Ik->Ij -> relay(Ij) -> ... }

Service demand of one PUBLISH at a relay (seconds of its worker's time)::

    relay + copies * (forward + acks(hop_qos) * control)
          + inbound_acks * control                         (charge_inbound_acks)
          + entries * table_entry + matches * table_match  (Subscription Flooding)

where ``copies`` is the number of copies sent to neighbour nodes (the copy
handed to the local broker is part of ``relay``) and ``acks`` the MQTT
acknowledgements the sender handles per hop: 0 at QoS 0, 1 (PUBACK) at QoS 1,
3 (PUBREC received, PUBREL sent, PUBCOMP received) at QoS 2. A copy that came
from a neighbour node was an ingress here (``relay``) and, with
``charge_inbound_acks``, its hop's acks are handled here too
(``inbound_acks``: ``RECEIVER_ACKS`` of the hop's QoS, the sending node's
``hop_qos`` or, from a plain broker, the bridge's
:func:`pubsim.models.params.bridge.hop_qos`; the default since issue 14).
``entries`` and ``matches`` are the inter-subscriptions the node consults
for the PUBLISH and those matching its topic
(:meth:`pubsim.models.mechanisms.ildm.control.ControlPlane.table_load`; 0
under Publication Flooding, which forwards without a table). Ack handling is
charged to the message that caused it (a modelling assumption: acks arrive
later, but a FIFO worker pays for them all the same).
"""

from __future__ import annotations

import numpy as np

from ....sim import kernels as K
from ....sim.disciplines import FifoDiscipline, Overflow
from ...params.relay import SENDER_ACKS
from ...stations.core import ModelStation, _open_fifo

__all__ = ["RelayStation"]


class RelayStation(ModelStation):
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
        self.load = None  # per-visit inbound acks and table counts (the bind step), or None

    def wire(self, index, wiring):
        """Per-visit inbound acks and inter-subscription table counts of this relay."""
        self.load = wiring.relay_load.get(index)

    def service_s(self, packets):
        n = len(packets)
        copies = (self.plan.n_children[packets.visit] - 1).astype(np.float64)
        control = self.control.take(n)
        per_copy = self.forward.take(n) + self.acks * control
        demand = self.relay.take(n) + copies * per_copy
        if self.load is None:
            return demand
        v = packets.visit
        p = self.params
        return (
            demand
            + self.load["inbound_acks"][v] * control
            + self.load["table_entries"][v] * p.table_entry_cost_s
            + self.load["table_matches"][v] * p.table_match_cost_s
        )

    @property
    def lookahead_s(self):
        return self.params.relay_cost_s.min_value

    def compiled_spec(self):
        """A relay with one FIFO worker and no queue limit, its demand as in
        :meth:`service_s` (:mod:`pubsim.sim.cycle_kernel`); None for anything else."""
        if type(self) is not RelayStation or not _open_fifo(self.discipline):
            return None
        p = self.params
        return {
            "kind": "relay",
            "discipline": self.discipline,
            "idle_extra_s": float(self.discipline.fs[K.IDLE_EXTRA]),
            "draws": (self.relay, self.forward, self.control),
            "acks": self.acks,
            "load": self.load,
            "table_entry_s": float(p.table_entry_cost_s),
            "table_match_s": float(p.table_match_cost_s),
        }
