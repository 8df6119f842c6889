"""The ``turns`` registry entry: brokers with ``copies_in_turn`` send each copy as it is written."""

from __future__ import annotations

import numpy as np

from ..context import CompileContext
from ..keys import StationKey
from .leads import copy_leads_s

__all__ = ["Turns", "TURNS"]


class Turns:
    """Set the route plan's ``child_lead_s`` below the visits of each broker whose params set
    ``copies_in_turn`` (:func:`.leads.copy_leads_s`, the copies in the order of the visit's
    children); :meth:`pubsim.sim.routing.RoutePlan.children_by_station` sends them that
    much earlier than the broker's departure."""

    name = "turns"

    def wire(self, ctx: CompileContext, wiring) -> None:
        """Leads below every visit of such a broker, once the route plan exists."""
        plan = wiring.plan
        for b in ctx.brokers:
            p = ctx.params(b)
            if not p.copies_in_turn:
                continue
            key = StationKey.broker(b)
            per_copy_s = p.delivery_cost_s.min_value * getattr(ctx.station(key), "stretch", 1.0)
            for v in np.flatnonzero(plan.station == ctx.index_of(key)):
                a, z = plan.child_ptr[v], plan.child_ptr[v + 1]
                if z - a > 1 and not plan.choice[v]:
                    plan.child_lead_s[plan.child_idx[a:z]] = copy_leads_s(z - a, per_copy_s)


TURNS = Turns()
