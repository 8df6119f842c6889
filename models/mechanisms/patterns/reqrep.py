"""Request/reply: clients with a window of outstanding requests (SYSTEMS.md §2).

A client is a pair of nodes on the server's star: a publisher ``<name>``
with ``arrival="closed_loop"`` sending requests on topic ``rr/<name>``, and
a subscriber ``<name>.reply`` matching that topic. The route of a request is
the client's uplink, the server (a broker station: its demand is the
server's processing), the reply link back and the client; the delivery is
the reply received, its latency the round trip. With at most W requests
outstanding, throughput <= W / RTT (and <= the server's capacity); for
exponential servers and several clients the closed network is solved by
Mean Value Analysis (:func:`pubsim.sim.theory.mva`).

Asymmetric request/reply (``reply=``, a
:class:`pubsim.models.params.patterns.ReplyParams` on the server): a server
stage after the broker's demand (:mod:`.server`) with its processing time
(``server_s``), the reply's own size (``size_bytes``) and the server's
serialization (decoding the request, encoding the reply); the request's
encoding is the client's ``serialization`` and the reply's decoding the
reply subscriber's (``reply_processing``). One outstanding request then
gives ``1 / RTT`` with ``RTT = uplink(request) + broker + server +
downlink(reply) (+ encode and decode)``.

Client timeout (``PublisherParams.request_timeout_s``): a request not
answered in time is sent again; :func:`client_counts` reports requests,
resends and late replies per client (the source,
:class:`pubsim.models.stations.sources.ClosedLoopSource`, keeps them).
Smart-grid request/reply over 100 Mbit/s links (SYSTEMS.md §6) and RPC-style
middleware (ICE, CORBA, XML-RPC, §1) are the settings this serves.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from ....sim.errors import ConfigError
from ... import topology as T
from ...params.client import SubscriberParams

__all__ = ["request_reply", "REQUEST_PREFIX", "reply_name", "client_counts"]

REQUEST_PREFIX = "rr"


def reply_name(client):
    """Subscriber node that receives ``client``'s replies."""
    return f"{client}.reply"


def request_reply(*, server, link, clients, reply_processing=None, protocol="none", reply=None):
    """A server (BrokerParams) with request/reply clients.

    Parameters
    ----------
    server : BrokerParams
        The server's processing per request (``ingress_cost_s`` etc.).
    link : LinkParams
        Every client's link, both directions (latency > 0 needed).
    clients : dict of name -> PublisherParams
        ``arrival`` must be ``closed_loop`` (``window_requests``,
        ``think_time_s``); topics are replaced by ``rr/<name>``.
    reply_processing : SubscriberParams or None
        Client-side handling of a reply (default: none).
    reply : ReplyParams or None
        The server's reply size, processing and serialization (set as the
        server's ``reply``); None keeps ``server.reply`` (by default: replies
        are the requests, no server stage).
    """
    if not clients:
        raise ConfigError("clients", clients, "at least one request/reply client")
    pubs, subs = {}, {}
    for name, p in clients.items():
        if p.arrival != "closed_loop":
            raise ConfigError(f"clients[{name!r}].arrival", p.arrival, "closed_loop")
        topic = f"{REQUEST_PREFIX}/{name}"
        pubs[name] = dataclasses.replace(p, topics=(topic,))
        base = reply_processing or SubscriberParams(subscriptions=(topic,))
        subs[reply_name(name)] = dataclasses.replace(base, subscriptions=(topic,))
    if reply is not None:
        server = dataclasses.replace(server, reply=reply)
    return T.star(broker=server, publishers=pubs, subscribers=subs, link=link, protocol=protocol)


def client_counts(network) -> pd.DataFrame:
    """Per closed-loop client of a simulated ``network``: ``requests`` sent (first
    copies), ``resends`` after a timeout and ``late_replies`` (replies to a request
    already answered)."""
    rows = [
        {
            "client": network.names["publisher"][i],
            "requests": src._requests if src.timeout_s > 0 else src._sent,
            "resends": src.resends,
            "late_replies": src.late_replies,
        }
        for i, src in enumerate(network.sources)
        if getattr(src, "closed_loop", False)
    ]
    return pd.DataFrame(rows, columns=["client", "requests", "resends", "late_replies"])
