"""The broker station of a broker with I/O cycles."""

from __future__ import annotations

import math

import numpy as np

from ....sim import kernels as K
from ....sim.station import StationStats
from ...stations.buffers import SentWhenAdmitted, flow_control_kwargs
from ...stations.core import BrokerStation, _background_stretch, _quota, _wakeup_s
from .discipline import CycleDiscipline
from .passes import PassDiscipline

__all__ = ["CycleBrokerStation", "CycleStats", "FlowControlPassStation", "arrival_connection"]


class CycleStats(StationStats):
    """Station statistics plus the cycles opened in the window (``cycles``:
    for Mosquitto's passes, what perf counts as ``epoll_wait`` calls)."""

    def __init__(self, window, servers):
        super().__init__(window, servers)
        self.cycles = 0

    def record(self):
        return {**super().record(), "cycles": self.cycles}


class CycleBrokerStation(BrokerStation):
    """A :class:`BrokerStation` whose worker runs I/O cycles (``params.io``).

    Demand per message as the plain broker's; a message that opens a cycle
    opens a cycle whose last member is followed by ``io.cycle_cost_s + io.flush_cost_s x copies`` of work (stretched by the
    background load like every cost). Parameters as :class:`BrokerStation`.
    """

    def __init__(self, name, params, *, filters, streams, window, connections=0):
        super().__init__(name, params, filters=filters, streams=streams, window=window, connections=connections)
        self.discipline = self._discipline(params, connections)
        self.stats = CycleStats(window, 1)

    def _discipline(self, params, connections, **extra):
        """Cycles, or passes with a per-connection limit; ``extra``: more discipline arguments."""
        most, per_connection = params.io.cycle_max_messages, params.io.cycle_max_per_connection
        common = {
            "idle_extra_s": _wakeup_s(params, connections) * _background_stretch(params),
            "max_members": math.inf if most is None else float(most),
            **self._byte_limit(params.io),
            "idle_exit": None if params.idle_exit is None else params.idle_exit.curve,
            "sleep_entry_s": params.sleep_entry_s,
            **_quota(params),
            **extra,
        }
        if per_connection is None:
            return CycleDiscipline(**common)
        return PassDiscipline(max_per_connection=float(per_connection), **common)

    @staticmethod
    def _byte_limit(io):
        """The cycles' byte limit (discipline arguments; none for passes, which read whole packets)."""
        if io.cycle_max_bytes is None:
            return {}
        return {"max_bytes": float(io.cycle_max_bytes), "overhead_bytes": float(io.message_overhead_bytes)}

    def after_service(self, served):
        """Count the cycles opened in the window (by start), then as the broker."""
        self.stats.cycles += int(self.stats._in_window(self.discipline.opened_starts).sum())
        return super().after_service(served)

    def record(self):
        """The station's figures; ``wakeups`` are the wake-ups charged (by start in the window), as
        the FIFO kernel counts them (:func:`pubsim.sim.kernels.count_woke`), not the messages that
        started the moment they arrived: with an idle-exit curve a wake-up starts later, and within
        the sleep entry a message that finds the server free starts at once without waking it."""
        return {**super().record(), "wakeups": int(self.discipline.fs[K.WOKE_N])}

    def before_run(self, packets, service_s, size_bytes):
        """Hand the discipline each message's cycle cost, s, and, if it needs them, connections."""
        copies = (self.plan.n_children if self.copies_by_visit is None else self.copies_by_visit)[packets.visit]
        cost = self.params.io.cost_s(np.asarray(copies, dtype=np.float64)) * self.stretch
        self.discipline.set_cycle_cost(cost)
        if self.discipline.per_connection:
            self.discipline.set_connections(arrival_connection(self.plan, packets.visit))


class FlowControlPassStation(SentWhenAdmitted, CycleBrokerStation):
    """A :class:`CycleBrokerStation` with passes (``io.cycle_max_per_connection``) behind its
    publishers' bounded socket buffers (``params.overload``), as
    :class:`~pubsim.models.mechanisms.overload.FlowControlBrokerStation` is for the FIFO worker:
    the station holds at most ``publishers x socket_buffer_bytes`` (payload plus
    ``message_overhead_bytes`` per message), those waiting for a pass included; a message that
    does not fit is held by its sender until departures make room and is sent then
    (:mod:`.pass_kernel`, Socket buffers); flow control as there.

    Parameters as :class:`CycleBrokerStation`, plus ``publishers``: the publisher connections
    whose buffers are pooled (at least one buffer is kept).
    """

    def __init__(self, name, params, *, filters, streams, window, connections=0, publishers=1):
        ov = params.overload
        self.overhead_bytes = float(ov.message_overhead_bytes)
        self._capacity_bytes = ov.buffer_bytes(publishers)
        super().__init__(name, params, filters=filters, streams=streams, window=window, connections=connections)
        flow = flow_control_kwargs(ov, publishers)
        if flow is not None:
            self.discipline.flow_control(**flow)

    def _discipline(self, params, connections, **extra):
        return super()._discipline(params, connections, capacity_bytes=self._capacity_bytes, **extra)


def arrival_connection(plan, visits):
    """Connection each visit's message arrives on, as an integer >= 0: its
    publisher's for a message a client published (an ingress visit), else
    the station it came from (an upstream broker's link), numbered after the
    publishers."""
    visits = np.asarray(visits, dtype=np.int64)
    publisher = plan.flow_publisher[plan.flow[visits]]
    parent = plan.parent[visits]
    upstream = plan.station[np.maximum(parent, 0)]
    first = int(plan.flow_publisher.max()) + 1 if plan.flow_publisher.size else 0
    return np.where(plan.ingress[visits] | (parent < 0), publisher, first + upstream)
