"""Publication sources: when publishers emit, how large, on which topic.

Each source draws from its own streams in blocks, so the publications it
returns do not depend on how a run is cut into chunks.
"""

from __future__ import annotations

import heapq

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

    def emit_until(self, until_s):
        end = int(np.searchsorted(self.times, until_s, side="left"))
        sl = slice(self.k, max(end, self.k))
        self.k = max(end, self.k)
        return self.times[sl], self.size_arr[sl], self.topic_arr[sl]


class ClosedLoopSource(_Source):
    """Request/reply with a window of W outstanding requests (closed loop).

    Requests are numbered in the order the client sends them (the network's
    sequence numbers). The first W are released at ``start_s``; each reply
    (the first delivery of a request) frees one of the W slots and releases
    the next request ``think_time_s`` later. With replies in order (a FIFO
    path) this is exactly "request i is sent when the reply to request
    i - W came back". Releases due at the same time go out
    in the order of the replies' message ids, as the reference driver sees
    the replies. A request or reply that is dropped closes its window slot
    for good (no client timeout is modelled).

    The drivers must tell it every reply (:meth:`on_reply`) before asking for
    releases past the reply's time: the batch driver's conservative horizons
    (:class:`pubsim.sim.drivers.BatchDriver`) and the reference driver's event order
    guarantee it.
    """

    closed_loop = True

    def __init__(self, params, topic_index, streams, name):
        super().__init__(params, topic_index, streams, name)
        self.window = int(params.window_requests)
        self.think_s = float(params.think_time_s)
        self._due = [(float(params.start_s), -1, i) for i in range(self.window)]  # (time, reply msg, tie)
        heapq.heapify(self._due)
        self._sent = 0
        # requests sent and not replied to yet: at most W in flight plus at most W
        # lost for good (each loss closes a slot), so bounded by 2 W
        self._unanswered = set()
        self._other = set()  # negative seq: retained copies of a request (msg < 0), seen once each

    def on_reply(self, seq, t, msg):
        """Replies to this client's requests ``seq`` at times ``t`` (message ids ``msg``).

        Only the first delivery of a request counts; later copies (fan-out,
        duplicates) are ignored."""
        for q, tq, m in zip(seq.tolist(), t.tolist(), msg.tolist()):
            if q >= 0:
                if q not in self._unanswered:
                    continue
                self._unanswered.discard(q)
            elif q in self._other:
                continue
            else:
                self._other.add(q)
            heapq.heappush(self._due, (tq + self.think_s, m, q))

    def emit_until(self, until_s):
        times = []
        while self._due and self._due[0][0] < until_s:
            times.append(heapq.heappop(self._due)[0])
        self._unanswered.update(range(self._sent, self._sent + len(times)))
        self._sent += len(times)
        times = np.asarray(times, dtype=float)
        sizes, topics = self._marks(len(times))
        return times, sizes, topics


def make_source(params, topic_index, streams, name):
    """The source for ``params.arrival``."""
    kind = {
        "poisson": PoissonSource,
        "constant": ConstantSource,
        "schedule": ScheduleSource,
        "closed_loop": ClosedLoopSource,
    }[params.arrival]
    return kind(params, topic_index, streams, name)
