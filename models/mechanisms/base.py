"""The plug-in interface of a mechanism.

A mechanism is an object with a ``name`` and any of the hooks below; the
compiler (:func:`pubsim.models.assembly.build.build_network`) calls each hook
of every entry of :data:`pubsim.models.assembly.registry.MECHANISMS`, in
registry order unless said otherwise. All hooks are optional.

``prepare(ctx)``
    Fill the context fields the mechanism owns (subscription tables, ILDM
    control plane, socket tables) before any station is built.
``add_stations(ctx)``
    Build this mechanism's stations with ``ctx.add_station`` / ``ctx.add_link``.
    Registry order is station order, hence the order of the records.
``link_options(ctx, key) -> dict or None``
    Keyword arguments for the link station of ``key`` (queue policy,
    ``session``, ``restart``, or ``station_class`` with its options); merged
    in registry order by :meth:`CompileContext.add_link`.
``folds_subscriber(ctx, subscriber) -> bool``
    True if the subscriber is served inside its downlink (no station of its own).
``route(ctx, publisher, topic) -> Hop or None``
    The route tree of one flow (the core: uplink, then the entry hop at the
    home node); the first entry returning a Hop builds it.
``entry_hop(ctx, node, came_from, topic, ingress) -> Hop or None``
    The hop where a copy enters ``node``: asked from the *last* entry to the
    first, so a later mechanism refines an earlier one (a relay in front of a
    broker, a socket instead of a broker).
``local_hops(ctx, node, topic) -> list of Hop``
    Copies a broker ``node`` delivers locally besides those to its table's
    plain subscribers (a share group's dispatch hop).
``forward_hops(ctx, node, came_from, topic) -> list of Hop``
    Copies ``node`` forwards to neighbour nodes.
``wrap_route(ctx, publisher, root) -> Hop``
    Rewrite a flow's route tree (disks below persistent broker visits, the
    encode stage before the uplink), in registry order.
``plan_options(ctx, flows) -> dict``
    Keyword arguments of :class:`pubsim.sim.routing.RoutePlan` (flow priorities).
``wire(ctx, wiring)``
    Fill per-visit arrays of the :class:`pubsim.models.stations.wiring.Wiring`
    once the route plan exists; the stations take them in their own ``wire``.
``matching_subscribers(ctx, topic) -> int``
    Subscribers a publication on ``topic`` reaches through this mechanism
    (for the S/P ratio).
``wrap_source(ctx, publisher, source) -> source``
    Wrap a publisher's publication source (outages and Will messages).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Mechanism", "HOOKS"]

#: Hook names the compiler calls (see the module docstring).
HOOKS = (
    "prepare",
    "add_stations",
    "link_options",
    "folds_subscriber",
    "route",
    "entry_hop",
    "local_hops",
    "forward_hops",
    "wrap_route",
    "plan_options",
    "wire",
    "matching_subscribers",
    "wrap_source",
)


@runtime_checkable
class Mechanism(Protocol):
    """A registry entry: a name and any of the optional hooks of :data:`HOOKS`.

    Attributes
    ----------
    name : str
        Short name, shown by ``pubsim features`` and in errors.
    """

    name: str
