"""The broker station of a broker with I/O cycles."""

from __future__ import annotations

import math

import numpy as np

from ...stations.core import BrokerStation, _background_stretch, _quota, _wakeup_s
from .discipline import CycleDiscipline

__all__ = ["CycleBrokerStation"]


class CycleBrokerStation(BrokerStation):
    """A :class:`BrokerStation` whose worker runs I/O cycles (``params.io``).

    Demand per message as the plain broker's; a message that opens a cycle
    opens a cycle whose last member is followed by ``io.cycle_cost_s + io.flush_cost_s x copies`` of work (stretched by the
    background load like every cost). Parameters as :class:`BrokerStation`.
    """

    def __init__(self, name, params, *, filters, streams, window, connections=0):
        super().__init__(name, params, filters=filters, streams=streams, window=window, connections=connections)
        most = params.io.cycle_max_messages
        self.discipline = CycleDiscipline(
            idle_extra_s=_wakeup_s(params, connections) * _background_stretch(params),
            max_members=math.inf if most is None else float(most),
            **_quota(params),
        )

    def before_run(self, packets, service_s, size_bytes):
        """Hand the discipline each message's cycle cost, s."""
        copies = (self.plan.n_children if self.copies_by_visit is None else self.copies_by_visit)[packets.visit]
        cost = self.params.io.cost_s(np.asarray(copies, dtype=np.float64)) * self.stretch
        self.discipline.set_cycle_cost(cost)
