"""Priority channels and per-subscriber queue policies (YAMI4, AMQP, Qpid).

A connection's outgoing queue is a link's transmit queue (:class:`pubsim.models.stations.core.LinkStation`):

* a publisher's uplink is the publisher's channel (its own ``LinkParams``);
* the broker-to-subscriber link is the broker's per-subscriber queue: its
  limit is the tighter of the link's ``queue_messages`` and the broker's
  ``client_queue_messages``; it is a priority queue when either the link's
  ``scheduling`` or the broker's ``client_scheduling`` is ``priority``; its
  overflow policy is the broker's ``client_overflow`` unless that is the
  default ``drop_newest``, in which case the link's ``overflow`` applies;
  the broker's ``max_priority`` (AMQP x-max-priority) caps priorities and
  its ``flow_to_disk_cost_s`` prices messages spilled to disk.

A message's priority is its flow's (publisher, topic): the publisher's
``topic_priorities`` entry for the topic, else its ``priority``.
"""

from __future__ import annotations

from ....sim.disciplines import Overflow

__all__ = ["flow_priorities", "downlink_queue"]


def flow_priorities(publisher_params, topic_names, flows):
    """Priority of each flow.

    Parameters
    ----------
    publisher_params : list of models.params.client.PublisherParams
        By publisher index.
    topic_names : list of str
        By topic index.
    flows : list of (publisher index, topic index, root Hop)
    """
    return [publisher_params[p].flow_priority(topic_names[t]) for p, t, _ in flows]


def downlink_queue(link, broker):
    """Keyword arguments of the broker-to-subscriber :class:`LinkStation`'s queue.

    Parameters
    ----------
    link : models.params.link.LinkParams
    broker : models.params.broker.BrokerParams

    Which queue policies combine is checked before, by
    :func:`pubsim.models.assembly.features.check_features`.
    """
    priority = "priority" in (link.scheduling, broker.client_scheduling)
    overflow = broker.client_overflow if broker.client_overflow != Overflow.DROP_NEWEST else link.overflow
    return {
        "queue_messages": _tighter(link.queue_messages, broker.client_queue_messages),
        "queue_bytes": _tighter(link.queue_bytes, broker.client_queue_bytes),
        "scheduling": "priority" if priority else "fifo",
        "overflow": overflow,
        "max_priority": broker.max_priority,
        "disk_cost_s": broker.flow_to_disk_cost_s,
    }


def _tighter(a, b):
    vals = [v for v in (a, b) if v is not None]
    return min(vals) if vals else None
