"""Priority channels and per-client queue policies as a registry entry (rules in :mod:`.channels`).

* a broker-to-subscriber link is the broker's per-client queue: its
  limits, order (FIFO or priority), overflow policy, priority cap and
  spill cost (:func:`~.channels.downlink_queue`);
* every flow's priority goes to the route plan.
"""

from __future__ import annotations

from ..context import CompileContext
from ..keys import StationKey, StationKind
from .channels import downlink_queue, flow_priorities

__all__ = ["PRIORITY", "Priority"]


class Priority:
    """Per-client queues and flow priorities."""

    name = "priority"

    def link_options(self, ctx: CompileContext, key: StationKey) -> dict | None:
        """The broker's per-client queue policy on a downlink."""
        if key.kind is not StationKind.DOWNLINK:
            return None
        s = key.node
        b = ctx.home(s)
        return downlink_queue(ctx.link_params(s, b), ctx.params(b))

    def plan_options(self, ctx: CompileContext, flows) -> dict:
        """Each flow's priority."""
        return {"flow_priority": flow_priorities([ctx.params(p) for p in ctx.publishers], ctx.topics, flows)}


PRIORITY = Priority()
