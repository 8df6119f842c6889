"""Push/pull: one-way commands dealt round robin over workers, optional acks.

A ZeroMQ PUSH socket deals consecutive messages to its connected PULL peers
in turn, each message to exactly one worker (SYSTEMS.md §1-2). Here every
pusher publishes with ``topic_choice="round_robin"`` over one topic per
puller (``push/<puller>``), and each puller subscribes to its own topic: the
dealing is arithmetic at the source (message k of a pusher goes to puller
k mod n), the rest is the ordinary engine.

Acknowledgements (one-way command with an ack back, SYSTEMS.md §2) are
computed from the delivery records: an ack leaves the worker when it has
handled the message and returns over the worker's link, the broker and the
pusher's link. :func:`ack_times` adds this return delay to each delivery,
with each link's propagation latency, mean jitter and transmission of
``ack_bytes + overhead_bytes`` and the broker's ``ack_cost_s``. The return
path is taken as **uncontended** (an assumption: acks are small and use the
links' otherwise idle reverse directions; their queueing behind data at a
shared broker is not modelled).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ....sim.errors import ConfigError
from ... import topology as T

__all__ = ["push_pull", "ack_times", "ack_delay_s", "TOPIC_PREFIX"]

TOPIC_PREFIX = "push"


def push_pull(*, broker, link, pushers, pullers, protocol="zmq"):
    """A star where every pusher deals its messages round robin over all pullers.

    Parameters
    ----------
    broker : BrokerParams
        The hub (for brokerless ZeroMQ, the ``zeromq-pubsub-placeholder``
        preset stands for the sender's I/O thread).
    link : LinkParams or dict
    pushers : dict of name -> PublisherParams
        Their ``topics`` are replaced by the pullers' topics.
    pullers : dict of name -> SubscriberParams
        Their ``subscriptions`` are replaced by their own topic.
    """
    if not pullers:
        raise ConfigError("pullers", pullers, "at least one PULL worker")
    topics = tuple(f"{TOPIC_PREFIX}/{name}" for name in pullers)
    pubs = {
        n: dataclasses.replace(p, topics=topics, topic_choice="round_robin", topic_weights=None)
        for n, p in pushers.items()
    }
    subs = {n: dataclasses.replace(s, subscriptions=(f"{TOPIC_PREFIX}/{n}",)) for n, s in pullers.items()}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link, protocol=protocol)


def _one_way_s(link, ack_bytes):
    return link.latency_s + link.jitter_s.mean + (ack_bytes + link.overhead_bytes) / link.bandwidth_Bps


def ack_delay_s(g, pusher, puller, ack):
    """Uncontended return time of an ack from ``puller`` to ``pusher``, s."""
    hub_p, hub_s = T.home_broker(g, pusher), T.home_broker(g, puller)
    if hub_p != hub_s:
        raise ConfigError("push_pull", f"{pusher}@{hub_p}, {puller}@{hub_s}", "pusher and puller on one broker")
    return (
        _one_way_s(g.edges[puller, hub_s][T.PARAMS], ack.ack_bytes)
        + ack.ack_cost_s
        + _one_way_s(g.edges[pusher, hub_p][T.PARAMS], ack.ack_bytes)
    )


def ack_times(deliveries, g, ack):
    """Deliveries with ``ack_time_s`` and ``ack_latency_s`` (publish to ack received), s.

    ``deliveries``: the frame of :meth:`pubsim.run.Result.deliveries`.
    """
    out = deliveries.copy()
    pairs = out[["publisher", "subscriber"]].drop_duplicates().itertuples(index=False)
    delay = {(p, s): ack_delay_s(g, p, s, ack) for p, s in pairs}
    back = np.array([delay[k] for k in zip(out["publisher"], out["subscriber"])], dtype=float)
    out["ack_time_s"] = out["delivery_time_s"].to_numpy() + back
    out["ack_latency_s"] = out["ack_time_s"] - out["publish_time_s"]
    return out
