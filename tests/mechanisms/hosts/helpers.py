"""Small host topologies shared by the hosts tests."""

from __future__ import annotations

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.sim.distributions import Constant, Exponential

FREE = LinkParams()  # no latency, no bandwidth limit, no overhead


def card_star(*, lam_per_s, size_bytes, card_Bps, publishers=4, seed_rate=None):
    """``publishers`` Poisson publishers of fixed-size messages on host ``a`` sharing its
    card; a free broker and its subscriber on host ``b`` (free card, free loopback)."""
    pubs = {
        f"p{i}": PublisherParams(
            topics=("t",), rate_per_s=lam_per_s / publishers, size_bytes=Constant(value=size_bytes)
        )
        for i in range(publishers)
    }
    g = T.star(
        broker=BrokerParams(),
        publishers=pubs,
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=FREE,
        protocol="none",
    )
    hosts = {"a": HostParams(card_Bps=card_Bps), "b": HostParams()}
    return T.place(g, hosts, {**{p: "a" for p in pubs}, "broker": "b", "s": "b"})


def mixed_hosts():
    """Three hosts, exponential broker costs, lossy jittery links, two cards that bind."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=60e-6), delivery_cost_s=Exponential(mean_value=10e-6), queue_messages=30
    )
    pubs = {
        f"p{i}": PublisherParams(topics=(f"s/{i % 3}",), rate_per_s=700.0, size_bytes=Exponential(mean_value=900))
        for i in range(6)
    }
    subs = {
        "all": SubscriberParams(subscriptions=("s/#",)),
        "one": SubscriberParams(subscriptions=("s/1",), processing_s=Exponential(mean_value=1e-4), buffer_messages=5),
        "near": SubscriberParams(subscriptions=("s/2",)),
    }
    link = LinkParams(latency_s=2e-4, bandwidth_Bps=12.5e6, overhead_bytes=40, jitter_s=Exponential(mean_value=3e-5))
    g = T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)
    hosts = {
        "gw": HostParams(card_Bps=4e6, card_latency_s=2e-5),
        "srv": HostParams(cores=2, card_Bps=5e6, card_latency_s=1e-5, loopback_latency_s=3e-5),
        "app": HostParams(card_Bps=3e6),
    }
    place = {f"p{i}": "gw" for i in range(4)} | {
        "p4": "srv",
        "broker": "srv",
        "near": "srv",
        "all": "app",
        "one": "app",
    }
    return T.place(g, hosts, place)
