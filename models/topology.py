"""Topologies as NetworkX graphs with a documented attribute schema.

Schema (keys are the constants below, never bare strings in client code):

Graph attributes
    ``protocol`` (:data:`PROTOCOL`): framing on links, one of ``mqtt``,
    ``amqp``, ``zmq``, ``none``.
    ``forwarding`` (:data:`FORWARDING`): between brokers, ``flood``
    (Publication Flooding) or ``subscription`` (Subscription Flooding, steady
    state: a copy goes only towards brokers with matching subscribers).

Node attributes
    ``kind`` (:data:`KIND`): ``broker``, ``publisher`` or ``subscriber``.
    ``params`` (:data:`PARAMS`): :class:`~models.broker.BrokerParams`,
    :class:`~models.client.PublisherParams` or
    :class:`~models.client.SubscriberParams`.

Edge attributes
    ``params``: :class:`~models.link.LinkParams`. Edges join a client to its
    one broker, or two brokers; brokers must form a tree.

In a GraphML file the same keys hold flat values: ``kind`` and the
parameter fields (with units in their names, e.g. ``latency_s``), strings
with units accepted (``"2ms"``, ``"100Mbit/s"``).
"""
from __future__ import annotations

import enum

import networkx as nx

from sim.errors import ConfigError

from .broker import BrokerParams
from .client import PublisherParams, SubscriberParams
from .link import LinkParams
from .params import from_mapping, to_mapping
from .protocol import PROTOCOLS
from .topics import TopicSyntax, validate_filter, validate_topic

__all__ = ["KIND", "PARAMS", "PROTOCOL", "FORWARDING", "NodeKind", "Forwarding",
           "validate", "star", "chain", "read_graphml", "write_graphml", "brokers", "clients"]

KIND = "kind"
PARAMS = "params"
PROTOCOL = "protocol"
FORWARDING = "forwarding"


class NodeKind(str, enum.Enum):
    BROKER = "broker"
    PUBLISHER = "publisher"
    SUBSCRIBER = "subscriber"


class Forwarding(str, enum.Enum):
    FLOOD = "flood"
    SUBSCRIPTION = "subscription"


_PARAM_CLASS = {NodeKind.BROKER: BrokerParams, NodeKind.PUBLISHER: PublisherParams,
                NodeKind.SUBSCRIBER: SubscriberParams}


def _kind(g, n):
    raw = g.nodes[n].get(KIND)
    try:
        return NodeKind(raw)
    except ValueError:
        raise ConfigError(f"node {n!r}.{KIND}", raw, f"one of {[k.value for k in NodeKind]}") from None


def brokers(g):
    """Broker node names, sorted."""
    return sorted(n for n in g if g.nodes[n].get(KIND) == NodeKind.BROKER)


def clients(g, kind):
    """Publisher or subscriber node names, sorted."""
    return sorted(n for n in g if g.nodes[n].get(KIND) == kind)


def home_broker(g, n):
    """The one broker a client is attached to."""
    return next(iter(g.neighbors(n)))


def _check_graph_attrs(g):
    proto = g.graph.setdefault(PROTOCOL, "mqtt")
    if proto not in PROTOCOLS:
        raise ConfigError(f"graph.{PROTOCOL}", proto, f"one of {sorted(PROTOCOLS)}")
    fwd = g.graph.setdefault(FORWARDING, Forwarding.SUBSCRIPTION.value)
    try:
        Forwarding(fwd)
    except ValueError:
        raise ConfigError(f"graph.{FORWARDING}", fwd, f"one of {[f.value for f in Forwarding]}") from None


def _check_node(g, n):
    kind = _kind(g, n)
    params = g.nodes[n].get(PARAMS)
    if not isinstance(params, _PARAM_CLASS[kind]):
        raise ConfigError(f"node {n!r}.{PARAMS}", type(params).__name__, _PARAM_CLASS[kind].__name__)
    degree = g.degree(n)
    if kind is not NodeKind.BROKER:
        if degree != 1 or _kind(g, home_broker(g, n)) is not NodeKind.BROKER:
            raise ConfigError(f"node {n!r}", f"{degree} links",
                              f"exactly one link, to a broker ({kind.value}s attach to one broker)")
    return kind


def _check_topics(g, n, kind):
    params = g.nodes[n][PARAMS]
    if kind is NodeKind.BROKER:
        return
    syntax = TopicSyntax(g.nodes[home_broker(g, n)][PARAMS].topic_syntax)
    if kind is NodeKind.PUBLISHER:
        for t in params.topics:
            validate_topic(syntax, t)
    else:
        for f in params.subscriptions:
            validate_filter(syntax, f)


def validate(g):
    """Check a topology; raise :class:`ConfigError` naming node/edge, attribute and value.

    Returns the graph (with defaults for missing graph attributes filled in).
    """
    if not isinstance(g, nx.Graph) or g.is_directed() or g.is_multigraph():
        raise ConfigError("topology", type(g).__name__, "an undirected networkx.Graph")
    _check_graph_attrs(g)
    for u, v, data in g.edges(data=True):
        for end in (u, v):
            if KIND not in g.nodes[end]:
                raise ConfigError(f"edge ({u!r}, {v!r})", end, "a link between declared nodes (dangling link)")
        if not isinstance(data.get(PARAMS), LinkParams):
            raise ConfigError(f"edge ({u!r}, {v!r}).{PARAMS}", type(data.get(PARAMS)).__name__, "LinkParams")
    kinds = {n: _check_node(g, n) for n in g}
    for n, kind in kinds.items():
        _check_topics(g, n, kind)
    broker_graph = g.subgraph(brokers(g))
    if broker_graph.number_of_nodes() == 0:
        raise ConfigError("topology", "no broker", "at least one broker node")
    if not nx.is_tree(broker_graph):
        raise ConfigError("topology", "brokers form a cycle or are disconnected",
                          "brokers connected as a tree")
    return g


def _add(g, name, kind, params):
    if name in g:
        raise ConfigError(f"node {name!r}", name, "a unique node name")
    g.add_node(name, **{KIND: kind.value, PARAMS: params})


def star(*, broker, publishers, subscribers, link, broker_name="broker", protocol="mqtt"):
    """One broker with every client attached by its own link.

    Parameters
    ----------
    broker : BrokerParams
    publishers, subscribers : dict of name -> params
    link : LinkParams or dict of client name -> LinkParams
    """
    g = nx.Graph(**{PROTOCOL: protocol, FORWARDING: Forwarding.SUBSCRIPTION.value})
    _add(g, broker_name, NodeKind.BROKER, broker)
    for kind, group in ((NodeKind.PUBLISHER, publishers), (NodeKind.SUBSCRIBER, subscribers)):
        for name, params in group.items():
            _add(g, name, kind, params)
            g.add_edge(name, broker_name, **{PARAMS: link[name] if isinstance(link, dict) else link})
    return validate(g)


def chain(*, brokers, bridge, publishers, subscribers, link, forwarding="subscription", protocol="mqtt"):
    """Brokers in a line ``b0 - b1 - ...``, clients attached to a broker each.

    Parameters
    ----------
    brokers : dict of name -> BrokerParams, in chain order
    bridge : LinkParams
        Link between neighbouring brokers.
    publishers, subscribers : dict of name -> (broker name, params)
    link : LinkParams
        Client access link.
    forwarding : str
        ``flood`` or ``subscription``.
    """
    g = nx.Graph(**{PROTOCOL: protocol, FORWARDING: forwarding})
    names = list(brokers)
    for name in names:
        _add(g, name, NodeKind.BROKER, brokers[name])
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b, **{PARAMS: bridge})
    for kind, group in ((NodeKind.PUBLISHER, publishers), (NodeKind.SUBSCRIBER, subscribers)):
        for name, (home, params) in group.items():
            if home not in brokers:
                raise ConfigError(f"{kind.value} {name!r}.broker", home, f"one of {names}")
            _add(g, name, kind, params)
            g.add_edge(name, home, **{PARAMS: link})
    return validate(g)


def read_graphml(path):
    """Load a topology from GraphML with flat attributes (see module docstring)."""
    try:
        raw = nx.read_graphml(path)
    except Exception as err:  # networkx raises several parser errors
        raise ConfigError(str(path), type(err).__name__, f"a GraphML file ({err})") from None
    g = nx.Graph(**raw.graph)
    for n, data in raw.nodes(data=True):
        data = dict(data)
        if KIND not in data:
            raise ConfigError(f"node {n!r}.{KIND}", None, f"one of {[k.value for k in NodeKind]}")
        kind = _kind(raw, n)
        data.pop(KIND)
        g.add_node(n, **{KIND: kind.value, PARAMS: from_mapping(_PARAM_CLASS[kind], data, f"node {n!r}")})
    for u, v, data in raw.edges(data=True):
        g.add_edge(u, v, **{PARAMS: from_mapping(LinkParams, dict(data), f"edge ({u!r}, {v!r})")})
    return validate(g)


def write_graphml(g, path):
    """Save a topology as GraphML with flat attributes (``None`` values omitted)."""
    flat = nx.Graph(**g.graph)
    for n, data in g.nodes(data=True):
        attrs = {k: v for k, v in to_mapping(data[PARAMS]).items() if v is not None}
        flat.add_node(n, **{KIND: data[KIND]}, **attrs)
    for u, v, data in g.edges(data=True):
        flat.add_edge(u, v, **{k: v for k, v in to_mapping(data[PARAMS]).items() if v is not None})
    nx.write_graphml(flat, path)
