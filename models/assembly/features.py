"""Which features a topology uses, and the one table of combinations that are refused.

A *feature* is a mechanism or queue property a component uses, detected
from the parameters (:func:`features`). Most features combine freely;
:data:`REFUSED` lists, for each pair that does not, the reason, the field
the error names and where the pair is checked. :func:`check_features` is
called once, by :func:`pubsim.models.assembly.build.build_network`, before
any station is built, and raises the one-line
:class:`~pubsim.sim.errors.ConfigError` of the first refused pair it finds.

Pairs are checked per *connection*: each link station a compile builds
(a publisher's uplink, each direction of a bridge, a socket's pipe, a
broker's per-client queue on a downlink), with the features of its queue
(effective scheduling and overflow policy), of the QoS it carries and of
the broker whose queue it is. Combinations inside one parameter object
(e.g. ``BrokerParams`` with batching and several workers) are refused when
that object is built, by its own ``__post_init__``.

``pubsim features`` prints the table (:func:`table`).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import networkx as nx
from rich.table import Table

from ...sim.disciplines import Overflow
from ...sim.errors import ConfigError

from .. import topology as T
from ..mechanisms.qos.rules import check_protocol_qos

__all__ = ["Feature", "Refusal", "REFUSED", "features", "connections", "check_features", "table",
           "add_commands"]


class Feature(str, enum.Enum):
    """A feature a component of a topology uses."""

    QOS = "qos"                    # QoS > 0 on a connection (windowed, acknowledged)
    RESTART = "restart"            # a broker that restarts (restart_at_s), its client queues with it
    PRIORITY = "priority"          # a priority queue (scheduling / client_scheduling)
    BACKPRESSURE = "backpressure"  # a full queue blocks its sender
    QUEUE_POLICY = "queue_policy"  # drop_oldest, reject, ring, update or flow_to_disk
    BATCHING = "batching"          # batch_max_messages > 1 (brokers, sockets)
    CPU_QUOTA = "cpu_quota"        # cpu_fraction < 1
    DISK = "disk"                  # a broker disk for persistent messages
    BROKERLESS = "brokerless"      # ZeroMQ socket nodes
    RELAY = "relay"                # ILDM relay in front of a broker
    BRIDGE = "bridge"              # static bridges (forwarding: bridge)
    SESSIONS = "sessions"          # connection schedules or churn
    RETAIN = "retain"              # retained messages
    WILL = "will"                  # publisher outages and Will messages
    CLOSED_LOOP = "closed_loop"    # request/reply clients (arrival closed_loop)
    SERIALIZATION = "serialization"


@dataclass(frozen=True)
class Refusal:
    """Why a pair of features is refused on one connection.

    Parameters
    ----------
    field : str
        The field the error names: ``"{subscriber}.qos"`` or ``"{link}.overflow"``,
        formatted with the connection's names.
    value : str
        Which value the error shows: ``"qos"``, ``"overflow"`` or ``"queue"``
        (``scheduling/overflow``).
    reason : str
        What would be accepted, in plain words (the error's ``expected``).
    """

    field: str
    value: str
    reason: str


_QOS_FIFO = Refusal("{link}.overflow", "queue",
                    "a FIFO queue with drop_newest or backpressure on a connection with QoS > 0 "
                    "(the in-flight window is modelled for FIFO queues)")

#: The refused pairs, checked in this order on every connection.
REFUSED: dict[tuple[Feature, Feature], Refusal] = {
    (Feature.QOS, Feature.RESTART): Refusal(
        "{subscriber}.qos", "qos",
        "0 at a broker with restart_at_s (windowed connections are not modelled across broker restarts)"),
    (Feature.RESTART, Feature.BACKPRESSURE): Refusal("{link}.overflow", "overflow", "not backpressure with restart_at_s"),
    (Feature.PRIORITY, Feature.BACKPRESSURE): Refusal(
        "{link}.overflow", "overflow",
        "drop_newest, reject, drop_oldest, ring, update or flow_to_disk on a priority queue (not backpressure)"),
    (Feature.QOS, Feature.PRIORITY): _QOS_FIFO,
    (Feature.QOS, Feature.QUEUE_POLICY): _QOS_FIFO,
}


@dataclass(frozen=True)
class Connection:
    """One link station of a compile and the features of its queue."""

    link: str
    subscriber: str
    features: frozenset
    qos: int
    scheduling: str
    overflow: str


def _queue_features(scheduling, overflow):
    out = set()
    if scheduling == "priority":
        out.add(Feature.PRIORITY)
    if overflow == Overflow.BACKPRESSURE:
        out.add(Feature.BACKPRESSURE)
    elif overflow != Overflow.DROP_NEWEST:
        out.add(Feature.QUEUE_POLICY)
    return out


def _qos(g, client):
    """A client's QoS, checked against the protocol (one-line error naming ``client.qos``)."""
    q = g.nodes[client][T.PARAMS].qos
    check_protocol_qos(g.graph[T.PROTOCOL], q, f"{client}.qos")
    return q


def connections(g: nx.Graph) -> list[Connection]:
    """Every link station a compile of the validated topology ``g`` builds, with its features."""
    p = lambda n: g.nodes[n][T.PARAMS]  # noqa: E731
    out = []
    pubs, subs, brokers = (T.clients(g, T.NodeKind.PUBLISHER), T.clients(g, T.NodeKind.SUBSCRIBER),
                           T.brokers(g))
    any_qos = False
    for pub in pubs:
        home, link = T.home_broker(g, pub), g.edges[pub, T.home_broker(g, pub)][T.PARAMS]
        q = _qos(g, pub)
        any_qos |= q > 0
        feats = _queue_features(link.scheduling, link.overflow) | ({Feature.QOS} if q else set())
        out.append(Connection(f"link:{pub}->{home}", "", frozenset(feats), q, link.scheduling, link.overflow))
    for a, b in g.subgraph(brokers).edges:
        link = g.edges[a, b][T.PARAMS]
        feats = _queue_features(link.scheduling, link.overflow) | ({Feature.QOS} if any_qos else set())
        for x, y in ((a, b), (b, a)):
            out.append(Connection(f"link:{x}->{y}", "", frozenset(feats), int(any_qos), link.scheduling,
                                  link.overflow))
    for sock in T.sockets(g):
        sp = p(sock)
        for s in subs:
            if g.has_edge(s, sock):
                link = g.edges[s, sock][T.PARAMS]
                feats = _queue_features(link.scheduling, sp.overflow) | {Feature.BROKERLESS}
                out.append(Connection(f"pipe:{sock}->{s}", s, frozenset(feats), 0, link.scheduling, sp.overflow))
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
        out.append(Connection(f"link:{b}->{s}", s, frozenset(feats), q, scheduling, overflow))
    return out


def check_features(g: nx.Graph) -> None:
    """Raise the :class:`~pubsim.sim.errors.ConfigError` of the first refused pair of :data:`REFUSED`.

    Parameters
    ----------
    g : networkx.Graph
        A validated topology.
    """
    for conn in connections(g):
        for (a, b), refusal in REFUSED.items():
            if a in conn.features and b in conn.features:
                value = {"qos": conn.qos, "overflow": conn.overflow,
                         "queue": f"{conn.scheduling}/{conn.overflow}"}[refusal.value]
                raise ConfigError(refusal.field.format(link=conn.link, subscriber=conn.subscriber), value,
                                  refusal.reason)


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
    for n, data in g.nodes(data=True):
        params, kind = data[T.PARAMS], T.NodeKind(data[T.KIND])
        if kind is T.NodeKind.BROKER:
            for f, used in ((Feature.BATCHING, params.batch_max_messages > 1),
                            (Feature.CPU_QUOTA, params.cpu_fraction < 1.0), (Feature.DISK, params.disk is not None),
                            (Feature.RESTART, bool(params.restart_at_s)),
                            (Feature.RELAY, data.get(T.RELAY) is not None)):
                if used:
                    add(f, str(n))
        elif kind is T.NodeKind.SOCKET:
            add(Feature.BROKERLESS, str(n))
        elif kind is T.NodeKind.PUBLISHER:
            for f, used in ((Feature.RETAIN, params.retain), (Feature.WILL, bool(params.offline_s)),
                            (Feature.CLOSED_LOOP, params.arrival == "closed_loop"),
                            (Feature.SERIALIZATION, params.serialization is not None)):
                if used:
                    add(f, str(n))
        elif kind is T.NodeKind.SUBSCRIBER:
            if params.online_s or params.churn_online_mean_s > 0:
                add(Feature.SESSIONS, str(n))
            if params.serialization is not None:
                add(Feature.SERIALIZATION, str(n))
    if g.graph.get(T.FORWARDING) == T.Forwarding.BRIDGE.value:
        for u, v in g.subgraph(T.brokers(g)).edges:
            add(Feature.BRIDGE, f"{u}<->{v}")
    return out


def table() -> list[dict]:
    """The refused pairs as rows: ``feature``, ``with``, ``field``, ``reason``."""
    return [{"feature": a.value, "with": b.value, "field": r.field, "reason": r.reason}
            for (a, b), r in REFUSED.items()]


def _print(args, console):
    out = Table(title="Refused combinations of features (checked per connection by build_network)")
    for col in ("feature", "with", "error field", "reason"):
        out.add_column(col, overflow="fold")
    for row in table():
        out.add_row(row["feature"], row["with"], row["field"], row["reason"])
    console.print(out)
    console.print("features: " + ", ".join(f.value for f in Feature) + "; every other pair combines.")
    return 0


def add_commands(sub) -> None:
    """Register ``pubsim features`` (print :data:`REFUSED`) on the CLI's subparsers."""
    cmd = sub.add_parser("features", help="print which features combine (the refused pairs and why)")
    cmd.set_defaults(func=_print)
