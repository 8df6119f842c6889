"""Shared subscriptions as a registry entry.

* ``prepare``: every share group of every broker (the core's subscription
  tables hold the members' ``$share/...`` subscriptions,
  :class:`pubsim.models.params.topics.SubscriptionTable`); members of one group
  must share their broker and their QoS;
* ``add_stations``: one :class:`.dispatch.DispatchStation` per group (after
  every other station, so networks without groups keep their indices);
* ``local_hops``: at a broker visit, one copy per matching group: a choice
  visit at the group's dispatch station whose alternatives lead to each
  member's downlink (the broker pays one delivery per group);
* ``matching_subscribers``: a group counts once in the S/P ratio.
"""

from __future__ import annotations

from ....sim.errors import ConfigError
from ....sim.routing import Hop
from ..context import CompileContext
from ..core import delivery_hop
from ..keys import StationKey
from .dispatch import DispatchStation

__all__ = ["SHARED", "Shared"]


class Shared:
    """Share groups: their dispatch stations and hops."""

    name = "shared"

    def prepare(self, ctx: CompileContext) -> None:
        """Check each group: one broker, one QoS (``ctx.tables`` are the core's)."""
        seen: dict = {}
        for b, table in ctx.tables.items():
            for group, members in table.members().items():
                for s in members:
                    if group in seen and seen[group][0] != b:
                        raise ConfigError(
                            f"{s}.subscriptions",
                            group,
                            f"members of one share group at one broker (also at {seen[group][0]}; "
                            "a group spanning brokers is not modelled)",
                        )
                    seen.setdefault(group, (b, s))
                qos = {ctx.params(s).qos for s in members}
                if len(qos) > 1:
                    raise ConfigError(
                        f"{members[-1]}.qos",
                        ctx.params(members[-1]).qos,
                        f"the QoS of the other members of share group {group} ({ctx.params(members[0]).qos})",
                    )

    def add_stations(self, ctx: CompileContext) -> None:
        """One dispatch station per share group of each broker."""
        for b in ctx.brokers:
            table = ctx.tables.get(b)
            if table is None:
                continue
            for group, members in table.members().items():
                name = f"dispatch:{b}:{group}"
                policy = ctx.params(b).shared_dispatch
                station = DispatchStation(name, len(members), policy, streams=ctx.streams, window=ctx.window)
                ctx.add_station(StationKey.dispatch(b, group), station)

    def local_hops(self, ctx: CompileContext, node, topic: str) -> list[Hop]:
        """One copy per share group matching ``topic`` at broker ``node``: a choice among its members."""
        table = ctx.tables.get(node)
        if table is None:
            return []
        members = table.members()
        hops = []
        for group, _ in table.groups(topic):
            at = ctx.index_of(StationKey.dispatch(node, group))
            alternatives = [Hop(at, children=[delivery_hop(ctx, StationKey.downlink(s), s)]) for s in members[group]]
            hops.append(Hop(at, choice=True, children=alternatives))
        return hops

    def matching_subscribers(self, ctx: CompileContext, topic: str) -> int:
        """Share groups matching ``topic``, each counted once."""
        return sum(len(ctx.tables[b].groups(topic)) for b in ctx.brokers if b in ctx.tables)


SHARED = Shared()
