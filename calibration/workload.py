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

__all__ = [
    "topic_name",
    "topic_assignment",
    "idle_filter_names",
    "idle_filters_of",
    "installed_filters",
    "qos_of",
    "IDLE_TOPIC",
]

IDLE_TOPIC = "pubsim/idle"


def topic_name(k):
    return f"pubsim/t{k}"


def idle_filter_names(n):
    """The ``n`` installed subscriptions nobody publishes to (a run's ``idle_filters``):
    ``pubsim/i0``, ``pubsim/i1``, ...; siblings of the published ``pubsim/t<k>``, one level
    down from the same root, as the idle devices' topics of an IoT deployment."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ConfigError("idle_filters", n, "an integer >= 0")
    return [f"pubsim/i{k}" for k in range(n)]


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


def _count_of(row, key):
    """A run's integer setting ``key`` (0 where the column is missing, None or NaN)."""
    n = row.get(key, 0) if hasattr(row, "get") else 0
    return 0 if n is None or n != n else int(n)


def idle_filters_of(row):
    """A run's idle subscriptions (its ``idle_filters``; 0 where the column is missing or NaN)."""
    return _count_of(row, "idle_filters")


def qos_of(row):
    """A run's MQTT QoS (its ``qos``; 0 where the column is missing or NaN)."""
    return _count_of(row, "qos")


def installed_filters(row):
    """Subscriptions installed at the broker in a run (a mapping or a table row): one per subscriber and
    topic filter of :func:`topic_assignment`, an idle subscriber's placeholder included, plus its
    ``idle_filters``; as the simulated broker's subscription table counts them."""
    _, subs = topic_assignment(
        publishers=int(row["publishers"]),
        subscribers=int(row["subscribers"]),
        topics=int(row["topics"]),
        fanout=int(row["fanout"]),
    )
    return sum(len(s) for s in subs) + idle_filters_of(row)
