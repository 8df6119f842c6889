"""Publisher outages and Will messages (MQTT 3.1.1 §3.1.2.5).

A publisher with ``offline_s`` intervals ``((disconnect_s, reconnect_s),
...)`` is down during each ``[disconnect, reconnect)``: it publishes nothing
then (its source's publications in the interval are not emitted; the
offered load falls accordingly). Each disconnect is unexpected (no
DISCONNECT packet): if the publisher has a ``will_topic``, the broker
publishes its Will message (``will_size_bytes``) on that topic
``will_delay_s`` after the disconnect (the time the broker needs to notice:
0 when the TCP connection is reset, up to 1.5 x keep-alive otherwise,
MQTT 3.1.1 §3.1.2.10). The Will enters the network at the broker, not on the
dead uplink, and is then routed like any publication on its topic (it is
published, owed and delivered like one; filter ``topic`` in the records to
see Will deliveries).
"""

from __future__ import annotations

import numpy as np

from ...params.client import check_intervals

__all__ = ["OutageSource", "wrap_source"]


class OutageSource:
    """A publication source with outages and Will messages.

    ``at_broker`` is a mask over the last :meth:`emit_until` result: True for
    Will messages, which start at the broker (see :meth:`pubsim.sim.network.Network.publications`).
    """

    def __init__(self, inner, params, will_topic_index):
        self.inner = inner
        self.mean_rate_per_s = inner.mean_rate_per_s
        self.schedule_times_s = getattr(inner, "schedule_times_s", None)
        self.down, self.up = check_intervals(params.offline_s)
        self.will_topic = will_topic_index
        self.will_size = int(round(params.will_size_bytes))
        self.will_t = self.down + params.will_delay_s if will_topic_index >= 0 else np.empty(0)
        self.k = 0
        self.at_broker = np.zeros(0, dtype=bool)

    def emit_until(self, until_s):
        t, s, top = self.inner.emit_until(until_s)
        j = np.searchsorted(self.down, t, side="right") - 1
        keep = ~((j >= 0) & (t < self.up[np.maximum(j, 0)]))
        t, s, top = t[keep], s[keep], top[keep]
        end = max(int(np.searchsorted(self.will_t, until_s, side="left")), self.k)
        wt = self.will_t[self.k : end]
        self.k = end
        times = np.concatenate([t, wt])
        order = np.argsort(times, kind="stable")  # a Will after a publication at the same instant
        self.at_broker = np.concatenate([np.zeros(len(t), bool), np.ones(len(wt), bool)])[order]
        sizes = np.concatenate([s, np.full(len(wt), self.will_size, dtype=np.int64)])[order]
        topics = np.concatenate([top, np.full(len(wt), self.will_topic, dtype=np.int64)])[order]
        return times[order], sizes, topics


def wrap_source(source, params, topics):
    """``source`` with outages and Will messages if ``params`` has any; ``topics``: all topic names."""
    if not params.offline_s:
        return source
    will = topics.index(params.will_topic) if params.will_topic else -1
    return OutageSource(source, params, will)
