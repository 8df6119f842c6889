"""Compile a validated topology into a runtime :class:`pubsim.sim.network.Network`.

Stations, in this order: each publisher's uplink; each broker; each
direction of each broker-broker link; each subscriber's downlink and the
subscriber itself. Route trees follow the forwarding rule of the graph
(SYSTEMS.md §3): ``flood`` sends every publication to every broker of the
tree; ``subscription`` only towards brokers behind which a subscriber's
filter matches the topic (the steady state of Subscription Flooding);
``bridge`` along static bridge patterns. Which neighbour a copy goes to is
decided by the ILDM control plane (:func:`pubsim.models.mechanisms.ildm.control.steady_state`), the
same model that produces the protocol's message flows. A broker with an ILDM
relay (:mod:`pubsim.models.mechanisms.ildm.relay`) gets a relay station in front of it: the relay
hands each publication to its broker and forwards the copies to neighbour
nodes; without one the broker forwards them itself.
"""
from __future__ import annotations

import numpy as np

from ...sim.network import Network
from ...sim.rng import StreamFactory
from ...sim.routing import Hop, RoutePlan

from .. import topology as T
from ..mechanisms.qos.build import broker_handshakes, consumer_folded, qos_link_options, visit_qos
from ..mechanisms.qos.link import QosLinkStation
from ..mechanisms.sessions.sessions import sessions_for
from ..mechanisms.sessions.will import wrap_source
from ..mechanisms.brokerless.compile import add_socket_stations, socket_hop, socket_table
from ..mechanisms.priority.channels import downlink_queue, flow_priorities
from ..mechanisms.ildm.control import steady_state
from ..mechanisms.persistence.compile import (add_disk_stations, insert_disks, mark_durable, restart_client_queues)
from ..mechanisms.ildm.relay import RelayStation
from ..stations.sources import make_source
from ..stations.core import BrokerStation, EncodeStation, LinkStation, SubscriberStation
from ..params.topics import SubscriptionTable, TopicSyntax
from ..params.mapping import to_mapping

__all__ = ["build_network"]


class _Builder:
    def __init__(self, g, streams, window):
        self.g = g
        self.streams = streams
        self.window = window
        self.stations = []
        self.index = {}
        self.pubs = T.clients(g, T.NodeKind.PUBLISHER)
        self.subs = T.clients(g, T.NodeKind.SUBSCRIBER)
        self.brokers = T.brokers(g)
        self.sockets = T.sockets(g)
        self.topics = sorted({t for p in self.pubs for t in _published_topics(self._p(p))})
        self.topic_bytes = np.array([len(t.encode()) for t in self.topics], dtype=np.int64)
        self.tables = {b: self._table(b) for b in self.brokers}
        self.relays = {b: g.nodes[b][T.RELAY] for b in self.brokers if g.nodes[b].get(T.RELAY) is not None}
        self.control = steady_state(g)
        self.socket_tables = {k: socket_table(g, k, self.subs) for k in self.sockets}

    def _p(self, n):
        return self.g.nodes[n][T.PARAMS]

    def _table(self, b):
        table = SubscriptionTable(TopicSyntax(self._p(b).topic_syntax))
        for s in self.subs:
            if T.home_broker(self.g, s) == b:
                for f in self._p(s).subscriptions:
                    table.add(s, f)
        return table

    def _station(self, key, station):
        self.index[key] = len(self.stations)
        self.stations.append(station)

    def _link(self, key, name, link, **limits):
        qos = qos_link_options(self.g, key)
        cls, extra = (LinkStation, {}) if qos is None else (QosLinkStation, qos)
        self._station(key, cls(name, link, protocol=self.g.graph[T.PROTOCOL],
                               topic_bytes=None, streams=self.streams,
                               window=self.window, **limits, **extra))

    def build_stations(self):
        g = self.g
        for p in self.pubs:
            b = T.home_broker(g, p)
            link = g.edges[p, b][T.PARAMS]
            self._link(("up", p), f"link:{p}->{b}", link,
                       queue_messages=link.queue_messages, queue_bytes=link.queue_bytes)
        for b in self.brokers:
            self._station(("broker", b), BrokerStation(f"broker:{b}", self._p(b), filters=len(self.tables[b]),
                                                      streams=self.streams, window=self.window))
        for b in self.relays:
            self._station(("relay", b), RelayStation(f"relay:{b}", self.relays[b], streams=self.streams,
                                                     window=self.window))
        for a, b in g.subgraph(self.brokers).edges:
            link = g.edges[a, b][T.PARAMS]
            for x, y in ((a, b), (b, a)):
                self._link(("bridge", x, y), f"link:{x}->{y}", link,
                           queue_messages=link.queue_messages, queue_bytes=link.queue_bytes)
        add_socket_stations(self)
        for s in self.subs:
            b = T.home_broker(g, s)
            if b not in self.tables:  # brokerless: pipes from sockets instead of a downlink
                if not _passthrough(self._p(s)):
                    self._station(("sub", s), SubscriberStation(f"subscriber:{s}", self._p(s),
                                                               streams=self.streams, window=self.window))
                continue
            link, bp = g.edges[s, b][T.PARAMS], self._p(b)
            self._link(("down", s), f"link:{b}->{s}", link, **downlink_queue(link, bp, f"link:{b}->{s}"))
            self.stations[-1].session = sessions_for(self._p(s), self.streams, f"subscriber:{s}")
            if not (_passthrough(self._p(s)) or consumer_folded(g, s)):
                self._station(("sub", s), SubscriberStation(f"subscriber:{s}", self._p(s),
                                                           streams=self.streams, window=self.window))
        add_disk_stations(self)
        restart_client_queues(self)
        for p in self.pubs:  # appended last: without serialization the station indices are unchanged
            codec = self._p(p).serialization
            if codec is not None and codec.has_encode:
                self._station(("encode", p), EncodeStation(f"encode:{p}", codec, window=self.window))

    def _wanted(self, broker, came_from, topic):
        """Neighbour brokers a copy is forwarded to from ``broker``."""
        nbrs = [n for n in self.g.neighbors(broker)
                if n != came_from and self.g.nodes[n][T.KIND] == T.NodeKind.BROKER]
        return [n for n in nbrs if self.control.forwards(broker, n, topic)]

    def _entry_hop(self, broker, came_from, topic, ingress):
        """Where a copy enters a node: its relay if it has one, else its broker."""
        if broker not in self.relays:
            return self._broker_hop(broker, came_from, topic, ingress)
        hop = Hop(self.index[("relay", broker)],
                  children=[self._broker_hop(broker, came_from, topic, ingress, forward=False)])
        hop.children.extend(self._bridge_hops(broker, came_from, topic))
        return hop

    def _bridge_hops(self, broker, came_from, topic):
        return [Hop(self.index[("bridge", broker, n)], link=True,
                    children=[self._entry_hop(n, broker, topic, ingress=False)])
                for n in self._wanted(broker, came_from, topic)]

    def _broker_hop(self, broker, came_from, topic, ingress, forward=True):
        table = self.tables[broker]
        hop = Hop(self.index[("broker", broker)], matched=len(table.match(topic)), ingress=ingress)
        for s in table.subscribers(topic):
            who = self.subs.index(s)
            if ("sub", s) in self.index:
                down = Hop(self.index[("down", s)], link=True,
                           children=[Hop(self.index[("sub", s)], subscriber=who)])
            else:  # delivered when it leaves the downlink
                down = Hop(self.index[("down", s)], link=True, subscriber=who)
            hop.children.append(down)
        if forward:
            hop.children.extend(self._bridge_hops(broker, came_from, topic))
        return hop

    def flows(self):
        out = []
        for i, p in enumerate(self.pubs):
            home = T.home_broker(self.g, p)
            for topic in _published_topics(self._p(p)):
                first = (socket_hop(self, home, topic) if home in self.socket_tables
                         else self._entry_hop(home, None, topic, True))
                root = Hop(self.index[("up", p)], link=True, children=[first])
                if self._p(p).persistent:
                    insert_disks(self, root)
                if ("encode", p) in self.index:  # the publisher's CPU encodes before the uplink
                    root = Hop(self.index[("encode", p)], children=[root])
                out.append((i, self.topics.index(topic), root))
        return out

    def sp_ratio(self):
        """sum_i P(t_i) S(t_i) / sum_i P(t_i) over topics t_i (SYSTEMS.md §4)."""
        n_pub = {t: sum(t in self._p(p).topics for p in self.pubs) for t in self.topics}
        n_sub = {t: sum(len(self.tables[b].subscribers(t)) for b in self.brokers)
                 + len(set().union(*(self.socket_tables[k].subscribers(t) for k in self.sockets)))
                 for t in self.topics}
        total = sum(n_pub.values())
        return sum(n_pub[t] * n_sub[t] for t in self.topics) / total if total else 0.0


def _published_topics(pub):
    """Topics a publisher's messages may carry: its topics, then its Will topic."""
    extra = (pub.will_topic,) if pub.will_topic and pub.will_topic not in pub.topics else ()
    return tuple(pub.topics) + extra


def _passthrough(sub):
    """A subscriber that takes no time and has no buffer limit is not a station:
    its copies are delivered as they leave the downlink."""
    return (sub.processing_s.is_constant and sub.processing_s.mean == 0 and sub.buffer_messages is None
            and (sub.serialization is None or not sub.serialization.has_decode))


def parameter_table(g):
    """One row per component: kind, parameters and their provenance."""

    rows = []
    for n, data in g.nodes(data=True):
        params = data[T.PARAMS]
        rows.append({"component": str(n), "kind": data[T.KIND],
                     "parameters": to_mapping(params), "provenance": str(params.provenance),
                     "placeholder": params.provenance.is_placeholder})
        if data.get(T.RELAY) is not None:
            rows.append(_row(f"relay:{n}", "relay", data[T.RELAY]))
        disk = getattr(params, "disk", None)  # a broker's disk carries its own provenance
        if disk is not None:
            rows.append({"component": f"{n}.disk", "kind": "disk", "parameters": to_mapping(disk),
                         "provenance": str(disk.provenance), "placeholder": disk.provenance.is_placeholder})
        codec = getattr(params, "serialization", None)
        if codec is not None:
            rows.append({"component": f"{n}.serialization", "kind": "serialization",
                         "parameters": to_mapping(codec), "provenance": str(codec.provenance),
                         "placeholder": codec.provenance.is_placeholder})
    for u, v, data in g.edges(data=True):
        params = data[T.PARAMS]
        rows.append({"component": f"{u}<->{v}", "kind": "link", "parameters": to_mapping(params),
                     "provenance": str(params.provenance), "placeholder": params.provenance.is_placeholder})
        if data.get(T.BRIDGE) is not None:
            rows.append(_row(f"bridge:{u}<->{v}", "bridge", data[T.BRIDGE]))
    return rows


def _wire_qos(b, plan):
    """Hop QoS on QoS links and handshake packets at brokers (see :mod:`pubsim.models.mechanisms.qos.build`)."""
    keys = {i: k for k, i in b.index.items()}
    qos = visit_qos(b.g, plan, keys, b.pubs, b.subs)
    brokers = {i for k, i in b.index.items() if k[0] == "broker"}
    acks = broker_handshakes(plan, qos, brokers)
    retain = np.array([b._p(b.pubs[p]).retain for p in plan.flow_publisher], dtype=bool)
    for i, st in enumerate(b.stations):
        if isinstance(st, LinkStation) and st.session is not None and retain.any():
            st.session.flow_retain = retain
        if isinstance(st, QosLinkStation):
            st.visit_qos = qos
        elif i in brokers and acks.any():
            st.ack_packets = acks


def _row(component, kind, params):

    return {"component": component, "kind": kind, "parameters": to_mapping(params),
            "provenance": str(params.provenance), "placeholder": params.provenance.is_placeholder}


def build_network(g, *, seed, replication=0, window=(0.0, np.inf)):
    """Runtime network of topology ``g`` for one replication.

    Parameters
    ----------
    g : networkx.Graph
        A topology (validated again here).
    seed, replication : int
        Root seed and replication index; every component gets its own streams.
    window : (float, float)
        Measurement window, s.
    """
    T.validate(g)
    streams = StreamFactory(seed, replication)
    b = _Builder(g, streams, window)
    b.build_stations()
    flows = b.flows()
    plan = RoutePlan(flows, flow_priority=flow_priorities([b._p(p) for p in b.pubs], b.topics, flows))
    mark_durable(b, plan)
    flow_topic_bytes = b.topic_bytes[plan.flow_topic] if len(plan.flow_topic) else np.empty(0, np.int64)
    for st in b.stations:
        if isinstance(st, LinkStation):
            st.topic_bytes = flow_topic_bytes
    _wire_qos(b, plan)
    sources = [wrap_source(make_source(b._p(p), [b.topics.index(t) for t in b._p(p).topics], streams,
                                       f"publisher:{p}"), b._p(p), b.topics)
               for p in b.pubs]
    names = {"publisher": b.pubs, "subscriber": b.subs, "topic": b.topics}
    net = Network(b.stations, plan, sources, names=names, sp_ratio=b.sp_ratio(), window=window,
                  parameters=parameter_table(g))
    net.control = b.control  # ILDM control plane, for traffic accounting (models.mechanisms.ildm.traffic)
    return net
