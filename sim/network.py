"""A compiled network: stations, route plan and publication sources.

:class:`Network` is what the drivers run. It is built from a topology by
:func:`pubsim.models.assembly.build.build_network`; nothing here knows about brokers or
links, only about stations, visits and sources.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .packets import Packets
from .routing import RoutePlan
from .station import Station

__all__ = ["Network"]


class Network:
    """Runtime network.

    Parameters
    ----------
    stations : list of sim.station.Station
    plan : sim.routing.RoutePlan
    sources : list
        One per publisher, in publisher-index order; each has
        ``emit_until(t_s) -> (times_s, sizes_bytes, topic_indices)`` returning
        the not yet emitted publications before ``t_s`` in time order, a
        ``mean_rate_per_s`` attribute (steady rate, msg/s) and optionally a
        ``schedule_times_s`` array (a finite schedule; its steady rate is 0).
    names : dict
        ``{"publisher": [...], "subscriber": [...], "topic": [...]}``.
    sp_ratio : float
        sum_i P(t_i) S(t_i) / sum_i P(t_i) (SYSTEMS.md §4).
    window : (float, float)
        Measurement window, s.
    parameters : list of dict, callable or None
        The parameter table of the components (for the records), or a
        function that makes it: it is then made the first time it is read
        (a trace's schedules make long rows that a twin run never reads).
    control : object or None
        Model data for accounting, opaque here: the ILDM control plane that
        routed the copies (``pubsim.models.mechanisms.ildm.traffic`` reads it).
    confirm_delay_s : numpy.ndarray or None
        Per visit: NaN, or the time a departure from this visit takes to reach
        its closed-loop source as its reply (a confirm), s. A flow with such a
        visit is answered by its departures there, not by its deliveries
        (producer confirms, ``pubsim.models.mechanisms.persistence.sending``).
    """

    def __init__(
        self,
        stations: Sequence[Station],
        plan: RoutePlan,
        sources: Sequence[Any],
        *,
        names: dict[str, list[str]],
        sp_ratio: float,
        window: tuple[float, float],
        parameters: list[Any] | Callable[[], list[Any]] | None = None,
        control: Any = None,
        confirm_delay_s: np.ndarray | None = None,
    ) -> None:
        self.stations = list(stations)
        self.plan = plan
        self.sources = list(sources)
        self.names = names
        self.sp_ratio = float(sp_ratio)
        self.window = window
        self._parameters = parameters if parameters is not None else []
        self.control = control
        for i, st in enumerate(self.stations):
            st.bind(i, plan)
        n_pub = len(self.sources)
        n_topic = len(names["topic"])
        self._flow_of = np.full((max(n_pub, 1), max(n_topic, 1)), -1, dtype=np.int64)
        self._flow_of[plan.flow_publisher, plan.flow_topic] = np.arange(len(plan.flow_root))
        self._seq = np.zeros(n_pub, dtype=np.int64)
        # closed-loop sources (request/reply): told of their replies by the drivers
        self.closed_loop = np.array([getattr(s, "closed_loop", False) for s in self.sources], dtype=bool)
        self.has_closed_loop = bool(self.closed_loop.any())
        # confirms: replies issued where a visit departs (NaN elsewhere), flows answered so
        self.confirm_delay_s = None
        self.confirm_flow = np.zeros(len(plan.flow_root), dtype=bool)
        if confirm_delay_s is not None and np.isfinite(confirm_delay_s).any():
            self.confirm_delay_s = np.asarray(confirm_delay_s, dtype=np.float64)
            self.confirm_flow[plan.flow[np.isfinite(self.confirm_delay_s)]] = True

    @property
    def parameters(self) -> list[Any]:
        """The parameter table of the components (made on first use when given as a function)."""
        if callable(self._parameters):
            self._parameters = self._parameters()
        return self._parameters

    def on_delivered(self, packets: Packets) -> None:
        """Tell closed-loop sources about deliveries (replies) of their messages."""
        if len(packets) == 0:
            return
        if self.confirm_delay_s is not None:  # confirmed flows are answered at their confirm visits
            packets = packets.take(~self.confirm_flow[self.plan.flow[packets.visit]])
        self._reply(packets.msg, packets.t)

    def on_departed(self, packets: Packets) -> None:
        """Tell closed-loop sources about confirms: departures at confirm visits,
        answered at the departure time plus the visit's return delay."""
        if self.confirm_delay_s is None or len(packets) == 0:
            return
        delay = self.confirm_delay_s[packets.visit]
        hit = np.isfinite(delay)
        if hit.any():
            self._reply(packets.msg[hit], packets.t[hit] + delay[hit])

    def _reply(self, msg: np.ndarray, t: np.ndarray) -> None:
        if len(msg) == 0:
            return
        n_pub = len(self.sources)
        pub = msg % n_pub
        for p in np.unique(pub[self.closed_loop[pub]]).tolist():
            mine = pub == p
            self.sources[p].on_reply(msg[mine] // n_pub, t[mine], msg[mine])

    @property
    def mean_publish_rate_per_s(self) -> float:
        return float(sum(s.mean_rate_per_s for s in self.sources))

    def scheduled_before(self, until_s: float) -> int:
        """Publications of finite schedules (``schedule_times_s``) before ``until_s``."""
        times = [t for s in self.sources for t in [getattr(s, "schedule_times_s", None)] if t is not None]
        return int(sum(np.searchsorted(t, until_s, side="left") for t in times))

    def publications(self, until_s: float, known_s: float = math.inf) -> Packets:
        """All publications before ``until_s`` not yet returned, as packets at
        their route roots. Message ids are ``seq * n_publishers + publisher``,
        so they do not depend on how time is cut into chunks. ``known_s``:
        every delivery up to this time is known (closed-loop sources decide
        their timeouts only up to it; see :meth:`next_source_wake`)."""
        return Packets.concat(self.publication_parts(until_s, known_s))

    def next_source_wake(self) -> float | None:
        """Earliest time a closed-loop source waits for to decide a timeout, or None."""
        wakes = [w for s in self.sources if getattr(s, "closed_loop", False) for w in [s.next_wake()] if w is not None]
        return min(wakes) if wakes else None

    def publication_parts(self, until_s: float, known_s: float = math.inf) -> list[Packets]:
        """:meth:`publications` as one non-empty part per publisher (in publisher order)."""
        n_pub = len(self.sources)
        parts = []
        for p, src in enumerate(self.sources):
            closed = getattr(src, "closed_loop", False)
            times, sizes, topics = src.emit_until(until_s, known_s) if closed else src.emit_until(until_s)
            if len(times) == 0:
                continue
            flows = self._flow_of[p, topics]
            if np.any(flows < 0):
                bad = self.names["topic"][int(topics[flows < 0][0])]
                raise RuntimeError(f"publisher {self.names['publisher'][p]} has no route for topic {bad}")
            seq = self._seq[p] + np.arange(len(times))
            self._seq[p] += len(times)
            visit = self.plan.flow_root[flows]
            at_broker = getattr(
                src, "at_broker", None
            )  # Will messages start at the broker (models.mechanisms.sessions.will)
            if at_broker is not None and at_broker.any():
                visit = np.where(at_broker, self.plan.child_idx[self.plan.child_ptr[visit]], visit)
            parts.append(Packets(times, seq * n_pub + p, visit, sizes, times))
        return parts

    def delivery_frame_columns(self, packets: Packets) -> dict[str, np.ndarray]:
        """Columns describing delivered or dropped packets, names resolved."""
        plan = self.plan
        flow = plan.flow[packets.visit]
        return {
            "msg": packets.msg,
            "publisher": plan.flow_publisher[flow],
            "topic": plan.flow_topic[flow],
            "size_bytes": packets.size,
            "hops": plan.hops[packets.visit],
            "publish_time_s": packets.pub_t,
        }
