"""Which features a topology uses; the refused combinations of one compiled network's connections.

The one table of refused pairs is :data:`pubsim.models.params.features.REFUSED`:
pairs inside one parameter object are refused when that object is built;
pairs of scope ``connection`` are checked here, once per compile, by
:func:`check_features` (called by
:func:`pubsim.models.assembly.build.build_network` before any station is
built). A *connection* is each link station a compile builds (a
publisher's uplink, each direction of a bridge, a socket's pipe, a broker's
per-client queue on a downlink), with the features of its queue (effective
scheduling and overflow policy), of the QoS it carries and of the broker
whose queue it is. :func:`features` lists the features a topology uses and
where. ``pubsim features`` prints the table (:func:`table`).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from rich.table import Table

from ...sim.disciplines import Overflow
from .. import topology as T
from ..mechanisms.qos.rules import check_protocol_qos
from ..params.bridge import hop_qos
from ..params.features import REFUSED, Feature, Refusal, object_features

__all__ = [
    "Feature",
    "Refusal",
    "REFUSED",
    "Connection",
    "features",
    "connections",
    "check_features",
    "table",
    "add_commands",
]


@dataclass(frozen=True)
class Connection:
    """One link station of a compile and the features of its queue.

    Parameters
    ----------
    link : str
        The station's name (``link:a->b`` or ``pipe:k->s``).
    subscriber : str
        The subscriber at its end (downlinks and pipes), else empty.
    features : frozenset of Feature
    qos : int
        QoS it carries.
    scheduling, overflow : str
        Its queue's effective order and overflow policy.
    subscriptions : tuple
        The filters of the subscriber at its end (downlinks and pipes).
    jitter_on : str
        Its link's ``jitter_on``.
    """

    link: str
    subscriber: str
    features: frozenset
    qos: int
    scheduling: str
    overflow: str
    subscriptions: tuple = ()
    jitter_on: str = "every_packet"

    @property
    def queue(self) -> str:
        """``scheduling/overflow``."""
        return f"{self.scheduling}/{self.overflow}"


def _queue_features(scheduling, overflow):
    out = set()
    if scheduling == "priority":
        out.add(Feature.PRIORITY)
    if overflow == Overflow.BACKPRESSURE:
        out.add(Feature.BACKPRESSURE)
    elif overflow != Overflow.DROP_NEWEST:
        out.add(Feature.QUEUE_POLICY)
    return out


def _frame_features(broker, link, sub):
    """A frame channel's features and those of its link and reader it is checked against (none without frames)."""
    if broker.client_frame_bytes is None:
        return set()
    out = {Feature.FRAMES}
    if link.loss_probability > 0 or not link.jitter_s.is_constant:
        out.add(Feature.LOSSY)
    scope = object_features(sub, "subscriber")
    return out | (scope & {Feature.SESSIONS, Feature.BUFFER})


def _qos(g, client):
    """A client's QoS, checked against the protocol (one-line error naming ``client.qos``)."""
    q = g.nodes[client][T.PARAMS].qos
    check_protocol_qos(g.graph[T.PROTOCOL], q, f"{client}.qos")
    return q


def _bridge_qos(g, x, y, published):
    """Highest QoS the hop ``x -> y`` between brokers carries for the publications' QoS
    levels ``published`` (:func:`pubsim.models.params.bridge.hop_qos`); a bridge QoS the
    protocol cannot carry is a one-line error naming the edge."""
    bridge, proto = g.edges[x, y].get(T.BRIDGE), g.graph[T.PROTOCOL]
    if bridge is not None and bridge.qos is not None:
        check_protocol_qos(proto, bridge.qos, f"edge ({x!r}, {y!r}).{T.BRIDGE}.qos")
    relay = g.nodes[x].get(T.RELAY)
    return max(hop_qos(q, protocol=proto, bridge=bridge, relay=relay) for q in published)


def _wake(link):
    """``{Feature.IDLE_RECEIVER}`` if only a message finding the receiver idle pays the link's jitter."""
    return object_features(link, "link") & {Feature.IDLE_RECEIVER}


def _card(g, a, b):
    """``{Feature.CARD}`` if the connection between ``a`` and ``b`` passes a host's network card."""
    return {Feature.CARD} if T.crosses_card(g, a, b) else set()


def connections(g: nx.Graph) -> list[Connection]:
    """Every link station a compile of the validated topology ``g`` builds, with its features."""
    p = lambda n: g.nodes[n][T.PARAMS]  # noqa: E731
    out = []
    pubs, subs, brokers = (T.clients(g, T.NodeKind.PUBLISHER), T.clients(g, T.NodeKind.SUBSCRIBER), T.brokers(g))
    for pub in pubs:
        home, link = T.home_broker(g, pub), g.edges[pub, T.home_broker(g, pub)][T.PARAMS]
        q = _qos(g, pub)
        feats = _queue_features(link.scheduling, link.overflow) | ({Feature.QOS} if q else set())
        feats |= _card(g, pub, home) | _wake(link)
        out.append(
            Connection(
                f"link:{pub}->{home}", "", frozenset(feats), q, link.scheduling, link.overflow, jitter_on=link.jitter_on
            )
        )
    published = {g.nodes[pub][T.PARAMS].qos for pub in pubs} | {0}
    for a, b in T.broker_links(g):
        link = g.edges[a, b][T.PARAMS]
        base = _queue_features(link.scheduling, link.overflow) | _card(g, a, b) | _wake(link)
        for x, y in ((a, b), (b, a)):
            q = _bridge_qos(g, x, y, published)
            feats = base | ({Feature.QOS} if q else set())
            name = f"link:{x}->{y}"
            out.append(
                Connection(name, "", frozenset(feats), q, link.scheduling, link.overflow, jitter_on=link.jitter_on)
            )
    for sock in T.sockets(g):
        sp = p(sock)
        for s in subs:
            if g.has_edge(s, sock):
                link = g.edges[s, sock][T.PARAMS]
                subp = p(s)
                feats = _queue_features(link.scheduling, sp.overflow) | {Feature.BROKERLESS} | _card(g, sock, s)
                feats |= _wake(link)
                feats |= object_features(subp, "subscriber") & {Feature.SHARED}
                out.append(
                    Connection(
                        f"pipe:{sock}->{s}",
                        s,
                        frozenset(feats),
                        0,
                        link.scheduling,
                        sp.overflow,
                        tuple(subp.subscriptions),
                        link.jitter_on,
                    )
                )
    for s in subs:
        b = T.home_broker(g, s)
        if b not in brokers:
            continue
        link, bp = g.edges[s, b][T.PARAMS], p(b)
        scheduling = "priority" if "priority" in (link.scheduling, bp.client_scheduling) else "fifo"
        overflow = bp.client_overflow if bp.client_overflow != Overflow.DROP_NEWEST else link.overflow
        q = _qos(g, s)
        feats = _queue_features(scheduling, overflow)
        feats |= {Feature.QOS} if q else set()
        feats |= {Feature.RESTART} if bp.restart_at_s else set()
        feats |= _card(g, b, s)
        feats |= object_features(p(s), "subscriber") & {Feature.SHARED}
        feats |= _frame_features(bp, link, p(s)) | _wake(link)
        subscriptions = tuple(p(s).subscriptions)
        out.append(
            Connection(f"link:{b}->{s}", s, frozenset(feats), q, scheduling, overflow, subscriptions, link.jitter_on)
        )
    return out


def check_features(g: nx.Graph) -> None:
    """Raise the :class:`~pubsim.sim.errors.ConfigError` of the first refused ``connection`` pair.

    Parameters
    ----------
    g : networkx.Graph
        A validated topology.
    """
    rules = [r for r in REFUSED if r.scope == "connection"]
    for conn in connections(g):
        for r in rules:
            if r.first in conn.features and r.second in conn.features:
                raise r.error(conn, r.field.format(link=conn.link, subscriber=conn.subscriber))


def features(g: nx.Graph) -> dict[Feature, list[str]]:
    """Features the topology ``g`` uses, each with the components (nodes, links) that use it."""
    out: dict[Feature, list[str]] = {}

    def add(feature, where):
        out.setdefault(feature, [])
        if where not in out[feature]:
            out[feature].append(where)

    for conn in connections(g):
        for f in conn.features:
            add(f, conn.link)
    scope = {T.NodeKind.BROKER: "broker", T.NodeKind.PUBLISHER: "publisher", T.NodeKind.SUBSCRIBER: "subscriber"}
    for n, data in g.nodes(data=True):
        kind = T.NodeKind(data[T.KIND])
        if kind is T.NodeKind.SOCKET:
            add(Feature.BROKERLESS, str(n))
            continue
        for f in sorted(object_features(data[T.PARAMS], scope[kind]), key=list(Feature).index):
            add(f, str(n))
        if data.get(T.RELAY) is not None:
            add(Feature.RELAY, str(n))
    for u, v, data in g.edges(data=True):
        for f in sorted(object_features(data[T.PARAMS], "link"), key=list(Feature).index):
            add(f, f"{u}<->{v}")
    if g.graph.get(T.FORWARDING) == T.Forwarding.BRIDGE.value:
        for u, v in T.broker_links(g):
            add(Feature.BRIDGE, f"{u}<->{v}")
    return out


def table() -> list[dict]:
    """The refused pairs as rows: ``scope``, ``feature``, ``with``, ``field``, ``reason``."""
    return [
        {"scope": r.scope, "feature": r.first.value, "with": r.second.value, "field": r.field, "reason": r.reason}
        for r in REFUSED
    ]


def _print(args, console):
    out = Table(title="Refused combinations of features (parameter objects when built; connections by build_network)")
    for col in ("scope", "feature", "with", "error field", "reason"):
        out.add_column(col, overflow="fold")
    for row in table():
        out.add_row(row["scope"], row["feature"], row["with"], row["field"], row["reason"])
    console.print(out)
    console.print("features: " + ", ".join(f.value for f in Feature) + "; every other pair combines.")
    return 0


def add_commands(sub) -> None:
    """Register ``pubsim features`` (print :data:`~pubsim.models.params.features.REFUSED`) on the CLI's subparsers."""
    cmd = sub.add_parser("features", help="print which features combine (the refused pairs and why)")
    cmd.set_defaults(func=_print)
