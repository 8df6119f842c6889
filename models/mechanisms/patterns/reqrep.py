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
"""

from __future__ import annotations

import dataclasses

from ....sim.errors import ConfigError
from ... import topology as T
from ...params.client import SubscriberParams

__all__ = ["request_reply", "REQUEST_PREFIX", "reply_name"]

REQUEST_PREFIX = "rr"


def reply_name(client):
    """Subscriber node that receives ``client``'s replies."""
    return f"{client}.reply"


def request_reply(*, server, link, clients, reply_processing=None, protocol="none"):
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
    return T.star(broker=server, publishers=pubs, subscribers=subs, link=link, protocol=protocol)
