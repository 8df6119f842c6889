"""Control plane of cooperating edge brokers (ILDM, Banno et al. 2017; SYSTEMS.md §3).

Brokers sit at the network edge, each paired with an interworking *node*;
the nodes form a tree and relay traffic between their local brokers. This
module is an exact event-level model of the protocols between the nodes:

``flood`` (Publication Flooding, PF)
    A SUBSCRIBE only reaches the local broker. A PUBLISH goes to the local
    broker and to every neighbour node; each node hands it to its broker and
    forwards it to all its other neighbours.
``subscription`` (Subscription Flooding, SF)
    On a SUBSCRIBE a node *inter-subscribes* to each neighbour, unless it
    already holds an inter-subscription there that covers the filter (only
    the difference is propagated); receiving nodes propagate it further away
    from its origin. A PUBLISH goes only to neighbours that inter-subscribed
    to a filter matching its topic. A retained PUBLISH is forwarded to every
    node regardless, and stored by every broker.
``bridge`` (static bridges, Mosquitto style)
    Each directed tree edge carries fixed topic patterns; a copy crosses it
    only if its topic matches one of them.

"Difference" with wildcards: a SUBSCRIBE carries one or more filters; towards
a neighbour, a node sends only those filters not *covered* (every topic the
filter matches is matched by one filter already sent there, see
:func:`covers`). A filter wider than the ones already sent (``a/#`` after
``a/b``) is sent whole, since MQTT cannot express ``a/#`` minus ``a/b``; a
filter equal to or narrower than one already sent is not sent. On
UNSUBSCRIBE a node withdraws what it no longer needs and re-sends the
narrower filters a withdrawn wide one had covered.

Every operation returns tidy :class:`Flow` records. The data plane
(:mod:`pubsim.models.assembly.build`) routes with :meth:`ControlPlane.forwards` of the
steady state after every subscriber subscribed (:func:`steady_state`), so the
simulated routes and this protocol model are one source of truth.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import asdict, dataclass

import networkx as nx

from ....sim.errors import ConfigError
from ... import topology as T
from ...params.topics import SubscriptionTable, TopicSyntax, _syntax, validate_filter, validate_topic

__all__ = ["Kind", "Flow", "ControlPlane", "covers", "steady_state", "ack_kinds", "CONTROL_KINDS"]


class Kind(str, enum.Enum):
    """What a flow record carries."""

    SUBSCRIBE = "subscribe"  # client -> its node / local broker
    UNSUBSCRIBE = "unsubscribe"
    INTER_SUBSCRIBE = "inter_subscribe"  # node -> neighbour node
    INTER_UNSUBSCRIBE = "inter_unsubscribe"
    PUBLISH = "publish"  # client -> node, or node -> neighbour node
    DELIVER = "deliver"  # local broker -> subscribed client
    WILL = "will"  # a node fires a stored will for a client
    PUBACK = "puback"  # per-hop QoS 1
    PUBREC = "pubrec"  # per-hop QoS 2
    PUBREL = "pubrel"
    PUBCOMP = "pubcomp"


DATA_KINDS = frozenset({Kind.PUBLISH, Kind.DELIVER, Kind.WILL})
CONTROL_KINDS = frozenset(set(Kind) - DATA_KINDS)


def ack_kinds(qos):
    """MQTT acknowledgement packets of one PUBLISH hop, as (kind, reversed) pairs.

    ``reversed`` is True when the packet travels from receiver to sender
    (MQTT 3.1.1 §4.3: QoS 1 PUBACK; QoS 2 PUBREC, PUBREL, PUBCOMP).
    """
    return {0: (), 1: ((Kind.PUBACK, True),), 2: ((Kind.PUBREC, True), (Kind.PUBREL, False), (Kind.PUBCOMP, True))}[qos]


@dataclass(frozen=True)
class Flow:
    """One message of the protocol.

    ``src``/``dst`` are client or node names (a node and its broker share the
    broker's name); ``topic`` is a topic or filter; ``client`` the client the
    operation was made for; ``inter_broker`` True between two nodes.
    """

    step: int
    kind: str
    src: str
    dst: str
    topic: str
    client: str
    inter_broker: bool
    retain: bool = False

    @property
    def control(self) -> bool:
        return Kind(self.kind) in CONTROL_KINDS

    def record(self) -> dict:
        return {**asdict(self), "control": self.control}


# ---------------------------------------------------------------------------
# Covering of topic filters
# ---------------------------------------------------------------------------

_WILD = {TopicSyntax.MQTT: ("/", "+", "#"), TopicSyntax.AMQP: (".", "*", "#")}


def _levels(syntax, text):
    sep = _WILD[syntax][0]
    if syntax is TopicSyntax.AMQP and text == "":
        return ()
    return tuple(text.split(sep))


def covers(syntax, wide, narrow) -> bool:
    """Whether filter ``wide`` matches every topic filter ``narrow`` matches.

    MQTT and AMQP: level patterns where the one-level wildcard (``+``/``*``)
    matches one level and ``#`` zero or more; decided exactly by dynamic
    programming over the two level sequences. MQTT: a filter starting with a
    wildcard does not match ``$`` topics (§4.7.2). Prefix (ZeroMQ): ``narrow``
    starts with ``wide``.
    """
    syntax = _syntax(syntax)
    validate_filter(syntax, wide)
    validate_filter(syntax, narrow)
    if syntax is TopicSyntax.PREFIX:
        enc = lambda x: x.encode() if isinstance(x, str) else bytes(x)
        return enc(narrow).startswith(enc(wide))
    _, one, rest = _WILD[syntax]
    w, n = _levels(syntax, wide), _levels(syntax, narrow)
    if syntax is TopicSyntax.MQTT:  # a topic has >= 1 level, so a leading '#' is '+/#'
        w, n = (((one,) + f) if f[0] == rest else f for f in (w, n))
    if syntax is TopicSyntax.MQTT and w and n and w[0] in (one, rest) and n[0].startswith("$"):
        return False
    memo = {}

    def cov(i, j):
        key = (i, j)
        if key not in memo:
            memo[key] = _cov_step(w, n, i, j, one, rest, cov)
        return memo[key]

    return cov(0, 0)


def _cov_step(w, n, i, j, one, rest, cov):
    if i == len(w):
        return j == len(n)
    if w[i] == rest:  # '#' takes nothing, or absorbs narrow's next level (any kind)
        return cov(i + 1, j) or (j < len(n) and cov(i, j + 1))
    if j == len(n) or n[j] == rest:
        return False
    if w[i] == one:
        return cov(i + 1, j + 1)
    return n[j] == w[i] and cov(i + 1, j + 1)


# ---------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------


class Mode(str, enum.Enum):
    FLOOD = "flood"
    SUBSCRIPTION = "subscription"
    BRIDGE = "bridge"


class ControlPlane:
    """PF / SF / static-bridge protocol state over a tree of nodes.

    Parameters
    ----------
    tree : networkx.Graph
        Nodes (one per broker+node pair) and tree edges; a cycle is rejected.
    mode : str
        ``flood``, ``subscription`` or ``bridge``.
    syntax : TopicSyntax or str or dict
        Topic syntax of every node (or a mapping node -> syntax).
    hop_qos : dict, optional
        ``{(a, b): 0|1|2}``: QoS of PUBLISH copies sent from node ``a`` to
        ``b`` (missing: 0). Adds the MQTT acks of that hop to the flows.
    bridges : dict, optional
        Bridge mode: ``{(a, b): filters}``, topics forwarded from ``a`` to ``b``.
    """

    def __init__(self, tree, mode="subscription", *, syntax=TopicSyntax.MQTT, hop_qos=None, bridges=None):
        _check_tree(tree)
        try:
            self.mode = Mode(getattr(mode, "value", mode))
        except ValueError:
            raise ConfigError("forwarding", mode, f"one of {[m.value for m in Mode]}") from None
        self.nodes = sorted(tree.nodes, key=str)
        self.nbrs = {x: sorted(tree.neighbors(x), key=str) for x in self.nodes}
        self.syntax = {x: _syntax(syntax[x] if isinstance(syntax, dict) else syntax) for x in self.nodes}
        self.hop_qos = dict(hop_qos or {})
        for (a, b), q in self.hop_qos.items():
            self._edge(a, b, "hop_qos")
            if q not in (0, 1, 2):
                raise ConfigError(f"hop_qos[{a!r}, {b!r}]", q, "a QoS level 0, 1 or 2")
        self.bridges = {}
        for (a, b), filters in (bridges or {}).items():
            self._edge(a, b, "bridges")
            self.bridges[(a, b)] = self._table(b, filters)
        self.home = {}
        self.local = {x: {} for x in self.nodes}  # node -> filter -> set of clients
        self.held = {x: {y: [] for y in self.nbrs[x]} for x in self.nodes}  # x forwards to y: filters
        self._tables = {}
        self._index = {}  # (x, y) -> (set of held[x][y], its wildcard ones)
        self.retained = {x: {} for x in self.nodes}  # node -> topic -> publishing client
        self.wills = {}
        self.step = 0
        self.log = []

    # --- helpers --------------------------------------------------------
    def _edge(self, a, b, field):
        if a not in self.nbrs or b not in self.nbrs[a]:
            raise ConfigError(f"{field}[{a!r}, {b!r}]", (a, b), "a tree edge between two nodes")

    def _table(self, node, filters):
        table = SubscriptionTable(self.syntax[node])
        for f in filters:
            table.add(0, f)
        return table

    def _flow(self, flows, kind, src, dst, topic, client, retain=False):
        inter = src in self.nbrs and dst in self.nbrs
        flows.append(Flow(self.step, kind.value, str(src), str(dst), topic, str(client), inter, retain))

    def _node_of(self, client):
        if client not in self.home:
            raise ConfigError("client", client, "a client attached with attach() or connect()")
        return self.home[client]

    def _begin(self):
        self.step += 1
        return []

    def _end(self, flows):
        self.log.extend(flows)
        return flows

    def attach(self, client, node):
        """Make ``client`` local to ``node`` (no flows)."""
        if node not in self.nbrs:
            raise ConfigError(f"client {client!r}.node", node, f"one of {self.nodes}")
        self.home[client] = node

    # --- operations -----------------------------------------------------
    def connect(self, client, node, *, will=None):
        """CONNECT ``client`` to ``node``; the node stores the will topic, if any."""
        self.attach(client, node)
        if will is not None:
            validate_topic(self.syntax[node], will, "will")
            self.wills[client] = will
        else:
            self.wills.pop(client, None)
        return self._end(self._begin())

    def disconnect(self, client, *, unexpected=False):
        """The connection of ``client`` ends; if ``unexpected``, its node publishes the will."""
        node = self._node_of(client)
        will = self.wills.pop(client, None)
        flows = self._begin()
        if unexpected and will is not None:
            self._flow(flows, Kind.WILL, client, node, will, client)
            self._route(node, will, client, retain=False, flows=flows)
        return self._end(flows)

    def subscribe(self, client, filters):
        """SUBSCRIBE ``client`` to one filter or a list of filters."""
        node = self._node_of(client)
        filters = [filters] if isinstance(filters, str) else list(filters)
        flows = self._begin()
        for f in filters:
            validate_filter(self.syntax[node], f, "filter")
            self._flow(flows, Kind.SUBSCRIBE, client, node, f, client)
            self.local[node].setdefault(f, set()).add(client)
        for f in filters:  # retained messages stored at the local broker
            for topic in sorted(self.retained[node]):
                if self._table(node, [f]).match(topic):
                    self._flow(flows, Kind.DELIVER, node, client, topic, client, retain=True)
        if self.mode is Mode.SUBSCRIPTION:
            self._reconcile(node, client, flows, list(dict.fromkeys(filters)))
        return self._end(flows)

    def unsubscribe(self, client, filters):
        """UNSUBSCRIBE ``client`` from one filter or a list of filters."""
        node = self._node_of(client)
        filters = [filters] if isinstance(filters, str) else list(filters)
        flows = self._begin()
        for f in filters:
            holders = self.local[node].get(f, set())
            if client in holders:
                self._flow(flows, Kind.UNSUBSCRIBE, client, node, f, client)
                holders.discard(client)
                if not holders:
                    del self.local[node][f]
        if self.mode is Mode.SUBSCRIPTION:
            self._reconcile(node, client, flows)
        return self._end(flows)

    def publish(self, client, topic, *, retain=False):
        """PUBLISH from ``client`` to its node; returns every copy and delivery."""
        node = self._node_of(client)
        validate_topic(self.syntax[node], topic, "topic")
        flows = self._begin()
        self._flow(flows, Kind.PUBLISH, client, node, topic, client, retain)
        self._route(node, topic, client, retain=retain, flows=flows)
        return self._end(flows)

    # --- SF inter-subscriptions -------------------------------------------
    def _desired(self, x, y):
        """Filters ``x`` needs from neighbour ``y``: its local ones and those its
        other neighbours inter-subscribed, in a fixed order."""
        out = dict.fromkeys(self.local[x])
        for z in self.nbrs[x]:
            if z != y:
                out.update(dict.fromkeys(self.held[x][z]))
        return list(out)

    def _reconcile(self, origin, client, flows, added=None):
        """Bring the inter-subscriptions in line with the subscriptions, breadth
        first away from ``origin``; send only what changed. ``added``: the only
        filters that may be new (a SUBSCRIBE); None re-checks everything."""
        queue = deque([(origin, None, added)])
        while queue:
            x, came, cand = queue.popleft()
            for y in self.nbrs[x]:
                if y != came:
                    new, gone = self._sync(x, y, client, flows, cand)
                    if new or gone:
                        queue.append((y, x, None if cand is None else new))

    def _covered(self, node, sent, wild, d):
        """Whether filter ``d`` is covered by a filter in ``sent`` (``wild``: those with wildcards)."""
        return d in sent or any(covers(self.syntax[node], w, d) for w in wild)

    def _sync(self, x, y, client, flows, cand):
        """Make ``x``'s inter-subscriptions at ``y`` cover what ``x`` needs; returns (new, gone)."""
        syn = self.syntax[y]
        sent = self.held[y][x]
        gone = []
        if cand is None:
            cand = self._desired(x, y)
            gone = [s for s in sent if not any(covers(syn, d, s) for d in cand)]
        have, wild = self._index.setdefault((y, x), (set(), []))
        for s in gone:
            sent.remove(s)
            have.discard(s)
            if s in wild:
                wild.remove(s)
            self._flow(flows, Kind.INTER_UNSUBSCRIBE, x, y, s, client)
        new = []
        for d in cand:
            if not self._covered(y, have, wild, d):
                new.append(d)
                have.add(d)
                if _has_wildcard(syn, d):
                    wild.append(d)
        for d in new:
            sent.append(d)
            self._flow(flows, Kind.INTER_SUBSCRIBE, x, y, d, client)
        if gone or new:
            self._tables.pop((y, x), None)
        return new, gone

    # --- publications ------------------------------------------------------
    def forwards(self, x, y, topic, *, retain=False) -> bool:
        """Whether node ``x`` forwards a PUBLISH on ``topic`` to neighbour ``y``."""
        if self.mode is Mode.FLOOD or (retain and self.mode is Mode.SUBSCRIPTION):
            return True
        if self.mode is Mode.BRIDGE:
            table = self.bridges.get((x, y))
            return bool(table is not None and table.match(topic))
        table = self._tables.get((x, y))
        if table is None:
            table = self._tables[(x, y)] = self._table(x, self.held[x][y])
        return bool(table.match(topic))

    def table_load(self, x, came_from, topic) -> tuple[int, int]:
        """Inter-subscriptions node ``x`` consults for a PUBLISH on ``topic`` that came from ``came_from``.

        Under Subscription Flooding a node decides where to forward by
        matching the topic against the inter-subscriptions its neighbours
        (all but the one the copy came from) hold at it; returns
        ``(installed, matched)``: the entries of those tables and how many of
        them match ``topic``. Publication Flooding and static bridges consult
        no inter-subscription table: ``(0, 0)``.
        """
        if self.mode is not Mode.SUBSCRIPTION:
            return 0, 0
        installed = matched = 0
        for y in self.nbrs[x]:
            if y == came_from or not self.held[x][y]:
                continue
            installed += len(self.held[x][y])
            table = self._tables.get((x, y))
            if table is None:
                table = self._tables[(x, y)] = self._table(x, self.held[x][y])
            matched += len(table.match(topic))
        return installed, matched

    def local_subscribers(self, node, topic):
        """Sorted clients at ``node`` with a filter matching ``topic`` (members of a
        share group included: the protocol model does not pick one)."""
        table = SubscriptionTable(self.syntax[node])
        for f, holders in self.local[node].items():
            for c in holders:
                table.add(c, f)
        return sorted({c for c, _ in table.match(topic)})

    def _route(self, origin, topic, client, *, retain, flows):
        queue = deque([(origin, None)])
        while queue:
            x, came = queue.popleft()
            if retain:
                self.retained[x][topic] = client
            for c in self.local_subscribers(x, topic):
                self._flow(flows, Kind.DELIVER, x, c, topic, client, retain)
            for y in self.nbrs[x]:
                if y != came and self.forwards(x, y, topic, retain=retain):
                    self._flow(flows, Kind.PUBLISH, x, y, topic, client, retain)
                    for kind, back in ack_kinds(self.hop_qos.get((x, y), 0)):
                        self._flow(flows, kind, *((y, x) if back else (x, y)), topic, client)
                    queue.append((y, x))

    # --- outputs ------------------------------------------------------------
    def records(self, flows=None):
        """Tidy rows (dicts) of ``flows`` (default: everything so far)."""
        return [f.record() for f in (self.log if flows is None else flows)]


def _has_wildcard(syntax, f):
    """A filter without wildcards matches one topic, so only itself or a
    wildcard filter can cover it (prefix filters: always check)."""
    if syntax is TopicSyntax.PREFIX:
        return True
    _, one, rest = _WILD[syntax]
    return any(level in (one, rest) for level in _levels(syntax, f))


def _check_tree(tree):
    try:
        cycle = nx.find_cycle(tree)
    except nx.NetworkXNoCycle:
        return
    loop = " - ".join(str(a) for a, _ in cycle) + f" - {cycle[0][0]}"
    u, v = cycle[-1][:2]
    raise ConfigError(
        f"edge ({u!r}, {v!r})", f"closes the cycle {loop}", "nodes connected as a tree (no cycles, SYSTEMS.md §3)"
    )


def steady_state(g):
    """Control plane of topology ``g`` after every subscriber subscribed.

    Subscribers subscribe in name order, each with all its filters; with
    ``bridge`` forwarding the edges' bridge patterns are installed. Hop QoS
    comes from the relays' ``hop_qos`` (0 without a relay).
    """

    names = T.brokers(g)
    tree = g.subgraph(names)
    syntax = {b: g.nodes[b][T.PARAMS].topic_syntax for b in names}
    hop_qos = {}
    for a, b in tree.edges:
        for x, y in ((a, b), (b, a)):
            relay = g.nodes[x].get(T.RELAY)
            if relay is not None and relay.hop_qos:
                hop_qos[(x, y)] = relay.hop_qos
    bridges = T.bridge_patterns(g) if g.graph[T.FORWARDING] == T.Forwarding.BRIDGE.value else None
    cp = ControlPlane(tree, g.graph[T.FORWARDING], syntax=syntax, hop_qos=hop_qos, bridges=bridges)
    for s in T.clients(g, T.NodeKind.SUBSCRIBER):
        if not any(n in cp.nbrs for n in g.neighbors(s)):
            continue  # a brokerless peer (ZeroMQ socket) has no node
        cp.attach(s, T.home_broker(g, s))
        cp.subscribe(s, list(g.nodes[s][T.PARAMS].subscriptions))
    return cp
