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
from ...protocol import framing_bytes
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
        self._overhead = np.zeros(0, dtype=np.int64)
        self._topic = np.zeros(0, dtype=np.int64)

    def wire(self, index, wiring):
        """Overhead bytes per visit, from the link next to each of this card's visits."""
        plan = wiring.plan
        self._topic = wiring.flow_topic_bytes
        overhead = np.zeros(plan.n_visits, dtype=np.int64)
        for v in np.nonzero(plan.station == index)[0].tolist():
            link = plan.child_idx[plan.child_ptr[v]] if self.direction == TRANSMIT else plan.parent[v]
            overhead[v] = self.overhead_bytes[int(plan.station[link])]
        self._overhead = overhead

    def wire_bytes(self, packets):
        """Bytes each frame puts on the wire."""
        topic = self._topic[self.plan.flow[packets.visit]]
        return packets.size + framing_bytes(self.protocol, packets.size, topic) + self._overhead[packets.visit]

    def service_s(self, packets):
        return self.wire_bytes(packets) / self.host.card_Bps

    def after_service(self, served):
        return served.depart + self.host.card_latency_s, np.zeros(len(served.depart), dtype=np.int64)

    @property
    def lookahead_s(self):
        return self.host.card_latency_s
