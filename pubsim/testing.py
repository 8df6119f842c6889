"""Builders and hypothesis strategies for testing models built with pubsim.

Small topologies whose behaviour has a closed form (:func:`single_queue`, a
broker between Poisson publishers and one subscriber over free links;
:func:`tandem`, brokers in a chain) and a hypothesis strategy of random small
topologies (:func:`topologies`). Used by pubsim's own tests; useful for users
checking their own models the same way. Needs the ``test`` extra
(``pip install "pubsim[test]"``) for hypothesis.
"""

from __future__ import annotations

from hypothesis import strategies as st

from . import BrokerParams, Constant, Exponential, LinkParams, PublisherParams, SubscriberParams, chain, star

__all__ = ["ZERO_LINK", "single_queue", "tandem", "topologies", "TOPICS", "FILTERS"]

ZERO_LINK = LinkParams()  # no latency, infinite bandwidth: a pure queueing test


def single_queue(
    *, rate_per_s, service, workers=1, queue_messages=None, overflow="drop_newest", n_publishers=1, arrival="poisson"
):
    """One broker between Poisson publishers and one subscriber, free links.

    The end-to-end latency is then the broker's sojourn time.
    """
    broker = BrokerParams(workers=workers, ingress_cost_s=service, queue_messages=queue_messages, overflow=overflow)
    pubs = {
        f"p{i}": PublisherParams(topics=("t",), arrival=arrival, rate_per_s=rate_per_s / n_publishers)
        for i in range(n_publishers)
    }
    subs = {"s": SubscriberParams(subscriptions=("t",))}
    return star(broker=broker, publishers=pubs, subscribers=subs, link=ZERO_LINK, protocol="none")


def tandem(*, rate_per_s, services, link=ZERO_LINK, forwarding="subscription"):
    """Brokers b0..bn-1 in a chain, one publisher at b0, one subscriber at the end."""
    brokers = {f"b{i}": BrokerParams(ingress_cost_s=s) for i, s in enumerate(services)}
    last = f"b{len(services) - 1}"
    return chain(
        brokers=brokers,
        bridge=link,
        link=ZERO_LINK,
        forwarding=forwarding,
        publishers={"p": ("b0", PublisherParams(topics=("t",), rate_per_s=rate_per_s))},
        subscribers={"s": (last, SubscriberParams(subscriptions=("t",)))},
        protocol="none",
    )


TOPICS = ["a/x", "a/y", "b/x"]
FILTERS = ["a/x", "a/+", "#", "+/x", "b/#"]


@st.composite
def topologies(draw, jitter=True, one_worker=False):
    """Random small chains of 1-3 brokers (a star when 1): random workers, costs, queue limits,
    overflow policies, lossy jittery links (either ``jitter_on``), Poisson or constant publishers over :data:`TOPICS`,
    subscribers with wildcard :data:`FILTERS`, flooding or subscription forwarding."""
    n_brokers = draw(st.integers(1, 3))
    overflow = draw(st.sampled_from(["drop_newest", "drop_oldest", "backpressure"]))
    brokers = {
        f"b{i}": BrokerParams(
            workers=1 if one_worker else draw(st.integers(1, 2)),
            ingress_cost_s=Exponential(mean_value=draw(st.floats(1e-5, 4e-4))),
            delivery_cost_s=Constant(value=draw(st.floats(0, 5e-5))),
            queue_messages=draw(st.one_of(st.none(), st.integers(0, 8))),
            client_queue_messages=draw(st.one_of(st.none(), st.integers(1, 5))),
            overflow="drop_newest" if one_worker and overflow == "drop_oldest" else overflow,
        )
        for i in range(n_brokers)
    }
    link = LinkParams(
        latency_s=draw(st.floats(1e-5, 1e-3)),
        bandwidth_Bps=draw(st.floats(1e5, 1e8)),
        overhead_bytes=draw(st.integers(0, 60)),
        jitter_s=Exponential(mean_value=draw(st.floats(1e-6, 1e-4))) if jitter else Constant(value=0),
        loss_probability=draw(st.sampled_from([0.0, 0.0, 0.05])),
        jitter_on=draw(st.sampled_from(["every_packet", "idle_receiver"])),
    )
    names = list(brokers)
    pubs = {
        f"p{i}": (
            draw(st.sampled_from(names)),
            PublisherParams(
                topics=tuple(draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2, unique=True))),
                arrival=draw(st.sampled_from(["poisson", "constant"])),
                rate_per_s=draw(st.floats(100, 3000)),
                size_bytes=Constant(value=draw(st.integers(1, 1500))),
            ),
        )
        for i in range(draw(st.integers(1, 4)))
    }
    subs = {
        f"s{i}": (
            draw(st.sampled_from(names)),
            SubscriberParams(
                subscriptions=tuple(draw(st.lists(st.sampled_from(FILTERS), min_size=1, max_size=2, unique=True))),
                processing_s=Exponential(mean_value=draw(st.floats(1e-6, 2e-4))),
                buffer_messages=draw(st.one_of(st.none(), st.integers(1, 4))),
            ),
        )
        for i in range(draw(st.integers(1, 4)))
    }
    fwd = draw(st.sampled_from(["flood", "subscription"]))
    return chain(brokers=brokers, bridge=link, link=link, publishers=pubs, subscribers=subs, forwarding=fwd)
