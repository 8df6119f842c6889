"""Compiling ZeroMQ socket nodes (:mod:`pubsim.models.mechanisms.brokerless.socket`) into stations and routes.

Hooks called by :mod:`pubsim.models.assembly.build`: the socket stations and their peer
pipes, the prefix table of each socket (the subscriptions its connected
peers sent), and the route below a socket: one copy per matching peer.
"""
from __future__ import annotations

from ....sim.routing import Hop

from ... import topology as T
from .socket import SocketStation, socket_link_limits
from ...params.topics import SubscriptionTable, TopicSyntax

__all__ = ["add_socket_stations", "socket_hop", "socket_table"]


def socket_table(g, sock, subs):
    """Prefix table of a socket: the subscriptions of the peers connected to it."""
    table = SubscriptionTable(TopicSyntax.PREFIX)
    for s in subs:
        if g.has_edge(s, sock):
            for f in g.nodes[s][T.PARAMS].subscriptions:
                table.add(s, f)
    return table


def add_socket_stations(b):
    """Socket stations, then one pipe (link, queue limit = HWM) per connected peer."""
    g = b.g
    for k in b.sockets:
        params = g.nodes[k][T.PARAMS]
        b._station(("socket", k), SocketStation(f"socket:{k}", params, streams=b.streams, window=b.window))
        for s in b.subs:
            if g.has_edge(s, k):
                link = g.edges[s, k][T.PARAMS]
                b._link(("pipe", k, s), f"pipe:{k}->{s}", link, **socket_link_limits(link, params))


def socket_hop(b, sock, topic):
    """Route below a socket: a copy into the pipe of each peer whose prefix matches."""
    table = b.socket_tables[sock]
    hop = Hop(b.index[("socket", sock)], matched=len(table.match(topic)), ingress=True)
    for s in table.subscribers(topic):
        who = b.subs.index(s)
        if ("sub", s) in b.index:
            pipe = Hop(b.index[("pipe", sock, s)], link=True,
                       children=[Hop(b.index[("sub", s)], subscriber=who)])
        else:
            pipe = Hop(b.index[("pipe", sock, s)], link=True, subscriber=who)
        hop.children.append(pipe)
    return hop
