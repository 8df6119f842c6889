"""Subscriber sessions: connection intervals (churn) and clean sessions.

A subscriber with a connection schedule (``SubscriberParams.online_s``, a
tuple of ``(connect_s, disconnect_s)`` intervals) or a churn process
(``churn_online_mean_s`` / ``churn_offline_mean_s``: alternating
exponential online and offline periods from the subscriber's own seeded
stream, starting online at 0) is online during ``[connect, disconnect)``.
A copy reaching its downlink (the broker's queue for that client) at time
``t``:

* online: handled as usual;
* offline, ``clean_session`` True, or hop QoS 0 (MQTT 3.1.1 §3.1.2.4: only
  QoS 1 and 2 messages are stored for a disconnected client; Mosquitto's
  ``queue_qos0_messages`` is off by default): not owed. It is recorded as a
  drop with cause ``offline_not_owed`` and excluded from the deliveries owed,
  so loss rates count only what the subscriber was entitled to;
* offline, persistent session (``clean_session`` False) and QoS > 0: held
  at the broker and offered to the client queue at the next connect time
  (the queue limit ``client_queue_messages`` applies then); with no later
  connect it is not owed either (the session outlives the run).

Retained messages (``PublisherParams.retain``): the broker keeps the last
retained message per topic; at every connect after time 0 the subscriber
(re)subscribes and gets the last retained message of each topic it
matches, published before the connect, as a copy sent at the connect time
through its downlink. These copies are counted apart
(``retained_deliveries``; ``retained`` column of the deliveries), not as
egress, not as owed. The broker's store is updated when a copy leaves the
broker, which is when it reaches this downlink, so the downlink keeps the
store; a connect is settled when the first copy at or after it arrives
(arrivals come in time order), so a connect with no later traffic on the
downlink gets no retained copy. Persistent sessions get them too
(assumption: clients subscribe again on every connect).

The filter is arithmetic on the interval arrays (``numpy.searchsorted``),
monotone in time, so arrival order is kept. Assumption: copies already
admitted to the client queue when the client disconnects are still
delivered (a disconnect is not modelled mid-transmission).
"""

from __future__ import annotations

import math

import numpy as np

from ....sim import kernels as K
from ....sim.distributions import Exponential
from ....sim.packets import Packets
from ...params.client import check_intervals

__all__ = ["Sessions", "sessions_for"]


class Sessions:
    """Connection intervals of one subscriber and what happens to copies while it is offline.

    Parameters
    ----------
    params : models.params.client.SubscriberParams
    streams : sim.rng.StreamFactory
    name : str
        Subscriber name (its churn stream).
    """

    def __init__(self, params, streams, name):
        self.clean = bool(params.clean_session)
        self.churn = params.churn_online_mean_s > 0
        if self.churn:
            self.on = streams.draws(Exponential(mean_value=params.churn_online_mean_s), name, "churn-online")
            self.off = streams.draws(Exponential(mean_value=params.churn_offline_mean_s), name, "churn-offline")
            self.connect, self.disconnect = np.zeros(1), self.on.take(1)
        else:
            self.connect, self.disconnect = check_intervals(params.online_s)
        self.flow_retain = None  # per flow: publisher retains (from the wiring, see wire)
        self.store = {}  # topic -> (msg, visit, size, pub_t) of the last retained copy
        self.next_connect = 0  # index of the first connect not yet settled

    def _extend(self, t_max):
        """Churn: draw further periods until the schedule covers ``t_max``."""
        while self.churn and self.disconnect[-1] <= t_max:
            k = 64
            off, on = self.off.take(k), self.on.take(k)
            starts = self.disconnect[-1] + np.cumsum(off + np.concatenate([[0.0], on[:-1]]))
            self.connect = np.concatenate([self.connect, starts])
            self.disconnect = np.concatenate([self.disconnect, starts + on])

    def settle(self, t, qos):
        """Per copy at time ``t`` with hop QoS ``qos``: new time (held copies move to the next
        connect) and a mask of copies not owed."""
        if len(t) == 0:
            return t, np.zeros(0, bool)
        self._extend(float(t.max()))
        k = np.searchsorted(self.connect, t, side="right") - 1
        online = (k >= 0) & (t < self.disconnect[np.maximum(k, 0)])
        nxt = np.where(k + 1 < len(self.connect), self.connect[np.minimum(k + 1, len(self.connect) - 1)], math.inf)
        held = ~online & (not self.clean) & (qos > 0) & np.isfinite(nxt)
        not_owed = ~online & ~held
        return np.where(held, nxt, t), not_owed

    def wire(self, wiring):
        """Take the per-flow retain flags (None when no publisher retains); called by
        its downlink's :meth:`~pubsim.models.stations.core.LinkStation.wire`."""
        self.flow_retain = wiring.flow_retain

    def before_service(self, station, packets, qos):
        """The ``before_service`` hook of the downlink ``station`` this session sits on
        (:func:`settle_before_service`)."""
        return settle_before_service(station, packets, qos)

    def online_fraction(self, t0, t1):
        """Fraction of [t0, t1) online (for checks)."""
        self._extend(t1)
        length = np.clip(np.minimum(self.disconnect, t1) - np.maximum(self.connect, t0), 0, None)
        return float(length.sum() / (t1 - t0))


def sessions_for(params, streams, name):
    """A :class:`Sessions` if the subscriber has a schedule or churn, else None."""
    if params.online_s or params.churn_online_mean_s > 0:
        return Sessions(params, streams, name)
    return None


def _retained_copies(session, packets, plan):
    """Retained copies for the connects settled by this batch: ``(positions, Packets)``.

    A copy for connect ``c`` goes before the first packet arriving at or after ``c``;
    its ``msg`` is ``-(msg + 1)`` (a retained copy, see :mod:`pubsim.sim.records`).
    """
    if session.flow_retain is None or len(packets) == 0:
        return np.empty(0, np.int64), None
    flow = plan.flow[packets.visit]
    retain = np.flatnonzero(session.flow_retain[flow])
    topic = plan.flow_topic[flow]
    pos, rows, done = [], [], 0
    while session.next_connect < len(session.connect):
        c = session.connect[session.next_connect]
        if c > packets.t[-1]:
            break
        cut = int(np.searchsorted(packets.t, c, side="left"))
        for i in retain[(retain >= done) & (retain < cut)]:
            session.store[int(topic[i])] = (
                -int(packets.msg[i]) - 1,
                int(packets.visit[i]),
                int(packets.size[i]),
                float(packets.pub_t[i]),
            )
        done = cut
        if c > 0:
            for key in sorted(session.store):
                m, v, size, pub_t = session.store[key]
                rows.append((c, m, v, size, pub_t))
                pos.append(cut)
        session.next_connect += 1
    for i in retain[retain >= done]:
        session.store[int(topic[i])] = (
            -int(packets.msg[i]) - 1,
            int(packets.visit[i]),
            int(packets.size[i]),
            float(packets.pub_t[i]),
        )
    if not rows:
        return np.empty(0, np.int64), None
    t, m, v, size, pub_t = zip(*rows)
    return np.asarray(pos, np.int64), Packets(t, m, v, size, pub_t)


def settle_before_service(station, packets, qos):
    """The ``before_service`` hook of a downlink with a session."""
    t, not_owed = station.session.settle(packets.t, qos)
    pos, extra = _retained_copies(station.session, packets, station.plan)
    if extra is None and not not_owed.any() and np.array_equal(t, packets.t):
        return packets, None
    gone = packets.take(not_owed)
    keep = ~not_owed
    kept = packets.take(keep).with_time(t[keep])
    if extra is not None:
        key = np.concatenate([np.flatnonzero(keep) * 2 + 1, pos * 2])
        order = np.argsort(key, kind="stable")
        kept = Packets.concat([kept, extra]).take(order)
    early = None if len(gone) == 0 else (gone, gone.t, np.full(len(gone), K.NOT_OWED, dtype=np.int64))
    return kept, early
