"""A star whose one publisher sends 10-byte messages on topic ``t`` at given times."""

from __future__ import annotations

from pubsim.models import topology as T
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams


def scheduled_star(broker, times, *, subscribers=3, latency_s=0.0, hosts=None, placement=None):
    """Publisher ``p`` at ``times`` (s), subscribers ``s0``... on ``t``, every link ``latency_s``."""
    n = len(times)
    pub = PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(10,) * n,
        schedule_topic=("t",) * n,
    )
    subs = {f"s{j}": SubscriberParams(subscriptions=("t",)) for j in range(subscribers)}
    return T.star(
        broker=broker,
        publishers={"p": pub},
        subscribers=subs,
        link=LinkParams(latency_s=latency_s),
        protocol="none",
        hosts=hosts,
        placement=placement,
    )
