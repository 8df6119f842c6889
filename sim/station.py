"""Runtime stations: a discipline plus small hook methods.

A :class:`Station` owns a discipline (:mod:`pubsim.sim.disciplines`) and defines, by
overriding hooks, how long a message needs (:meth:`Station.service_s`), how
much buffer it takes (:meth:`Station.buffer_bytes`) and what happens after
service (:meth:`Station.after_service`, e.g. a link's propagation delay).
Models in :mod:`pubsim.models.stations.core` subclass it; the drivers only call
:meth:`Station.process`. The station talks to its discipline only through the
:class:`pubsim.sim.disciplines.Discipline` protocol.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import kernels as K
from . import station_pass as SP
from .disciplines import Discipline, Served
from .packets import Packets
from .routing import RoutePlan

__all__ = ["Station", "StationOutput", "StationStats"]


@dataclass
class StationOutput:
    """Packets that left a station (``t`` = time they reach the next place)
    and packets dropped there (with time and cause code)."""

    departed: Packets
    dropped: Packets
    drop_t: np.ndarray
    drop_code: np.ndarray


class StationStats:
    """Streaming counters and time integrals of a station over a window.

    Integrals are exact to a tick (2^-32 s) per message: each message adds
    the part of its waiting, blocking and service intervals that falls in
    [w0, w1]. ``wakeups`` counts messages that found a server idle (started
    service the moment they were admitted): an event loop's wake-ups.
    """

    def __init__(self, window: tuple[float, float], servers: int) -> None:
        self.w0, self.w1 = window
        self.servers = servers
        self.arrivals = 0
        self.ingress_arrivals = 0
        self.served = 0
        self.wakeups = 0
        self.drops: dict[int, int] = {}
        self.busy_ticks = 0
        self.waiting_ticks = 0
        self.blocked_ticks = 0

    def _in_window(self, t: np.ndarray) -> np.ndarray:
        return (t >= self.w0) & (t < self.w1)

    def add(
        self,
        arrivals: np.ndarray,
        ingress_mask: np.ndarray,
        served: Served | _NoServed,
        dropped_t: np.ndarray,
        dropped_code: np.ndarray,
    ) -> None:
        """Count a call's arrivals, services and drops (the parts in the window)."""
        n, n_ingress = K.window_counts(arrivals, ingress_mask, self.w0, self.w1)
        self.arrivals += n
        self.ingress_arrivals += n_ingress
        end = served.depart if served.service_end is None else served.service_end  # batch: own share
        started, wakeups, busy, waiting, blocked = K.service_window_stats(
            served.packets.t, served.admit, served.start, end, self.w0, self.w1
        )
        self.served += started
        self.wakeups += wakeups
        self.busy_ticks += busy  # each interval rounded to ticks (K.service_window_stats):
        self.waiting_ticks += waiting  # totals do not depend on batching, so both
        self.blocked_ticks += blocked  # drivers get bit-identical statistics
        if len(dropped_code):
            codes, counts = np.unique(dropped_code[self._in_window(dropped_t)], return_counts=True)
            for c, n in zip(codes.tolist(), counts.tolist()):
                self.drops[c] = self.drops.get(c, 0) + n

    def add_pass(self, tally: list[int], queue_code: int) -> None:
        """Count a call of :func:`pubsim.sim.station_pass.fifo_station_pass` from
        its ``tally``: the same sums as :meth:`add` plus a link's losses
        (``queue_code``: the cause of its queue drops)."""
        self.arrivals += tally[SP.T_ARRIVALS]
        self.ingress_arrivals += tally[SP.T_INGRESS]
        self.served += tally[SP.T_STARTED]
        self.wakeups += tally[SP.T_WAKEUPS]
        self.busy_ticks += tally[SP.T_BUSY]
        self.waiting_ticks += tally[SP.T_WAITING]
        if tally[SP.T_QUEUE_DROPS_IN]:
            self.drops[queue_code] = self.drops.get(queue_code, 0) + tally[SP.T_QUEUE_DROPS_IN]
        if tally[SP.T_LOST]:
            self.drops[K.DROP_LOSS] = self.drops.get(K.DROP_LOSS, 0) + tally[SP.T_LOST_IN]

    def record(self) -> dict[str, Any]:
        """Figures over the window: utilization, mean queue, drops by cause."""
        # integrals are summed in integer ticks of 2^-32 s (0.23 ns)
        span = max(self.w1 - self.w0, 1e-300) * K.TICKS_PER_S
        row = {
            "arrivals": self.arrivals,
            "served": self.served,
            "wakeups": self.wakeups,
            "utilization": self.busy_ticks / (self.servers * span),
            "mean_waiting": self.waiting_ticks / span,
            "mean_in_service": self.busy_ticks / span,
            "mean_blocked": self.blocked_ticks / span,
        }
        for code, name in K.CAUSE_NAMES.items():
            row[f"drops_{name}"] = self.drops.get(code, 0)
        return row


class _NoServed:
    """An empty service outcome (for counting drops made before service)."""

    start = depart = admit = np.empty(0)
    service_end: np.ndarray | None = None
    packets = Packets.empty()


_NO_SERVED = _NoServed()


class Station:
    """Base runtime station.

    Parameters
    ----------
    name : str
        Unique name shown in outputs.
    role : str
        What it models (``"link"``, ``"broker"``, ``"subscriber"``, ...).
    discipline : Discipline
        Any :class:`pubsim.sim.disciplines.Discipline`.
    servers : int
        Number of servers, for utilization.
    window : (float, float)
        Measurement window, s.
    """

    def __init__(
        self,
        name: str,
        role: str,
        discipline: Discipline,
        *,
        servers: int = 1,
        window: tuple[float, float] = (0.0, np.inf),
    ) -> None:
        self.name = name
        self.role = role
        self.discipline = discipline
        self.stats = StationStats(window, servers)
        self.index = -1
        self._plan: RoutePlan | None = None

    @property
    def plan(self) -> RoutePlan:
        """The route plan (set by :meth:`bind`)."""
        if self._plan is None:
            raise RuntimeError(f"station {self.name!r} is not bound to a network yet")
        return self._plan

    # --- hooks -----------------------------------------------------------
    def bind(self, index: int, plan: RoutePlan) -> None:
        """Called once by the network with this station's index and the route plan."""
        self.index = index
        self._plan = plan

    def service_s(self, packets: Packets) -> np.ndarray:
        """Service time of each packet, s (drawn in arrival order)."""
        raise NotImplementedError

    def buffer_bytes(self, packets: Packets) -> np.ndarray:
        """Bytes each packet occupies in the buffer."""
        return packets.size.astype(np.float64)

    def priority(self, packets: Packets) -> np.ndarray | None:
        """Priority of each packet (asked only if the discipline ``uses_priority``); None = all equal."""
        return None

    def before_service(self, packets: Packets) -> tuple[Packets, tuple[Packets, np.ndarray, np.ndarray] | None]:
        """Packets that go on to service, and those settled before it.

        Returns ``(packets, None)`` or ``(packets, (dropped, drop_t, drop_code))``;
        the kept packets may get later times (held), in the same order.
        """
        return packets, None

    def overflow_key(self, packets: Packets) -> np.ndarray:
        """Key of each packet for the ``update`` overflow policy (asked only if
        the discipline ``uses_key``): its flow (publisher, topic); a newer
        message replaces a waiting one of the same key."""
        return self.plan.flow[packets.visit]

    def before_run(self, packets: Packets, service_s: np.ndarray, size_bytes: np.ndarray) -> None:
        """Called by :meth:`process` just before the discipline serves ``packets``
        (after :meth:`service_s`, :meth:`buffer_bytes` and, if asked, :meth:`priority`
        and :meth:`overflow_key`). A station whose discipline needs per-message
        inputs beyond :meth:`Discipline.run`'s arguments hands them over here,
        through a method of its discipline (e.g. ``WindowDiscipline.set_inputs``
        in :mod:`pubsim.models.qos_link`). Nothing by default."""

    def after_service(self, served: Served) -> tuple[np.ndarray, np.ndarray]:
        """Time each served packet reaches the next place, and its code."""
        return served.depart, np.zeros(len(served.depart), dtype=np.int64)

    def propagation(self) -> SP.Propagation | None:
        """What :meth:`after_service` does, for the fused pass
        (:mod:`pubsim.sim.station_pass`), or None: it is not one of the
        forms the pass knows (the plain path runs). Here: the packet leaves at
        its departure, unless a subclass changed :meth:`after_service`."""
        return SP.NO_PROPAGATION if type(self).after_service is Station.after_service else None

    def pure_service_s(self, packets: Packets) -> np.ndarray:
        """:meth:`service_s` when :meth:`buffer_bytes` will not be asked (the fused pass)."""
        return self.service_s(packets)

    @property
    def lookahead_s(self) -> float:
        """Lower bound of (time at next place - arrival), s."""
        return 0.0

    def compiled_spec(self) -> dict[str, Any] | None:
        """What the compiled closed loop (:mod:`pubsim.sim.closed_kernel`) needs to
        run this station in its own event loop, or None (the default: it cannot)."""
        return None

    # --- driver interface ------------------------------------------------
    fused_pass = False
    """May :meth:`process` serve a batch in one compiled pass
    (:mod:`pubsim.sim.station_pass`) when the station qualifies? The batch
    driver sets it; the reference driver keeps the plain path."""

    def process(self, packets: Packets, horizon: float) -> StationOutput:
        """Serve an arrival-ordered batch; advance event-driven state to ``horizon``."""
        packets, early = self.before_service(packets)
        out = self._serve(packets, horizon)
        if early is None:
            return out
        self.stats.add(np.empty(0), np.empty(0, bool), _NO_SERVED, early[1], early[2])
        return StationOutput(
            out.departed,
            Packets.concat([early[0], out.dropped]),
            np.concatenate([early[1], out.drop_t]),
            np.concatenate([early[2], out.drop_code]),
        )

    def _fused_propagation(self) -> SP.Propagation | None:
        """The propagation of the fused pass, or None: the plain path runs."""
        if not self.fused_pass or type(self).before_run is not Station.before_run:
            return None
        return self.propagation() if SP.fusable_discipline(self.discipline) else None

    def _serve_fused(self, packets: Packets, prop: SP.Propagation) -> StationOutput:
        """:meth:`_serve` in one compiled pass (the same outcome and statistics)."""
        disc = self.discipline
        service = self.pure_service_s(packets)
        plan = self.plan
        ingress = plan.ingress if plan.ingress[plan.station == self.index].any() else plan.ingress[:0]
        out_t, code, tally = SP.run_pass(disc, packets, service, ingress, (self.stats.w0, self.stats.w1), prop)
        queue_code = K.DROP_REJECTED if getattr(disc, "reject", False) else K.DROP_FULL
        self.stats.add_pass(tally, queue_code)
        if tally[SP.T_QUEUE_DROPS] == 0 and tally[SP.T_LOST] == 0:
            return StationOutput(packets.with_time(out_t), Packets.empty(), np.empty(0), np.empty(0, dtype=np.int64))
        n_dropped = tally[SP.T_QUEUE_DROPS] + tally[SP.T_LOST]
        sent, dropped, drop_t, drop_code = SP.split_outcome(packets, out_t, code, n_dropped)
        if queue_code != K.DROP_FULL:
            drop_code[drop_code == K.DROP_FULL] = queue_code
        return StationOutput(sent, dropped, drop_t, drop_code)

    def _serve(self, packets: Packets, horizon: float) -> StationOutput:
        prop = self._fused_propagation()
        if prop is not None:
            return self._serve_fused(packets, prop)
        disc = self.discipline
        service = self.service_s(packets)
        size = self.buffer_bytes(packets)
        priority = self.priority(packets) if disc.uses_priority else None
        key = self.overflow_key(packets) if disc.uses_key else None
        self.before_run(packets, service, size)
        served = disc.run(packets, service, size, horizon, priority, key)
        ingress = self.plan.ingress[packets.visit]
        self.stats.add(packets.t, ingress, served, served.drop_t, served.drop_code)
        arrive, code = self.after_service(served)
        ok = code == K.OK
        if ok.all():  # no copy of the packets (most stations lose nothing after service)
            return StationOutput(served.packets.with_time(arrive), served.dropped, served.drop_t, served.drop_code)
        departed = served.packets.take(ok).with_time(arrive[ok])
        lost = ~ok
        dropped = Packets.concat([served.dropped, served.packets.take(lost)])
        drop_t = np.concatenate([served.drop_t, served.depart[lost]])
        drop_code = np.concatenate([served.drop_code, code[lost]])
        self.stats.drops[K.DROP_LOSS] = self.stats.drops.get(K.DROP_LOSS, 0) + int(
            self.stats._in_window(served.depart[lost]).sum()
        )
        return StationOutput(departed, dropped, drop_t, drop_code)

    def next_wake(self) -> float | None:
        """Time the station needs attention with no arrival (event-driven only)."""
        return self.discipline.next_wake()

    def record(self) -> dict[str, Any]:
        """The station's figures over the window (:meth:`StationStats.record`)."""
        return self.stats.record()

    # --- rollback (optimistic cycles, :mod:`pubsim.sim.optimistic`) -------
    rollback_safe = True
    """Can :meth:`snapshot` / :meth:`restore` roll the station back? True when
    every mutable object it holds (discipline, draw streams, statistics) is its
    own; a subclass holding state shared with other stations sets it False,
    and a cycle containing it is advanced by conservative rounds."""

    def snapshot(self) -> dict[str, Any]:
        """Copy of the station's whole state (discipline, draw positions,
        statistics); the route plan is shared, not copied."""
        return copy.deepcopy(self.__dict__, _shared(self.__dict__))

    def restore(self, state: dict[str, Any]) -> None:
        """Return to a :meth:`snapshot` (which stays usable for another restore)."""
        self.__dict__.update(copy.deepcopy(state, _shared(state)))


def _shared(state: dict[str, Any]) -> dict[int, Any]:
    """A deepcopy memo that keeps the route plan and frozen dataclasses
    (parameters, distributions) shared: they never change during a run."""
    memo: dict[int, Any] = {}
    for v in state.values():
        params = getattr(v, "__dataclass_params__", None)  # a dataclass instance or class
        if isinstance(v, RoutePlan) or (params is not None and params.frozen and not isinstance(v, type)):
            memo[id(v)] = v
    return memo
