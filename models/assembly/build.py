"""Compile a validated topology into a runtime :class:`pubsim.sim.network.Network`.

:func:`build_network` runs the registry (:data:`pubsim.models.assembly.registry.MECHANISMS`)
over one :class:`~pubsim.models.mechanisms.context.CompileContext`:

1. ``prepare``: subscription tables, the ILDM control plane, socket tables;
2. ``add_stations``: stations in registry order (each publisher's uplink;
   each broker; relays; both directions of each bridge; sockets and their
   pipes; downlinks and subscribers; disks; encode stations);
3. routes: per (publisher, topic) flow, ``route`` (uplink, then the entry
   hop of the home node, built by ``entry_hop``/``forward_hops``), then
   ``wrap_route`` (disks, encode stage);
4. the route plan (``plan_options``: flow priorities);
5. ``wire``: per-visit arrays into one :class:`~pubsim.models.stations.wiring.Wiring`,
   which every station then takes in its own ``wire`` (the bind step);
6. sources (``wrap_source``) and the :class:`~pubsim.sim.network.Network`.

Route trees follow the forwarding rule of the graph (SYSTEMS.md §3):
``flood`` sends every publication to every broker of the tree;
``subscription`` only towards brokers behind which a subscriber's filter
matches the topic (the steady state of Subscription Flooding); ``bridge``
along static bridge patterns. Which neighbour a copy goes to is decided by
the ILDM control plane (:func:`pubsim.models.mechanisms.ildm.control.steady_state`),
the same model that produces the protocol's message flows. Nothing here is
specific to a mechanism.
"""

from __future__ import annotations

from functools import partial

import networkx as nx
import numpy as np

from ...sim.network import Network
from ...sim.rng import StreamFactory
from ...sim.routing import RoutePlan
from .. import topology as T
from ..mechanisms.context import CompileContext, published_topics
from ..stations.sources import make_source
from ..stations.wiring import Wiring
from .features import check_features
from .registry import MECHANISMS, hooks
from .table import parameter_table

__all__ = ["build_network", "compile_context", "parameter_table"]


def compile_context(
    g: nx.Graph, streams: StreamFactory, window: tuple[float, float], mechanisms: tuple = MECHANISMS
) -> CompileContext:
    """A compile context of ``g`` after every mechanism's ``prepare`` hook (no stations yet)."""
    ctx = CompileContext(g, streams, window, mechanisms)
    for prepare in hooks("prepare", mechanisms):
        prepare(ctx)
    return ctx


def _flows(ctx: CompileContext) -> list:
    """(publisher index, topic index, root Hop) of every flow."""
    route, wrap = hooks("route", ctx.mechanisms), hooks("wrap_route", ctx.mechanisms)
    out = []
    for i, p in enumerate(ctx.publishers):
        for topic in published_topics(ctx.params(p)):
            root = next(r for r in (h(ctx, p, topic) for h in route) if r is not None)
            for w in wrap:
                root = w(ctx, p, root)
            out.append((i, ctx.topics.index(topic), root))
    return out


def _sp_ratio(ctx: CompileContext) -> float:
    """sum_i P(t_i) S(t_i) / sum_i P(t_i) over topics t_i (SYSTEMS.md §4)."""
    count = hooks("matching_subscribers", ctx.mechanisms)
    n_pub = {t: sum(t in ctx.params(p).topics for p in ctx.publishers) for t in ctx.topics}
    n_sub = {t: sum(h(ctx, t) for h in count) for t in ctx.topics}
    total = sum(n_pub.values())
    return sum(n_pub[t] * n_sub[t] for t in ctx.topics) / total if total else 0.0


def build_network(
    g: nx.Graph, *, seed: int, replication: int = 0, window: tuple[float, float] = (0.0, np.inf)
) -> Network:
    """Runtime network of topology ``g`` for one replication.

    Parameters
    ----------
    g : networkx.Graph
        A topology (validated again here, features combined as
        :func:`pubsim.models.assembly.features.check_features` allows).
    seed, replication : int
        Root seed and replication index; every component gets its own streams.
    window : (float, float)
        Measurement window, s.

    Returns
    -------
    pubsim.sim.network.Network
    """
    T.validate(g)
    check_features(g)
    streams = StreamFactory(seed, replication)
    ctx = compile_context(g, streams, window)
    for add in hooks("add_stations"):
        add(ctx)
    flows = _flows(ctx)
    options = {}
    for plan_options in hooks("plan_options"):
        options.update(plan_options(ctx, flows))
    plan = RoutePlan(flows, **options)
    topic_bytes = np.array([len(t.encode()) for t in ctx.topics], dtype=np.int64)
    wiring = Wiring(plan, topic_bytes[plan.flow_topic] if len(plan.flow_topic) else np.empty(0, np.int64))
    for wire in hooks("wire"):
        wire(ctx, wiring)
    for i, st in enumerate(ctx.stations):  # the bind step of the model stations
        st.wire(i, wiring)
    wrap = hooks("wrap_source")
    sources = []
    for p in ctx.publishers:
        params = ctx.params(p)
        src = make_source(params, [ctx.topics.index(t) for t in params.topics], streams, f"publisher:{p}")
        for w in wrap:
            src = w(ctx, p, src)
        sources.append(src)
    names = {"publisher": ctx.publishers, "subscriber": ctx.subscribers, "topic": ctx.topics}
    return Network(
        ctx.stations,
        plan,
        sources,
        names=names,
        sp_ratio=_sp_ratio(ctx),
        window=window,
        parameters=partial(parameter_table, g.copy()),  # made when read: long schedules make long rows
        control=ctx.control,
        confirm_delay_s=wiring.confirm_delay_s,
    )
