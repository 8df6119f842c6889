"""A host's network card, one direction: a FIFO transmitter shared by every
connection of the host's processes that crosses it.

Service of a frame = its wire bytes (payload, protocol framing and the
connection's per-message overhead, as on the link) / ``card_Bps``; the frame
then spends ``card_latency_s`` in the card before it goes on. One card station
per host and direction (full duplex: transmit and receive queues are separate).
"""

from __future__ import annotations

import numpy as np

from ....sim.disciplines import FifoDiscipline, Overflow
from ...protocol import needs_topic, wire_bytes
from ...stations.core import ModelStation

__all__ = ["CardStation", "TRANSMIT", "RECEIVE"]

#: Directions of a card (the station's role is ``card_tx`` / ``card_rx``).
TRANSMIT = "tx"
RECEIVE = "rx"


class CardStation(ModelStation):
    """One direction of a host's network card.

    Parameters
    ----------
    name : str
    host : models.params.host.HostParams
    direction : str
        :data:`TRANSMIT` (its visits' child is the link) or :data:`RECEIVE`
        (its visits' parent is the link).
    protocol : str
        Framing protocol (:mod:`pubsim.models.protocol`).
    overhead_bytes : dict of int -> int
        Per-message overhead of each link station (by index) whose frames pass the card.
    window : (float, float)
    """

    def __init__(self, name, host, *, direction, protocol, overhead_bytes, window):
        disc = FifoDiscipline(servers=1, capacity_messages=None, overflow=Overflow.DROP_NEWEST)
        super().__init__(name, f"card_{direction}", disc, window=window)
        self.host = host
        self.direction = direction
        self.protocol = protocol
        self.overhead_bytes = dict(overhead_bytes)
        self._overhead: np.ndarray | int = 0
        self._topic = np.zeros(0, dtype=np.int64)

    def wire(self, index, wiring):
        """Overhead bytes per visit, from the link next to each of this card's visits
        (one number when all those links have the same), and the topic bytes per flow."""
        plan = wiring.plan
        self._topic = wiring.flow_topic_bytes
        values = set(self.overhead_bytes.values())
        if len(values) == 1:
            self._overhead = values.pop()
            return
        overhead = np.zeros(plan.n_visits, dtype=np.int64)
        visits = np.flatnonzero(plan.station == index)
        link = plan.child_idx[plan.child_ptr[visits]] if self.direction == TRANSMIT else plan.parent[visits]
        overhead[visits] = [self.overhead_bytes[int(s)] for s in plan.station[link].tolist()]
        self._overhead = overhead

    def wire_bytes(self, packets):
        """Bytes each frame puts on the wire (as on its link, :func:`pubsim.models.protocol.wire_bytes`)."""
        topic = self._topic[self.plan.flow[packets.visit]] if needs_topic(self.protocol) else None
        overhead = self._overhead if np.ndim(self._overhead) == 0 else self._overhead[packets.visit]
        return wire_bytes(self.protocol, packets.size, topic, overhead)

    def service_s(self, packets):
        return self.wire_bytes(packets) / self.host.card_Bps

    def after_service(self, served):
        return served.depart + self.host.card_latency_s, np.zeros(len(served.depart), dtype=np.int64)

    @property
    def lookahead_s(self):
        return self.host.card_latency_s
