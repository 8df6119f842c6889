"""Shared builders for small topologies used across the tests."""
from __future__ import annotations


from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.sim.distributions import Constant, Exponential

ZERO_LINK = LinkParams()  # no latency, infinite bandwidth: a pure queueing test


def single_queue(*, rate_per_s, service, workers=1, queue_messages=None, overflow="drop_newest",
                 n_publishers=1, arrival="poisson"):
    """One broker between Poisson publishers and one subscriber, free links.

    The end-to-end latency is then the broker's sojourn time.
    """
    broker = BrokerParams(workers=workers, ingress_cost_s=service, queue_messages=queue_messages,
                          overflow=overflow)
    pubs = {f"p{i}": PublisherParams(topics=("t",), arrival=arrival, rate_per_s=rate_per_s / n_publishers)
            for i in range(n_publishers)}
    subs = {"s": SubscriberParams(subscriptions=("t",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=ZERO_LINK, protocol="none")


def tandem(*, rate_per_s, services, link=ZERO_LINK, forwarding="subscription"):
    """Brokers b0..bn-1 in a chain, one publisher at b0, one subscriber at the end."""
    brokers = {f"b{i}": BrokerParams(ingress_cost_s=s) for i, s in enumerate(services)}
    last = f"b{len(services) - 1}"
    return T.chain(brokers=brokers, bridge=link, link=ZERO_LINK, forwarding=forwarding,
                   publishers={"p": ("b0", PublisherParams(topics=("t",), rate_per_s=rate_per_s))},
                   subscribers={"s": (last, SubscriberParams(subscriptions=("t",)))}, protocol="none")


