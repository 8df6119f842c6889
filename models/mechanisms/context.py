"""The compile context: what the compiler and the mechanisms share while a topology is compiled.

One :class:`CompileContext` per :func:`pubsim.models.assembly.build.build_network`
call. It holds the validated graph, the stations built so far and their
:class:`~pubsim.models.mechanisms.keys.StationKey` index, the client and
node lists, the topics, and the fields mechanisms fill in their ``prepare``
hook (subscription tables, ILDM control plane and relays, socket tables).
Mechanisms build stations only through :meth:`CompileContext.add_station`
and :meth:`CompileContext.add_link`, and ask each other for route pieces
through :meth:`CompileContext.entry_hop` and
:meth:`CompileContext.forward_hops` (dispatched over the registry).
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from ...sim.rng import StreamFactory
from ...sim.routing import Hop
from ...sim.station import Station
from .. import topology as T
from ..params.client import PublisherParams
from ..params.topics import SubscriptionTable
from ..stations.core import LinkStation
from .keys import StationKey

__all__ = ["CompileContext", "published_topics"]


def published_topics(pub: PublisherParams) -> tuple[str, ...]:
    """Topics a publisher's messages may carry: its topics, then its Will topic."""
    extra = (pub.will_topic,) if pub.will_topic and pub.will_topic not in pub.topics else ()
    return tuple(pub.topics) + extra


class CompileContext:
    """Shared state of one compilation.

    Parameters
    ----------
    graph : networkx.Graph
        A validated topology.
    streams : pubsim.sim.rng.StreamFactory
        Random streams of this replication.
    window : (float, float)
        Measurement window, s.
    mechanisms : tuple
        The registry (:data:`pubsim.models.assembly.registry.MECHANISMS`), whose
        hooks :meth:`entry_hop`, :meth:`forward_hops`, :meth:`link_options` and
        :meth:`folds_subscriber` dispatch to.

    Attributes
    ----------
    stations : list of pubsim.sim.station.Station
        In index order (the order of the records).
    index : dict of StationKey -> int
    keys : list of StationKey
        Key of each station, by index.
    publishers, subscribers, brokers, sockets : list
        Graph nodes of each kind, in graph order.
    topics : list of str
        Every topic published (Will topics included), sorted.
    tables : dict
        Broker -> :class:`~pubsim.models.params.topics.SubscriptionTable` of its
        local subscribers (filled by the core's ``prepare``).
    control : pubsim.models.mechanisms.ildm.control.ControlPlane or None
        ILDM control plane in its steady state (filled by ILDM's ``prepare``).
    relays : dict
        Broker -> :class:`~pubsim.models.params.relay.RelayParams` (ILDM).
    socket_tables : dict
        Socket -> prefix table of its connected peers (brokerless).
    link_overrides : dict
        ``frozenset({a, b})`` -> LinkParams that replace the edge's own
        (hosts: loopback connections within one host).
    param_overrides : dict
        Node -> parameter object that replaces the node's own in :meth:`params`
        (hosts: CPU costs divided by the host's speed).
    shared_cpu : dict
        Node -> host: processes (brokers with or without their interworking
        node, publishers' encode stages, subscribers) whose CPU stage a shared
        host's CPU station charges (hosts).
    """

    def __init__(self, graph: nx.Graph, streams: StreamFactory, window: tuple[float, float], mechanisms: tuple = ()):
        self.graph = graph
        self.link_overrides: dict[frozenset, Any] = {}
        self.param_overrides: dict[Any, Any] = {}
        self.shared_cpu: dict[Any, Any] = {}
        self.streams = streams
        self.window = window
        self.mechanisms = tuple(mechanisms)
        self.protocol: str = graph.graph[T.PROTOCOL]
        self.stations: list[Station] = []
        self.index: dict[StationKey, int] = {}
        self.keys: list[StationKey] = []
        self.publishers: list = T.clients(graph, T.NodeKind.PUBLISHER)
        self.subscribers: list = T.clients(graph, T.NodeKind.SUBSCRIBER)
        self.brokers: list = T.brokers(graph)
        self.sockets: list = T.sockets(graph)
        self.topics: list[str] = sorted({t for p in self.publishers for t in published_topics(self.params(p))})
        self.tables: dict[Any, SubscriptionTable] = {}
        self.control = None
        self.relays: dict = {}
        self.socket_tables: dict[Any, SubscriptionTable] = {}

    # -- graph -------------------------------------------------------------
    def params(self, node):
        """Parameter object of a graph node (a mechanism's override, e.g. a host's speed, if any)."""
        override = self.param_overrides.get(node)
        return self.graph.nodes[node][T.PARAMS] if override is None else override

    def link_params(self, a, b):
        """:class:`~pubsim.models.params.link.LinkParams` of the edge ``a``-``b``
        (a mechanism's override, e.g. a loopback connection, if there is one)."""
        override = self.link_overrides.get(frozenset((a, b)))
        return self.graph.edges[a, b][T.PARAMS] if override is None else override

    def home(self, client):
        """The broker (or first socket) a client links to."""
        return T.home_broker(self.graph, client)

    # -- stations ----------------------------------------------------------
    def add_station(self, key: StationKey, station: Station) -> int:
        """Append ``station`` under ``key``; its index."""
        if key in self.index:
            raise ValueError(f"station {key} added twice")
        self.index[key] = len(self.stations)
        self.keys.append(key)
        self.stations.append(station)
        return self.index[key]

    def replace_station(self, key: StationKey, station: Station) -> int:
        """Put ``station`` in place of the one under ``key`` (same index); its index."""
        i = self.index[key]
        self.stations[i] = station
        return i

    def add_link(self, key: StationKey, name: str, link, **limits) -> int:
        """Add the link station of ``key``: a :class:`~pubsim.models.stations.core.LinkStation`
        unless a mechanism's ``link_options`` asks for another ``station_class``.

        ``limits``: keyword arguments of the station (queue limits, ...);
        the mechanisms' :meth:`link_options` for ``key`` are added to them.
        """
        options = {**limits, **self.link_options(key)}
        cls = options.pop("station_class", LinkStation)
        return self.add_station(
            key,
            cls(
                name,
                link,
                protocol=self.protocol,
                topic_bytes=None,
                streams=self.streams,
                window=self.window,
                **options,
            ),
        )

    def index_of(self, key: StationKey) -> int:
        """Station index of ``key`` (KeyError if absent)."""
        return self.index[key]

    def has(self, key: StationKey) -> bool:
        """Whether a station was built under ``key``."""
        return key in self.index

    def station(self, key: StationKey) -> Station:
        """The station built under ``key``."""
        return self.stations[self.index[key]]

    # -- hooks dispatched over the registry ----------------------------------
    def _hooks(self, name):
        return [getattr(m, name) for m in self.mechanisms if hasattr(m, name)]

    def link_options(self, key: StationKey) -> dict:
        """Keyword arguments the mechanisms add to the link station of ``key`` (in registry order)."""
        out: dict = {}
        for hook in self._hooks("link_options"):
            out.update(hook(self, key) or {})
        return out

    def entry_hop(self, node, came_from, topic: str, ingress: bool) -> Hop:
        """The hop where a copy of ``topic`` enters ``node`` (from ``came_from``, None at the publisher).

        ``entry_hop`` hooks are asked from the last registry entry to the first; the
        first Hop returned wins, so a later mechanism refines an earlier one (an
        ILDM relay in front of the core's broker).
        """
        for hook in reversed(self._hooks("entry_hop")):
            hop = hook(self, node, came_from, topic, ingress)
            if hop is not None:
                return hop
        raise KeyError(f"no mechanism builds the entry hop of node {node!r}")

    def local_hops(self, node, topic: str) -> list[Hop]:
        """Hops of the copies ``node`` delivers locally besides its subscribers' own
        (a share group's dispatch; all mechanisms, registry order)."""
        return [h for hook in self._hooks("local_hops") for h in hook(self, node, topic)]

    def forward_hops(self, node, came_from, topic: str) -> list[Hop]:
        """Hops of the copies ``node`` forwards to neighbour nodes (all mechanisms, registry order)."""
        return [h for hook in self._hooks("forward_hops") for h in hook(self, node, came_from, topic)]

    def folds_subscriber(self, subscriber) -> bool:
        """Whether a mechanism serves the subscriber inside its downlink (no subscriber station)."""
        return any(hook(self, subscriber) for hook in self._hooks("folds_subscriber"))
