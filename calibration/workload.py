"""The workload shape shared by the load generator and its simulated twin.

Topic ``k`` (0-based) is named ``pubsim/t{k}``. Every publisher cycles over
all topics, message by message (the simulated twin draws topics uniformly:
the same share per topic). Topic ``k`` is subscribed by the ``fanout``
subscribers ``(k * fanout + m) mod subscribers`` for ``m`` in
``0 .. fanout - 1``, so each topic has exactly ``fanout`` subscribers and the
subscriptions spread evenly. A subscriber left without a topic subscribes to
``pubsim/idle``, which nobody publishes.
"""

from __future__ import annotations

from ..sim.errors import ConfigError

__all__ = ["topic_name", "topic_assignment", "IDLE_TOPIC"]

IDLE_TOPIC = "pubsim/idle"


def topic_name(k):
    return f"pubsim/t{k}"


def topic_assignment(*, publishers, subscribers, topics, fanout):
    """Topics of each publisher and topic filters of each subscriber.

    Returns
    -------
    (list of list of str, list of list of str)
        ``pub_topics[i]`` and ``sub_filters[j]``.
    """
    for name, value in (
        ("publishers", publishers),
        ("subscribers", subscribers),
        ("topics", topics),
        ("fanout", fanout),
    ):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(name, value, "an integer >= 1")
    if fanout > subscribers:
        raise ConfigError("fanout", fanout, f"at most subscribers ({subscribers})")
    names = [topic_name(k) for k in range(topics)]
    subs = [[] for _ in range(subscribers)]
    for k, name in enumerate(names):
        for m in range(fanout):
            j = (k * fanout + m) % subscribers
            if name not in subs[j]:
                subs[j].append(name)
    subs = [s or [IDLE_TOPIC] for s in subs]
    return [list(names) for _ in range(publishers)], subs
