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

The filter is arithmetic on the interval arrays (``numpy.searchsorted``),
monotone in time, so arrival order is kept. Assumption: copies already
admitted to the client queue when the client disconnects are still
delivered (a disconnect is not modelled mid-transmission).
"""
from __future__ import annotations

import math

import numpy as np

from sim import kernels as K
from sim.distributions import Exponential
from sim.errors import ConfigError

__all__ = ["Sessions", "check_intervals", "sessions_for"]


def check_intervals(online_s):
    """``online_s`` as two float arrays (connect, disconnect), checked."""
    try:
        pairs = np.asarray(online_s, dtype=float).reshape(-1, 2)
    except (TypeError, ValueError):
        raise ConfigError("online_s", online_s, "a list of [connect_s, disconnect_s] pairs") from None
    c, d = pairs[:, 0], pairs[:, 1]
    if np.any(~np.isfinite(c)) or np.any(c < 0) or np.any(d <= c) or np.any(c[1:] < d[:-1]):
        raise ConfigError("online_s", online_s, "ordered, non-overlapping [connect_s, disconnect_s) with connect < disconnect")
    return c.copy(), d.copy()


class Sessions:
    """Connection intervals of one subscriber and what happens to copies while it is offline.

    Parameters
    ----------
    params : models.client.SubscriberParams
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


def settle_before_service(station, packets, qos):
    """The ``before_service`` hook of a downlink with a session."""
    t, not_owed = station.session.settle(packets.t, qos)
    if not not_owed.any() and np.array_equal(t, packets.t):
        return packets, None
    gone = packets.take(not_owed)
    kept = packets.take(~not_owed).with_time(t[~not_owed])
    return kept, (gone, gone.t, np.full(len(gone), K.NOT_OWED, dtype=np.int64))
