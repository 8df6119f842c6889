"""Publication sources: when publishers emit, how large, on which topic.

Each source draws from its own streams in blocks, so the publications it
returns do not depend on how a run is cut into chunks.
"""

from __future__ import annotations

import copy
import heapq
import math

import numpy as np

from ...sim.distributions import Exponential
from .core import _UNIFORM

__all__ = ["make_source"]


class _Source:
    """Shared size and topic drawing; subclasses produce times."""

    def __init__(self, params, topic_index, streams, name):
        self.params = params
        self.topic_index = np.asarray(topic_index, dtype=np.int64)
        self.sizes = streams.draws(params.size_bytes, name, "size")
        self.topic_u = streams.draws(_UNIFORM, name, "topic")
        w = np.ones(len(topic_index)) if params.topic_weights is None else np.asarray(params.topic_weights, float)
        self.cum_weights = np.cumsum(w) / w.sum()
        self.mean_rate_per_s = params.mean_rate_per_s
        self.schedule_times_s = None  # a finite schedule's publication times (ScheduleSource)
        self.size_ratio = 1.0 if params.serialization is None else params.serialization.size_ratio
        self.round_robin = params.topic_choice == "round_robin"
        self._dealt = 0

    def _marks(self, n):
        raw = self.sizes.take(n)
        sizes = np.maximum(np.rint(raw if self.size_ratio == 1.0 else raw * self.size_ratio), 0).astype(np.int64)
        if len(self.topic_index) == 1:
            return sizes, np.full(n, self.topic_index[0], dtype=np.int64)
        if self.round_robin:  # message k goes to topic k mod m, whatever the chunking
            pick = (self._dealt + np.arange(n)) % len(self.topic_index)
            self._dealt += n
            return sizes, self.topic_index[pick]
        pick = np.searchsorted(self.cum_weights, self.topic_u.take(n), side="right")
        return sizes, self.topic_index[np.minimum(pick, len(self.topic_index) - 1)]

    def emit_until(self, until_s):
        times = self._times_until(until_s)
        sizes, topics = self._marks(len(times))
        return times, sizes, topics


class PoissonSource(_Source):
    """Exponential gaps with mean 1/rate, from ``start_s``."""

    def __init__(self, params, topic_index, streams, name, block=4096):
        super().__init__(params, topic_index, streams, name)
        self.gaps = streams.draws(Exponential(mean_value=1.0 / params.rate_per_s), name, "arrivals")
        self.block = block
        self._future = np.empty(0)
        self._last = float(params.start_s)

    def _times_until(self, until_s):
        while len(self._future) == 0 or self._future[-1] < until_s:
            steps = np.concatenate([[self._last], self.gaps.take(self.block)])
            new = np.cumsum(steps)[1:]
            self._last = float(new[-1])
            self._future = np.concatenate([self._future, new])
        cut = int(np.searchsorted(self._future, until_s, side="left"))
        out, self._future = self._future[:cut], self._future[cut:]
        return out


class ConstantSource(_Source):
    """Period 1/rate; the first message at ``start_s`` plus a uniform phase in one period."""

    def __init__(self, params, topic_index, streams, name):
        super().__init__(params, topic_index, streams, name)
        phase = streams.generator(name, "phase").random()
        self.period = 1.0 / params.rate_per_s
        self.first = params.start_s + phase * self.period
        self.k = 0

    def _times_until(self, until_s):
        if until_s <= self.first:
            return np.empty(0)
        last = int(np.ceil((until_s - self.first) / self.period))
        ks = np.arange(self.k, last)
        times = self.first + ks * self.period
        times = times[times < until_s]
        self.k += len(times)
        return times


class ScheduleSource(_Source):
    """Explicit (time, size, topic) arrays."""

    def __init__(self, params, topic_index, streams, name):
        super().__init__(params, topic_index, streams, name)
        pos = {t: i for i, t in enumerate(params.topics)}
        self.times = np.asarray(params.schedule_time_s, dtype=float)
        self.size_arr = np.asarray(params.schedule_size_bytes, dtype=np.int64)
        if self.size_ratio != 1.0:
            self.size_arr = np.rint(self.size_arr * self.size_ratio).astype(np.int64)
        self.topic_arr = (
            self.topic_index[[pos[t] for t in params.schedule_topic]] if len(self.times) else np.empty(0, np.int64)
        )
        self.k = 0
        # no steady rate: the drivers size chunks from the count of scheduled times instead
        # (many messages at one instant made n / span huge and the chunks tiny; issue 12)
        self.mean_rate_per_s = 0.0
        self.schedule_times_s = self.times

    def emit_until(self, until_s):
        end = int(np.searchsorted(self.times, until_s, side="left"))
        sl = slice(self.k, max(end, self.k))
        self.k = max(end, self.k)
        return self.times[sl], self.size_arr[sl], self.topic_arr[sl]


class ClosedLoopSource(_Source):
    """Request/reply with a window of W outstanding requests (closed loop).

    Requests are numbered in the order the client sends them; every
    publication (a request or a resent copy) gets the network's next sequence
    number. The first W are released at ``start_s``; each reply (the first
    delivery of any copy of a request) frees one of the W slots and releases
    the next request ``think_time_s`` later. With replies in order (a FIFO
    path) this is exactly "request i is sent when the reply to request
    i - W came back". Releases due at the same time go out
    in the order of the replies' message ids, as the reference driver sees
    the replies.

    Without a timeout (``request_timeout_s`` 0) a request or reply that is
    dropped closes its window slot for good. With one, a request still
    unanswered ``request_timeout_s`` after a copy was sent is sent again, with
    its size (``resends`` counts them); a reply to a request already answered
    counts in ``late_replies``.

    The drivers must tell it every reply (:meth:`on_reply`) before asking for
    releases past the reply's time: the batch driver's conservative horizons
    (:class:`pubsim.sim.drivers.BatchDriver`) and the reference driver's event order
    guarantee it. A timeout at time T is decided when every reply up to T is
    known: the batch driver asks for releases only up to such a time; the
    reference driver says up to when it knows them (``known_s``), and the
    source stops at the first timeout after that (nothing later is sent
    before it, so both drivers number the publications alike) and tells the
    driver when to ask again (:meth:`next_wake`). A request counts as answered
    at a timeout if a reply to it came at or before the timeout (a reply at
    exactly the timeout's instant is a tie the two drivers may order
    differently; continuous delays make it improbable). Sequence numbers of
    copies lost for good stay remembered (for late replies), so a long lossy
    run with timeouts keeps one entry per lost copy.
    """

    closed_loop = True
    _TIMER = 2**62  # heap key of timeouts: after releases due at the same time

    def __init__(self, params, topic_index, streams, name):
        super().__init__(params, topic_index, streams, name)
        self.window = int(params.window_requests)
        self.think_s = float(params.think_time_s)
        self.timeout_s = float(params.request_timeout_s)
        self._due = [(float(params.start_s), -1, i) for i in range(self.window)]  # (time, reply msg, tie)
        heapq.heapify(self._due)
        self._sent = 0  # publications (sequence numbers) so far
        self._requests = 0  # distinct requests so far
        # sequence numbers sent and not replied to yet -> their request: at most W requests
        # in flight plus W lost for good without a timeout (each loss closes a slot)
        self._unanswered = {}
        self._open = {}  # request -> (size, topic) while unanswered (timeouts only)
        self._answered_at = {}  # request -> time of its first reply, until its last timer is decided
        self._sizes = {}  # request -> (size, topic) until its last timer is decided
        self._other = set()  # negative seq: retained copies of a request (msg < 0), seen once each
        self.resends = 0
        self.late_replies = 0

    def on_reply(self, seq, t, msg):
        """Replies to this client's requests ``seq`` at times ``t`` (message ids ``msg``).

        Only the first delivery of a request counts; later copies (fan-out,
        duplicates, replies to a resent copy of an answered request) are ignored
        or counted as late."""
        for q, tq, m in zip(seq.tolist(), t.tolist(), msg.tolist()):
            if q >= 0:
                if q not in self._unanswered:
                    continue
                r = self._unanswered.pop(q)
                if self.timeout_s > 0:
                    if r not in self._open:
                        self.late_replies += 1
                        continue
                    self._answered_at[r] = tq
                    del self._open[r]
            elif q in self._other:
                continue
            else:
                self._other.add(q)
            heapq.heappush(self._due, (tq + self.think_s, m, q))

    def compiled_spec(self):
        """What the compiled closed loop (:mod:`pubsim.sim.closed_kernel`) needs
        (window, think time, pending releases, sequence numbers, request marks),
        or None with a timeout (resends are not compiled)."""
        if self.timeout_s > 0 or getattr(self, "at_broker", None) is not None:
            return None
        return {
            "window": self.window,
            "think_s": self.think_s,
            "due": list(self._due),
            "sent": self._sent,
            "peek_marks": self._peek_marks,
            "take_marks": self._marks,
            "update": self._compiled_update,
        }

    def _peek_marks(self, n):
        """The sizes and topics of the next ``n`` requests, without drawing them."""
        saved = (copy.deepcopy(self.sizes), copy.deepcopy(self.topic_u), self._dealt)
        out = self._marks(n)
        self.sizes, self.topic_u, self._dealt = saved
        return out

    def _compiled_update(self, due, sent):
        """State after the compiled loop ran to the end: releases still pending
        (a heap), publications so far; every request was answered."""
        self._due = due
        self._sent = sent
        self._unanswered = {}

    def next_wake(self):
        """Time of the first timeout not decided yet (it waits for ``known_s``), or None."""
        if self.timeout_s <= 0 or not self._due or self._due[0][1] != self._TIMER:
            return None
        return self._due[0][0]

    def emit_until(self, until_s, known_s=math.inf):
        """Requests and resends before ``until_s``; timeouts are decided only up
        to ``known_s`` (every reply up to it is known)."""
        if self.timeout_s <= 0:
            times = []
            while self._due and self._due[0][0] < until_s:
                times.append(heapq.heappop(self._due)[0])
            self._unanswered.update((q, q) for q in range(self._sent, self._sent + len(times)))
            self._sent += len(times)
            times = np.asarray(times, dtype=float)
            sizes, topics = self._marks(len(times))
            return times, sizes, topics
        return self._emit_with_timeouts(until_s, known_s)

    def _emit_with_timeouts(self, until_s, known_s):
        times, sizes, topics = [], [], []
        while self._due and self._due[0][0] < until_s:
            t = self._due[0][0]
            if self._due[0][1] == self._TIMER and t > known_s:
                break  # undecided: nothing after it goes out before it
            entry = heapq.heappop(self._due)
            if entry[1] == self._TIMER:  # (time, TIMER, request)
                r = entry[2]
                if r not in self._open and self._answered_at[r] <= t:
                    del self._answered_at[r], self._sizes[r]
                    continue  # answered in time
                size, topic = self._sizes[r]  # unanswered, or answered after this timeout
                self.resends += 1
            else:  # a window slot releases a new request
                r = self._requests
                self._requests += 1
                size_arr, topic_arr = self._marks(1)
                size, topic = int(size_arr[0]), int(topic_arr[0])
                self._open[r] = (size, topic)
                self._sizes[r] = (size, topic)
            self._unanswered[self._sent] = r
            self._sent += 1
            heapq.heappush(self._due, (t + self.timeout_s, self._TIMER, r))
            times.append(t)
            sizes.append(size)
            topics.append(topic)
        return (
            np.asarray(times, dtype=float),
            np.asarray(sizes, dtype=np.int64),
            np.asarray(topics, dtype=np.int64),
        )


def make_source(params, topic_index, streams, name):
    """The source for ``params.arrival``."""
    kind = {
        "poisson": PoissonSource,
        "constant": ConstantSource,
        "schedule": ScheduleSource,
        "closed_loop": ClosedLoopSource,
    }[params.arrival]
    return kind(params, topic_index, streams, name)
