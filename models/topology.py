"""Topologies as NetworkX graphs with a documented attribute schema.

Schema (keys are the constants below, never bare strings in client code):

Graph attributes
    ``protocol`` (:data:`PROTOCOL`): framing on links, one of ``mqtt``,
    ``amqp``, ``zmq``, ``none``.
    ``forwarding`` (:data:`FORWARDING`): between brokers, ``flood``
    (Publication Flooding) or ``subscription`` (Subscription Flooding, steady
    state: a copy goes only towards brokers with matching subscribers) or
    ``bridge`` (static Mosquitto-style bridges, :mod:`pubsim.models.params.bridge`).

Node attributes
    ``kind`` (:data:`KIND`): ``broker``, ``publisher`` or ``subscriber``.
    ``params`` (:data:`PARAMS`): :class:`~pubsim.models.params.broker.BrokerParams`,
    :class:`~pubsim.models.params.client.PublisherParams` or
    :class:`~pubsim.models.params.client.SubscriberParams`.
    ``relay`` (:data:`RELAY`, brokers only, optional): the broker's ILDM
    interworking node, :class:`~pubsim.models.params.relay.RelayParams`.
    ``host`` (:data:`HOST`, optional): the name of the host (machine) the
    process runs on, a key of the graph's ``hosts``. A relay runs on its
    broker's host; a ZeroMQ socket without one on its publisher's host.

Graph attribute ``hosts`` (:data:`HOSTS`, optional): ``{name:
:class:`~pubsim.models.params.host.HostParams`}``. A topology without hosts
puts every process on a machine of its own with a free card (as before hosts
existed); see :mod:`pubsim.models.mechanisms.hosts`.

Edge attributes
    ``params``: :class:`~pubsim.models.params.link.LinkParams`. Edges join a client to its
    one broker, or two brokers; brokers must form a tree.
    ``bridge`` (:data:`BRIDGE`, broker-broker edges, optional):
    :class:`~pubsim.models.params.bridge.BridgeParams`, used with ``bridge`` forwarding.

In a GraphML file the same keys hold flat values: ``kind`` and the
parameter fields (with units in their names, e.g. ``latency_s``), strings
with units accepted (``"2ms"``, ``"100Mbit/s"``). Lists of strings (topics,
subscriptions) are ``;``-separated; list-valued fields without a unit
(``topic_weights``, ``schedule_*``) are JSON lists; a distribution is its
text form (``exp(0.001)``) or, for empirical ones, a JSON mapping
``{"dist": "empirical", "values": [...]}``; the provenance is held in
``provenance_source``, ``provenance_reference``, ``provenance_date`` and
``provenance_note`` (and a calibrated model's ``provenance_accuracy``, as
JSON). Relay and bridge fields are prefixed ``relay_`` (node) and
``bridge_`` (edge). A node's ``host`` is its host's name; the graph's
``hosts`` is a JSON mapping ``{name: {field: value}}``. :func:`write_graphml` then :func:`read_graphml` gives
back an equal topology.
"""

from __future__ import annotations

import dataclasses
import enum
import json

import networkx as nx

from ..sim.distributions import Distribution, Empirical, Shifted
from ..sim.errors import ConfigError
from .params.bridge import BridgeParams
from .params.broker import BrokerParams
from .params.client import PublisherParams, SubscriberParams
from .params.host import HostParams
from .params.link import LinkParams
from .params.mapping import check_one_core, from_mapping, to_mapping
from .params.provenance import ASSUMED, Provenance, Source
from .params.relay import RelayParams
from .params.topics import TopicSyntax, validate_filter, validate_topic
from .params.zmq import ZmqSocketParams
from .protocol import PROTOCOLS

__all__ = [
    "broker_links",
    "KIND",
    "PARAMS",
    "PROTOCOL",
    "FORWARDING",
    "NodeKind",
    "Forwarding",
    "validate",
    "star",
    "chain",
    "brokerless",
    "sockets",
    "read_graphml",
    "write_graphml",
    "brokers",
    "clients",
    "RELAY",
    "BRIDGE",
    "bridge_patterns",
    "HOST",
    "HOSTS",
    "hosts",
    "host_of",
    "crosses_card",
    "place",
]

KIND = "kind"
PARAMS = "params"
PROTOCOL = "protocol"
FORWARDING = "forwarding"
RELAY = "relay"
BRIDGE = "bridge"
HOST = "host"
HOSTS = "hosts"


class NodeKind(str, enum.Enum):
    BROKER = "broker"
    PUBLISHER = "publisher"
    SUBSCRIBER = "subscriber"
    SOCKET = "socket"  # a ZeroMQ PUB/PUSH socket on a publisher's host (models.mechanisms.brokerless.socket)


class Forwarding(str, enum.Enum):
    FLOOD = "flood"
    SUBSCRIPTION = "subscription"
    BRIDGE = "bridge"


_PARAM_CLASS = {
    NodeKind.BROKER: BrokerParams,
    NodeKind.PUBLISHER: PublisherParams,
    NodeKind.SUBSCRIBER: SubscriberParams,
    NodeKind.SOCKET: ZmqSocketParams,
}


def _kind(g, n):
    raw = g.nodes[n].get(KIND)
    try:
        return NodeKind(raw)
    except ValueError:
        raise ConfigError(f"node {n!r}.{KIND}", raw, f"one of {[k.value for k in NodeKind]}") from None


def brokers(g):
    """Broker node names, sorted."""
    return sorted(n for n in g if g.nodes[n].get(KIND) == NodeKind.BROKER)


def broker_links(g):
    """Broker-broker edges as ``(a, b)`` with ``a < b``, sorted: an order that depends on
    neither how the graph was built nor Python's string hashing (``g.subgraph(...).edges``
    iterates a set of nodes, so its order changed with ``PYTHONHASHSEED``)."""
    return sorted(
        tuple(sorted((a, b)))
        for a, b in g.edges
        if g.nodes[a].get(KIND) == NodeKind.BROKER and g.nodes[b].get(KIND) == NodeKind.BROKER
    )


def clients(g, kind):
    """Publisher or subscriber node names, sorted."""
    return sorted(n for n in g if g.nodes[n].get(KIND) == kind)


def home_broker(g, n):
    """The one broker a client is attached to."""
    return next(iter(g.neighbors(n)))


def _check_graph_attrs(g):
    proto = g.graph.setdefault(PROTOCOL, "mqtt")
    if not isinstance(proto, str) or proto not in PROTOCOLS:
        raise ConfigError(f"graph.{PROTOCOL}", proto, f"one of {sorted(PROTOCOLS)}")
    fwd = g.graph.setdefault(FORWARDING, Forwarding.SUBSCRIPTION.value)
    try:
        if not isinstance(fwd, str):
            raise ValueError(fwd)
        Forwarding(fwd)
    except ValueError:
        raise ConfigError(f"graph.{FORWARDING}", fwd, f"one of {[f.value for f in Forwarding]}") from None


def _check_node(g, n):
    kind = _kind(g, n)
    params = g.nodes[n].get(PARAMS)
    if not isinstance(params, _PARAM_CLASS[kind]):
        raise ConfigError(f"node {n!r}.{PARAMS}", type(params).__name__, _PARAM_CLASS[kind].__name__)
    relay = g.nodes[n].get(RELAY)
    if relay is not None and (kind is not NodeKind.BROKER or not isinstance(relay, RelayParams)):
        raise ConfigError(f"node {n!r}.{RELAY}", type(relay).__name__, "RelayParams, on a broker node only")
    degree = g.degree(n)
    if kind is NodeKind.SOCKET:
        check_socket(g, n, lambda m: _kind(g, m))
    elif _brokerless_subscriber(g, n, kind):
        pass
    elif kind is not NodeKind.BROKER:
        expected = f"exactly one link, to a broker ({kind.value}s attach to one broker)"
        if degree != 1:
            raise ConfigError(f"node {n!r}", f"{degree} links", expected)
        other = home_broker(g, n)
        if _kind(g, other) is not NodeKind.BROKER and not (
            kind is NodeKind.PUBLISHER and _kind(g, other) is NodeKind.SOCKET
        ):
            raise ConfigError(f"node {n!r}", f"linked to {_kind(g, other).value} {other!r}", expected)
    return kind


def _brokerless_subscriber(g, n, kind):
    """A subscriber linked only to ZeroMQ sockets (one or more): brokerless.
    (A publisher links to one broker or to its one socket.)"""
    if kind is not NodeKind.SUBSCRIBER or g.degree(n) == 0:
        return False
    return all(g.nodes[m].get(KIND) == NodeKind.SOCKET for m in g.neighbors(n))


def _check_topics(g, n, kind):
    params = g.nodes[n][PARAMS]
    if kind in (NodeKind.BROKER, NodeKind.SOCKET):
        return
    syntax = TopicSyntax(g.nodes[home_broker(g, n)][PARAMS].topic_syntax)
    attr, check = ("topics", validate_topic) if kind is NodeKind.PUBLISHER else ("subscriptions", validate_filter)
    for text in getattr(params, attr):
        try:
            check(syntax, text)
        except ConfigError as err:
            raise ConfigError(f"node {n!r}.{attr}", err.value, err.expected) from None


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
        if any(k is NodeKind.SOCKET for k in kinds.values()):
            _check_hosts(g)
            return g  # brokerless (ZeroMQ direct): no broker tree to check
        raise ConfigError("topology", "no broker", "at least one broker node (or ZeroMQ socket nodes)")
    _check_tree(broker_graph)
    bridge_patterns(g)
    _check_hosts(g)
    return g


def hosts(g):
    """``{name: HostParams}`` of the graph (empty without hosts)."""
    return g.graph.get(HOSTS) or {}


def host_of(g, n):
    """Name of the host process ``n`` runs on, or None (a machine of its own).

    A ZeroMQ socket without a host of its own runs on its publisher's host."""
    name = g.nodes[n].get(HOST)
    if name is None and g.nodes[n].get(KIND) == NodeKind.SOCKET:
        pubs = [m for m in g.neighbors(n) if g.nodes[m].get(KIND) == NodeKind.PUBLISHER]
        return g.nodes[pubs[0]].get(HOST) if pubs else None
    return name


def crosses_card(g, a, b):
    """Whether the connection between processes ``a`` and ``b`` passes a host's network card."""
    ha, hb = host_of(g, a), host_of(g, b)
    table = hosts(g)
    return ha != hb and any(h is not None and table[h].has_card for h in (ha, hb))


def place(g, host_params, placement):
    """Put processes on hosts: ``host_params`` ``{name: HostParams}``,
    ``placement`` ``{node: host name}``; returns the validated graph."""
    if host_params:
        g.graph[HOSTS] = dict(host_params)
    for n, h in placement.items():
        if n not in g:
            raise ConfigError(f"node {n!r}.{HOST}", h, "a host for a declared node")
        g.nodes[n][HOST] = h
    return validate(g)


def _check_hosts(g):
    """Hosts are HostParams; every placed node names one; a broker fits its host's cores."""
    table = g.graph.get(HOSTS)
    if table is not None and not (isinstance(table, dict) and all(isinstance(v, HostParams) for v in table.values())):
        raise ConfigError(f"graph.{HOSTS}", type(table).__name__, "a mapping {host name: HostParams}")
    table = table or {}
    for n in g:
        name = g.nodes[n].get(HOST)
        if name is None:
            if g.nodes[n][KIND] == NodeKind.BROKER:  # a machine of its own: at most one core, as before hosts
                p = g.nodes[n][PARAMS]
                check_one_core(p.cpu_fraction, p.background_cpu_fraction, f"node {n!r}.")
            continue
        if isinstance(name, (bool, list, dict)) or name not in table:
            raise ConfigError(f"node {n!r}.{HOST}", name, f"one of the hosts {sorted(table)}")
        if g.nodes[n][KIND] == NodeKind.BROKER:
            _check_fits(g, n, name, table[name])


def _check_fits(g, n, name, host):
    """A broker's (and its relay's) workers and CPU fit the cores of its host."""
    cores = host.cores
    params = g.nodes[n][PARAMS]
    relay = g.nodes[n].get(RELAY)
    where = f"at most the {cores} cores of host {name!r}"
    for field, value in (("workers", params.workers), ("cpu_fraction", params.cpu_fraction)):
        if value > cores:
            raise ConfigError(f"node {n!r}.{field}", value, where)
    if params.background_cpu_fraction >= cores:
        raise ConfigError(f"node {n!r}.background_cpu_fraction", params.background_cpu_fraction, f"less than {where}")
    if relay is not None and relay.workers > cores:
        raise ConfigError(f"node {n!r}.{RELAY}.workers", relay.workers, where)
    if relay is not None:
        _check_shared(g, n, name, params)


#: Broker settings the CPU a broker shares with its ILDM node (models.mechanisms.hosts.cpu) does not model.
_NOT_SHARED = (
    ("cpu_fraction", lambda p: p.cpu_quota_cores is not None, "no CPU quota"),
    ("batch_max_messages", lambda p: p.batch_max_messages > 1, "1 (no batching)"),
    ("restart_at_s", lambda p: p.restart_at_s != (), "no restarts"),
    ("scheduling", lambda p: p.scheduling != "fifo", "fifo"),
)


def _check_shared(g, n, name, params):
    """A broker and its ILDM node on one host share its CPU: one such pair per host, FIFO, no quota."""
    why = f"for a broker sharing host {name!r}'s CPU with its interworking node"
    for field, used, expected in _NOT_SHARED:
        if used(params):
            raise ConfigError(f"node {n!r}.{field}", getattr(params, field), f"{expected} {why}")
    other = [m for m in g if m != n and g.nodes[m].get(HOST) == name and g.nodes[m].get(RELAY) is not None]
    if other:
        raise ConfigError(f"node {n!r}.{HOST}", name, f"a host of its own (broker {other[0]!r} and its node share it)")


def bridge_patterns(g):
    """``{(a, b): filters}`` forwarded from broker ``a`` to ``b`` by static bridges."""
    out = {}
    for u, v, data in g.edges(data=True):
        bridge = data.get(BRIDGE)
        if bridge is None:
            continue
        where = f"edge ({u!r}, {v!r}).{BRIDGE}"
        if (
            not isinstance(bridge, BridgeParams)
            or _kind(g, u) is not NodeKind.BROKER
            or _kind(g, v) is not NodeKind.BROKER
        ):
            raise ConfigError(where, type(bridge).__name__, "BridgeParams, on a broker-broker link only")
        try:
            pats = bridge.patterns(u, v)
        except ConfigError as err:
            raise ConfigError(f"{where}.local", err.value, err.expected) from None
        for (a, b), filters in pats.items():
            syntax = TopicSyntax(g.nodes[b][PARAMS].topic_syntax)
            for f in filters:
                try:
                    validate_filter(syntax, f)
                except ConfigError as err:
                    raise ConfigError(
                        f"{where}.topics_{'out' if a == bridge.local else 'in'}", err.value, err.expected
                    ) from None
            out[(a, b)] = filters
    return out


def _check_tree(broker_graph):
    """Brokers must form a tree: name a link that closes a cycle, or a broker cut off."""
    try:
        cycle = nx.find_cycle(broker_graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        u, v = cycle[-1][:2]
        loop = " - ".join(str(a) for a, _ in cycle) + f" - {cycle[0][0]}"
        raise ConfigError(
            f"edge ({u!r}, {v!r})", f"closes the cycle {loop}", "brokers connected as a tree (no cycles, SYSTEMS.md §3)"
        )
    parts = sorted(
        (sorted(c, key=str) for c in nx.connected_components(broker_graph)),
        key=lambda c: (-len(c), [str(n) for n in c]),
    )
    if len(parts) > 1:
        raise ConfigError(
            f"node {parts[1][0]!r}",
            f"not connected to broker {parts[0][0]!r}",
            "brokers connected as a tree (one component)",
        )


def _add(g, name, kind, params):
    if name in g:
        raise ConfigError(f"node {name!r}", name, "a unique node name")
    g.add_node(name, **{KIND: kind.value, PARAMS: params})


def star(*, broker, publishers, subscribers, link, broker_name="broker", protocol="mqtt", hosts=None, placement=None):
    """One broker with every client attached by its own link.

    Parameters
    ----------
    broker : BrokerParams
    publishers, subscribers : dict of name -> params
    link : LinkParams or dict of client name -> LinkParams
    hosts, placement : dict, optional
        ``{host name: HostParams}`` and ``{node: host name}`` (:func:`place`).
    """
    g = nx.Graph(**{PROTOCOL: protocol, FORWARDING: Forwarding.SUBSCRIPTION.value})
    _add(g, broker_name, NodeKind.BROKER, broker)
    for kind, group in ((NodeKind.PUBLISHER, publishers), (NodeKind.SUBSCRIBER, subscribers)):
        for name, params in group.items():
            _add(g, name, kind, params)
            if isinstance(link, dict) and name not in link:
                raise ConfigError(f"link[{name!r}]", None, f"the LinkParams of {kind.value} {name!r}")
            g.add_edge(name, broker_name, **{PARAMS: link[name] if isinstance(link, dict) else link})
    return place(g, hosts, placement or {})


def chain(
    *,
    brokers,
    bridge,
    publishers,
    subscribers,
    link,
    forwarding="subscription",
    protocol="mqtt",
    relays=None,
    bridges=None,
    hosts=None,
    placement=None,
):
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
        ``flood``, ``subscription`` or ``bridge``.
    relays : dict of name -> RelayParams, optional
        ILDM interworking nodes of some or all brokers.
    bridges : dict of (a, b) -> BridgeParams, optional
        Static bridges on neighbouring brokers' links.
    hosts, placement : dict, optional
        ``{host name: HostParams}`` and ``{node: host name}`` (:func:`place`).
    """
    g = nx.Graph(**{PROTOCOL: protocol, FORWARDING: forwarding})
    names = list(brokers)
    for name in names:
        _add(g, name, NodeKind.BROKER, brokers[name])
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b, **{PARAMS: bridge})
    for name, relay in (relays or {}).items():
        if name not in brokers:
            raise ConfigError(f"relays[{name!r}]", name, f"one of {names}")
        g.nodes[name][RELAY] = relay
    for (a, b), params in (bridges or {}).items():
        if not g.has_edge(a, b):
            raise ConfigError(f"bridges[{a!r}, {b!r}]", (a, b), "neighbouring brokers of the chain")
        g.edges[a, b][BRIDGE] = params
    for kind, group in ((NodeKind.PUBLISHER, publishers), (NodeKind.SUBSCRIBER, subscribers)):
        for name, (home, params) in group.items():
            if home not in brokers:
                raise ConfigError(f"{kind.value} {name!r}.broker", home, f"one of {names}")
            _add(g, name, kind, params)
            g.add_edge(name, home, **{PARAMS: link})
    return place(g, hosts, placement or {})


_PROVENANCE_KEYS = ("source", "reference", "date", "note")
_NX_GRAPH_DEFAULTS = ("node_default", "edge_default")


def _dist_mapping(d):
    """A distribution as a mapping :func:`~pubsim.sim.distributions.parse_distribution` reads back."""
    if isinstance(d, Empirical):
        return {"dist": "empirical", "values": list(d.values)}
    if isinstance(d, Shifted):
        return {"dist": "shifted", "offset": d.offset, "base": _dist_mapping(d.base)}
    return str(d)


def _has_empirical(d):
    return isinstance(d, Empirical) or (isinstance(d, Shifted) and _has_empirical(d.base))


def _flat(params):
    """GraphML attributes of a parameter object (``None`` values and empty lists omitted)."""
    out = {}
    plain = to_mapping(params)
    for fld in dataclasses.fields(params):
        value = getattr(params, fld.name)
        unit = fld.metadata.get("unit")
        if value is None:
            continue
        if unit == "provenance":
            if value != ASSUMED:
                for key in _PROVENANCE_KEYS:
                    text = getattr(value, key)
                    out[f"provenance_{key}"] = text.value if key == "source" else text
                if value.accuracy is not None:  # a calibrated model's validation errors (JSON)
                    out["provenance_accuracy"] = json.dumps(value.accuracy, sort_keys=True)
        elif unit in ("params", "serialization"):  # nested parameter object (a broker's disk): JSON mapping
            out[fld.name] = json.dumps(_nested_mapping(value))
        elif unit == "raw":
            if value != ():
                out[fld.name] = json.dumps(list(value) if isinstance(value, tuple) else value)
        elif isinstance(value, Distribution) and _has_empirical(value):
            out[fld.name] = json.dumps(_dist_mapping(value))
        else:
            out[fld.name] = plain[fld.name]
    return out


def _nested_mapping(params):
    """A nested parameter object as a mapping with its provenance (GraphML JSON)."""
    out = {k: v for k, v in to_mapping(params).items() if v is not None}
    if params.provenance != ASSUMED:
        out["provenance"] = {key: getattr(params.provenance, key) for key in _PROVENANCE_KEYS}
        out["provenance"]["source"] = params.provenance.source.value
        if params.provenance.accuracy is not None:
            out["provenance"]["accuracy"] = params.provenance.accuracy
    return out


def _json(text, field):
    """A JSON value read from a GraphML attribute (one-line ConfigError when it is not JSON)."""
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError):
        raise ConfigError(field, text, "a JSON mapping") from None


def _unflat(cls, data, where):
    """Parameter object of class ``cls`` from flat GraphML attributes."""
    data = dict(data)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    prov = {key: data.pop(f"provenance_{key}") for key in _PROVENANCE_KEYS if f"provenance_{key}" in data}
    if "provenance_accuracy" in data:
        prov["accuracy"] = _json(data.pop("provenance_accuracy"), f"{where}.provenance_accuracy")
    if prov:
        data["provenance"] = prov
    for name, value in data.items():
        fld = fields.get(name)
        if fld is None or not isinstance(value, str):
            continue
        unit = fld.metadata.get("unit")
        if unit in ("params", "serialization"):
            try:
                data[name] = json.loads(value)
            except json.JSONDecodeError:
                raise ConfigError(f"{where}.{name}", value, "a JSON mapping of parameters") from None
            continue
        if unit == "raw" or (unit in ("duration_dist", "size_dist") and value.lstrip().startswith("{")):
            try:
                data[name] = json.loads(value)
            except json.JSONDecodeError:
                if unit != "raw":
                    raise ConfigError(f"{where}.{name}", value, "a distribution (JSON mapping)") from None
                data[name] = [v for v in value.split(";") if v]
    return from_mapping(cls, data, where)


def read_graphml(path):
    """Load a topology from GraphML with flat attributes (see module docstring)."""
    try:
        raw = nx.read_graphml(path)
    except Exception as err:  # networkx raises several parser errors
        raise ConfigError(str(path), type(err).__name__, f"a GraphML file ({err})") from None
    if raw.is_directed() or raw.is_multigraph():
        raw = nx.Graph(raw)
    g = nx.Graph(**{k: v for k, v in raw.graph.items() if k not in _NX_GRAPH_DEFAULTS})
    if HOSTS in g.graph:
        g.graph[HOSTS] = _read_hosts(g.graph[HOSTS])
    for u, v in raw.edges:
        for end in (u, v):
            if not raw.nodes[end]:  # only an edge names it: not declared with a kind
                raise ConfigError(f"edge ({u!r}, {v!r})", end, "a link between declared nodes (dangling link)")
    for n, data in raw.nodes(data=True):
        data = dict(data)
        if KIND not in data:
            raise ConfigError(f"node {n!r}.{KIND}", None, f"one of {[k.value for k in NodeKind]}")
        kind = _kind(raw, n)
        data.pop(KIND)
        extra = _prefixed(data, RELAY, RelayParams, f"node {n!r}.{RELAY}")
        if HOST in data:
            extra[HOST] = str(data.pop(HOST))
        g.add_node(n, **{KIND: kind.value, PARAMS: _unflat(_PARAM_CLASS[kind], data, f"node {n!r}")}, **extra)
    for u, v, data in raw.edges(data=True):
        data = dict(data)
        extra = _prefixed(data, BRIDGE, BridgeParams, f"edge ({u!r}, {v!r}).{BRIDGE}")
        g.add_edge(u, v, **{PARAMS: _unflat(LinkParams, data, f"edge ({u!r}, {v!r})")}, **extra)
    return validate(g)


def _read_hosts(text):
    """The graph's ``hosts`` from its GraphML JSON text."""
    try:
        table = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        table = None
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise ConfigError(f"graph.{HOSTS}", text, "a JSON mapping {host name: {HostParams field: value}}")
    return {h: from_mapping(HostParams, spec, f"graph.{HOSTS}.{h}") for h, spec in table.items()}


def _prefixed(data, key, cls, where):
    """Pop ``<key>_*`` attributes from ``data``: ``{key: cls(...)}`` if any."""
    mine = {k[len(key) + 1 :]: data.pop(k) for k in list(data) if k.startswith(key + "_")}
    return {key: _unflat(cls, mine, where)} if mine else {}


def write_graphml(g, path):
    """Save a topology as GraphML with flat attributes (see module docstring);
    :func:`read_graphml` reads it back to an equal topology."""
    flat = nx.Graph(**g.graph)
    if HOSTS in g.graph:
        flat.graph[HOSTS] = json.dumps({str(h): _nested_mapping(p) for h, p in hosts(g).items()})
    for n, data in g.nodes(data=True):
        extra = {f"{RELAY}_{k}": x for k, x in _flat(data[RELAY]).items()} if data.get(RELAY) else {}
        if data.get(HOST) is not None:
            extra[HOST] = str(data[HOST])
        flat.add_node(n, **{KIND: getattr(data[KIND], "value", data[KIND])}, **_flat(data[PARAMS]), **extra)
    for u, v, data in g.edges(data=True):
        extra = {f"{BRIDGE}_{k}": x for k, x in _flat(data[BRIDGE]).items()} if data.get(BRIDGE) else {}
        flat.add_edge(u, v, **_flat(data[PARAMS]), **extra)
    nx.write_graphml(flat, path)


def sockets(g):
    """ZeroMQ socket node names, sorted."""
    return sorted(n for n in g if g.nodes[n].get(KIND) == NodeKind.SOCKET)


_INPROC = LinkParams(
    provenance=Provenance(
        source=Source.ASSUMPTION,
        reference="ZeroMQ application thread -> I/O thread hand-off (in-process pipe)",
        note="free: no latency, no bandwidth limit; the socket's send cost holds the publisher-side work",
    )
)


def brokerless(
    *, publishers, subscribers, socket, link, connect=None, handoff=None, protocol="zmq", hosts=None, placement=None
):
    """ZeroMQ direct PUB/SUB: a socket per publisher, every subscriber connected to them.

    Parameters
    ----------
    publishers, subscribers : dict of name -> params
    socket : ZmqSocketParams or dict of publisher name -> ZmqSocketParams
    link : LinkParams
        Network path of each (publisher, subscriber) connection (the peer pipe;
        its queue limit is the tighter of its own and the socket's HWM).
    connect : dict of subscriber name -> publisher names, optional
        Which publishers each subscriber connects to (default: all of them;
        the prefix filter at the publisher decides who gets copies).
    handoff : LinkParams, optional
        Application thread -> socket I/O thread on the publisher's host
        (default: free, ``LinkParams()``).
    hosts, placement : dict, optional
        ``{host name: HostParams}`` and ``{node: host name}`` (:func:`place`).

    Socket nodes are named ``"<publisher>.sock"``.
    """
    g = nx.Graph(**{PROTOCOL: protocol, FORWARDING: Forwarding.SUBSCRIPTION.value})
    handoff = _INPROC if handoff is None else handoff
    for name, params in publishers.items():
        _add(g, name, NodeKind.PUBLISHER, params)
        sock = socket[name] if isinstance(socket, dict) else socket
        _add(g, f"{name}.sock", NodeKind.SOCKET, sock)
        g.add_edge(name, f"{name}.sock", **{PARAMS: handoff})
    for name, params in subscribers.items():
        _add(g, name, NodeKind.SUBSCRIBER, params)
        targets = list(publishers) if connect is None or name not in connect else list(connect[name])
        for p in targets:
            if p not in publishers:
                raise ConfigError(f"connect[{name!r}]", p, f"one of the publishers {list(publishers)}")
            g.add_edge(name, f"{p}.sock", **{PARAMS: link})
    return place(g, hosts, placement or {})


def check_socket(g, n, kinds):
    """A socket links to exactly one publisher and to subscribers; PUSH to one peer."""
    nbrs = list(g.neighbors(n))
    pubs = [m for m in nbrs if kinds(m) is NodeKind.PUBLISHER]
    if len(pubs) != 1:
        raise ConfigError(
            f"node {n!r}",
            f"{len(pubs)} publishers linked",
            "exactly one publisher per socket (the socket lives on its host)",
        )
    other = [m for m in nbrs if kinds(m) not in (NodeKind.PUBLISHER, NodeKind.SUBSCRIBER)]
    if other:
        raise ConfigError(
            f"node {n!r}",
            f"linked to {kinds(other[0]).value} {other[0]!r}",
            "links to one publisher and to subscribers only",
        )
    params = g.nodes[n][PARAMS]
    if params.socket_type == "push" and len(nbrs) - 1 > 1:
        raise ConfigError(
            f"node {n!r}.socket_type",
            "push",
            "one connected peer for a PUSH socket (round-robin over PULL peers is not modelled)",
        )
