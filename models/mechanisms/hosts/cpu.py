"""A host's CPU shared by a broker and its ILDM interworking node (SYSTEMS.md §3:
a broker and its node on one server; the node's work takes CPU from the broker).

Model (a shared multi-server FIFO): the host's CPU is one station with
``min(cores, relay workers + broker workers)`` servers. A publication entering
the pair passes the node and then its broker with no queue between them (the
node hands it over on loopback and the broker's event loop runs it to
completion), so the two CPU stages of one visit are served as ONE visit whose
demand is the sum: the node's (relay + forwarded copies) plus the broker's
(ingress, matching, copies). The broker station stays in the route (its
per-client queues and copies are unchanged) but takes no time.

Why this model: it is work-conserving, so for a one-core host the host's
throughput, utilization and saturation point are exact (every message needs
the sum of both demands of the one core), and it keeps FIFO arithmetic: the
batch driver stays fast and no route leaves the host's CPU and comes back to
it at zero delay (which would make a zero-lookahead cycle). Processor sharing
between runnable threads (idealised CFS) would need an event-driven kernel
per host.

Approximate: with several cores, each message's two stages run on one server
back to back (the real node and broker threads could overlap two messages'
stages differently, and each process is capped at its own thread count only
through the total servers); the order of the two stages within a message is
not modelled (the node's forwarded copies leave when the broker's work is
done too). Limits: one broker with a node per host; no CPU quota, batching,
restarts or priority scheduling at such a broker (refused by
:func:`pubsim.models.topology.validate`); the broker's ingress queue limit is
replaced by the node's.
"""

from __future__ import annotations

import numpy as np

from ....sim.disciplines import FifoDiscipline, Overflow
from ....sim.packets import Packets
from ...stations.core import ModelStation

__all__ = ["SharedCpuStation"]


class SharedCpuStation(ModelStation):
    """A host's CPU running a relay visit and its broker visit as one.

    Parameters
    ----------
    name : str
    relay, broker : pubsim.sim.station.Station
        The node's :class:`~pubsim.models.mechanisms.ildm.relay.RelayStation` and its
        broker's :class:`~pubsim.models.stations.core.BrokerStation` (built with
        ``cpu_shared=True``); their demand functions are called here, with their
        own random streams.
    servers : int
    window : (float, float)
    """

    def __init__(self, name, relay, broker, *, servers, window):
        rp, bp = relay.params, broker.params
        cap = None if rp.queue_messages is None else rp.queue_messages + servers
        disc = FifoDiscipline(
            servers=servers,
            capacity_messages=cap,
            overflow=Overflow.DROP_NEWEST,
            idle_extra_s=bp.idle_wakeup_cost_s * broker.stretch,
        )
        super().__init__(name, "host_cpu", disc, servers=servers, window=window)
        self.relay = relay
        self.broker = broker
        self.node_demand_in_window_s = 0.0  # the node's demand of messages starting service in the window
        self._batch = (np.empty(0, dtype=np.int64), np.empty(0))  # (sorted keys, node demand) of the last batch

    @property
    def relay_share(self) -> float:
        """Fraction of this station's busy time in the window that is the node's work
        (its demand of visits arriving in the window; the rest, wake-ups included, is
        the broker's)."""
        busy_s = self.stats.record()["mean_in_service"] * (self.stats.w1 - self.stats.w0)
        return min(1.0, self.node_demand_in_window_s / busy_s) if busy_s > 0 else 0.0

    def service_s(self, packets):
        plan = self.plan
        first_child = plan.child_idx[plan.child_ptr[packets.visit]]  # the broker visit (ildm.relay)
        at_broker = Packets(packets.t, packets.msg, first_child, packets.size, packets.pub_t)
        node, broker = self.relay.service_s(packets), self.broker.demand_s(at_broker)
        keys = packets.order_key(plan.n_visits)
        order = np.argsort(keys)
        self._batch = (keys[order], node[order])
        return node + broker

    def after_service(self, served):
        """Count the node's demand of the messages served (not dropped) that start in the window."""
        keys, node = self._batch
        inside = self.stats._in_window(served.start)
        if inside.any():
            at = np.searchsorted(keys, served.packets.order_key(self.plan.n_visits)[inside])
            self.node_demand_in_window_s += float(node[at].sum())
        return super().after_service(served)

    @property
    def lookahead_s(self):
        return self.relay.lookahead_s + self.broker.params.ingress_cost_s.min_value
