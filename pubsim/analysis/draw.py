"""A drawing of a topology: brokers and sockets as a tree, clients grouped, links labelled.

:func:`topology_figure` returns a matplotlib Figure (saving is the caller's
choice; ``pubsim draw`` saves it). Brokers (and ZeroMQ sockets) are laid out
as a tree by their distance from the centre of the broker graph; each
broker's clients are drawn as two group nodes ("12 publishers", "40
subscribers") rather than one node each, so a 5-broker tree with 100 clients
stays readable. Edges carry the link parameters (bandwidth, latency) in
human units; a broker with an ILDM relay is marked ``+ relay``.
"""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx
from matplotlib.figure import Figure

from ..models import topology as T
from ..sim.units import format_duration_s, format_rate_Bps

__all__ = ["topology_figure", "link_label"]

_SLOT = 4.4  # horizontal room per hub: the hub and its two client groups beside it
_COLORS = {"broker": "#4c72b0", "socket": "#8172b2", "publisher": "#55a868", "subscriber": "#c44e52"}


def link_label(link) -> str:
    """``"100 Mbit/s, 1 ms"`` for a :class:`~pubsim.LinkParams` (bandwidth in bits, as links are sold)."""
    parts = []
    if math.isfinite(link.bandwidth_Bps):
        parts.append(format_rate_Bps(link.bandwidth_Bps))
    if link.latency_s > 0:
        parts.append(format_duration_s(link.latency_s))
    return ", ".join(parts) or "free link"


def _hubs(g):
    return T.brokers(g) + T.sockets(g)


def _tree_positions(g, hubs, per_row=4):
    """x, y of each hub: depth from the centre of its component down, siblings side by side;
    separate components (brokerless sockets, disjoint trees) wrap after ``per_row``."""
    hub_graph = g.subgraph(hubs)
    pos, x0, y0, row_depth = {}, 0.0, 0.0, 0
    comps = sorted(nx.connected_components(hub_graph), key=lambda c: sorted(c)[0])
    for i, comp in enumerate(comps):
        if i and i % per_row == 0:  # next row of components
            x0, y0, row_depth = 0.0, y0 - 2.0 * (row_depth + 1), 0
        sub = hub_graph.subgraph(comp)
        root = sorted(nx.center(sub))[0]
        layers = {}
        for node, depth in sorted(nx.single_source_shortest_path_length(sub, root).items()):
            layers.setdefault(depth, []).append(node)
        width = max(len(v) for v in layers.values())
        row_depth = max(row_depth, max(layers))
        for depth, nodes in layers.items():
            for k, node in enumerate(sorted(nodes)):
                pos[node] = (x0 + (k + 0.5) * width / len(nodes) * _SLOT, y0 - 2.0 * depth)
        x0 += _SLOT * width
    return pos


def _client_groups(g, hub):
    """(kind, count, label of their links) of the clients attached to ``hub``."""
    out = []
    for kind in (T.NodeKind.PUBLISHER, T.NodeKind.SUBSCRIBER):
        members = [n for n in T.clients(g, kind) if hub in g.neighbors(n)]
        if members:
            labels = Counter(link_label(g.edges[n, hub][T.PARAMS]) for n in members)
            text = labels.most_common(1)[0][0] + (" (mixed)" if len(labels) > 1 else "")
            out.append((str(kind.value), len(members), text))
    return out


def topology_figure(g, *, title: str | None = None) -> Figure:
    """A Figure of topology ``g`` (see the module docstring)."""
    hubs = _hubs(g)
    pos = _tree_positions(g, hubs)
    n_layers = 1 + round(max((-y / 2.0 for _, y in pos.values()), default=0))
    span = max((x for x, _ in pos.values()), default=1.0) + 2.0
    fig = Figure(figsize=(max(6.0, 0.9 * span), 1.6 + 1.6 * n_layers), constrained_layout=True)
    ax = fig.subplots()
    for a, b in g.subgraph(hubs).edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ax.plot([xa, xb], [ya, yb], color="grey", zorder=1)
        ax.annotate(
            link_label(g.edges[a, b][T.PARAMS]),
            ((xa + xb) / 2, (ya + yb) / 2),
            fontsize=8,
            ha="center",
            va="center",
            backgroundcolor="white",
        )
    for hub in hubs:
        x, y = pos[hub]
        kind = str(getattr(g.nodes[hub][T.KIND], "value", g.nodes[hub][T.KIND]))
        relay = " + relay" if g.nodes[hub].get(T.RELAY) is not None else ""
        ax.annotate(
            f"{hub}{relay}",
            (x, y),
            ha="center",
            va="center",
            fontsize=9,
            color="white",
            zorder=3,
            bbox={"boxstyle": "round", "fc": _COLORS.get(kind, "grey"), "ec": "none"},
        )
        groups = _client_groups(g, hub)
        for kind, count, text in groups:  # publishers on the left, subscribers on the right
            gx, gy = x + (-1.45 if kind == "publisher" else 1.45), y - 0.35
            ax.plot([x, gx], [y, gy], color="lightgrey", zorder=0)
            noun = kind if count == 1 else f"{kind}s"
            ax.annotate(
                f"{count} {noun}\n{text}",
                (gx, gy),
                ha="center",
                va="center",
                fontsize=7,
                zorder=3,
                bbox={"boxstyle": "round", "fc": "white", "ec": _COLORS[kind]},
            )
    xs = [x for x, _ in pos.values()] or [0.0]
    ax.set_xlim(min(xs) - 2.2, max(xs) + 2.2)
    ax.set_ylim(-2.0 * (n_layers - 1) - 0.9, 0.6)
    ax.set_axis_off()
    forwarding = g.graph.get(T.FORWARDING)
    ax.set_title(
        title
        or f"{len(T.brokers(g))} brokers, {len(T.sockets(g))} sockets, "
        f"{len(T.clients(g, T.NodeKind.PUBLISHER))} publishers, "
        f"{len(T.clients(g, T.NodeKind.SUBSCRIBER))} subscribers"
        + (f"; forwarding: {getattr(forwarding, 'value', forwarding)}" if len(T.brokers(g)) > 1 else "")
    )
    return fig
