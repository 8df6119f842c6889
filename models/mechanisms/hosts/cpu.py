"""A host's CPU shared by every process placed on it (issue 13).

A host is *shared* when two or more processes on it spend CPU: brokers (an
ILDM node with its broker counts as a second process), publishers' encode
stages, ZeroMQ sockets, subscribers that take time (processing or decoding;
request/reply clients' replies too). Its CPU is then one station
``cpu:<host>``: a multi-server FIFO queue with ``c = min(cores, threads)``
servers (threads: each broker's and node's workers, one per encode stage,
socket and subscriber), and every CPU stage of those processes is a visit of
it. In routes the CPU visit comes just before the process's own
visit (:mod:`.plugin`), whose station is built with ``cpu_shared=True``: it
keeps its role (a broker's copies, per-client queues, disks; a subscriber's
delivery) and takes no time. The demand of a CPU visit is the process's own
(``demand_s`` of its station, with its own random streams). A broker with its
node is one visit whose demand is the node's plus the broker's: the node
hands the publication over on loopback and the broker runs it to completion.

Each process runs on at most its own threads (``workers`` of a broker, plus
its node's; one thread per encode stage or subscriber): when a process's
threads are fewer than the servers, the station's discipline is
:class:`.pool.CappedPoolDiscipline` (FIFO across processes, a process at its
thread limit skipped; event-driven), else the plain multi-server FIFO
(every process could use every server: the same queue, by arithmetic).

A ZeroMQ socket (:mod:`pubsim.models.mechanisms.brokerless.socket`) is one
process of one thread: its context's I/O thread (libzmq starts
``ZMQ_IO_THREADS_DFLT`` = 1 I/O thread per context, include/zmq.h and
src/ctx.cpp; each publisher process has its own context). The thread writes
what is queued in a pipe in one ``send()`` of up to ``out_batch_size`` = 8192
bytes (src/stream_engine_base.cpp ``out_event``, the default in
src/options.cpp; libzmq 6b708e4, 2026-07-20), so its stages are served in
batches (``fixed + sum of demands``, all departing at the batch's end) with
its own wake-up time, as the socket's own server does off a shared host
(:class:`pubsim.sim.disciplines.BatchDiscipline`); a host with a socket
always takes the event-driven pool. Simplification kept from the socket's
model: its whole demand (libzmq's ``send`` and per-pipe copy run on the
application thread, the encoding and the write on the I/O thread) is the
I/O thread's.

Why a shared multi-server FIFO and not processor sharing. Both are
work-conserving, so a host's throughput, utilization and saturation point are
the same under either; what differs is the waiting time of short jobs behind
long ones. FIFO keeps the batch driver's arithmetic (no event per
quantum, both drivers record for record), is what an event loop or a run
queue of non-preempted short jobs does (a broker's per-message work of
microseconds is far below the Linux scheduler's 3 ms time slice, so a runnable
thread normally finishes its message before another thread gets the core),
and has closed forms to test against (M/M/c, Pollaczek-Khinchine for a mix of
two processes' demands on one core). Processor sharing (idealised CFS) would
be the right model for long CPU bursts (milliseconds and up); it would need an
event-driven kernel per host.

Background load of the host's brokers (``background_cpu_fraction``, cores)
takes ``B`` of the ``c`` servers' capacity: every demand is stretched by
``1 / (1 - B / c)`` (processor sharing with a constant load, as for a lone
broker; needs ``B < c``).

Each process keeps its own waiting room: a broker's ingress queue limit
(``queue_messages`` + its threads; a node's for a broker with a node), no
limit for encode stages and subscribers. Not
modelled on a shared host (one-line errors, :mod:`.plugin`): a broker's CPU
quota, batching, restarts or priority scheduling; a subscriber's
``buffer_messages``. A subscriber served inside its downlink (QoS > 0, frame
channels) keeps its processing there; a request/reply server stage
(:mod:`pubsim.models.mechanisms.patterns.server`) keeps its own workers.

A request/reply client's round trip may visit its host's CPU twice (its
encode stage, then its reply; or a server on the clients' host): the route
graph then has a cycle through ``cpu:<host>``, which the batch driver's
closed-loop rounds advance by conservative rounds, each member up to its own
lookahead bound (:func:`pubsim.sim.closed_loop.closed_loop_bounds`); such a
loop is not the compiled closed loop's (:mod:`pubsim.sim.closed_kernel`).
"""

from __future__ import annotations

import numpy as np

from ....sim.disciplines import FifoDiscipline, Overflow
from ....sim.packets import Packets
from ...stations.core import ModelStation
from .pool import CappedPoolDiscipline

__all__ = ["HostCpuStation"]


class _Parts:
    """Demand parts of CPU stages: order key, process name index and demand, relay's (-1: none)."""

    def __init__(self, key, who, demand, relay_who, relay_demand):
        self.key, self.who, self.demand = key, who, demand
        self.relay_who, self.relay_demand = relay_who, relay_demand

    @classmethod
    def empty(cls):
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64), np.empty(0))

    def take(self, index):
        return _Parts(*(a[index] for a in self._arrays()))

    def _arrays(self):
        return self.key, self.who, self.demand, self.relay_who, self.relay_demand

    @staticmethod
    def merge(a, b):
        """``a`` and ``b`` in one array sorted by key."""
        both = _Parts(*(np.concatenate([x, y]) for x, y in zip(a._arrays(), b._arrays())))
        return both.take(np.argsort(both.key, kind="stable"))


class HostCpuStation(ModelStation):
    """A host's CPU: the CPU stage of every process of a shared host.

    Parameters
    ----------
    name : str
    processes : dict of int -> pubsim.sim.station.Station
        Station index -> process station (built with ``cpu_shared=True``; it has
        ``demand_s`` and ``min_demand_s``) whose visits this station's visits precede.
    relays : dict of int -> pubsim.sim.station.Station
        Broker station index -> its ILDM node's relay station: a visit before such a
        broker also charges the node's demand (the visit replaced the node's).
    servers : int
    caps : dict of int -> int
        Threads of each process (by its station index, as ``processes``).
    limits : dict of int -> int or None
        Ingress queue limit of each process (None = unlimited): its stages waiting
        at most (plus those in service on its threads).
    idle_extra_s : float
        Extra time of a message that finds a server idle (a broker's wake-up), s.
    background_cores : float
        Background load of the host's brokers, cores (< ``servers``).
    window : (float, float)
    idle : dict of int -> float, optional
        Processes (by station index) with a wake-up time of their own, s (a ZeroMQ
        socket's I/O thread), instead of ``idle_extra_s``.
    batches : dict of int -> (int, float, float), optional
        Processes that serve their stages in batches (a ZeroMQ socket's I/O
        thread): ``(max_messages, max_bytes, fixed_s)`` (:mod:`.pool`).
    """

    def __init__(
        self,
        name,
        processes,
        *,
        relays,
        servers,
        caps,
        limits,
        idle_extra_s,
        background_cores,
        window,
        idle=None,
        batches=None,
    ):
        self.stretch = 1.0 / (1.0 - background_cores / servers) if background_cores else 1.0
        self._cls = {s: k for k, s in enumerate(processes)}  # station index -> process class
        self._cls_of_station = np.full(max(processes) + 1, -1, dtype=np.int64)
        self._cls_of_station[list(self._cls)] = list(self._cls.values())
        idle, batches = idle or {}, batches or {}
        own = bool(idle or batches)  # a process with its own rule: the pool, whatever the caps
        if not own and (len(processes) == 1 or all(caps[s] >= servers and limits[s] is None for s in processes)):
            (queue,) = set(limits.values()) if len(processes) == 1 else (None,)
            room = None if queue is None else queue + servers
            disc = FifoDiscipline(
                servers=servers,
                capacity_messages=room,
                overflow=Overflow.DROP_NEWEST,
                idle_extra_s=idle_extra_s * self.stretch,
            )
        else:
            disc = CappedPoolDiscipline(
                servers=servers,
                caps=[caps[s] for s in processes],
                limits=[None if limits[s] is None else limits[s] + caps[s] for s in processes],
                idle_extra_s=idle_extra_s * self.stretch,
                idle=[idle[s] * self.stretch if s in idle else None for s in processes] if idle else None,
                batches=[_stretched(batches.get(s), self.stretch) for s in processes] if batches else None,
            )
        super().__init__(name, "host_cpu", disc, servers=servers, window=window)
        self.processes = dict(processes)
        self.relays = dict(relays)
        self.background_cores = float(background_cores)
        names = [st.name for st in self.processes.values()] + [st.name for st in self.relays.values()]
        self._names = names
        self._name_of_station = {s: i for i, s in enumerate(self.processes)}
        self._name_of_relay = {s: len(self.processes) + i for i, s in enumerate(self.relays)}
        self._demand_ticks = np.zeros(len(names))  # demand (s) of stages starting in the window, per name
        # Demand parts of the stages not yet settled (an event-driven pool holds some across
        # calls), sorted by order key: key, process name index and demand, relay's (-1: none).
        self._pending = _Parts.empty()

    @property
    def demand_in_window_s(self) -> dict[str, float]:
        """Demand (s) of the stages that start service in the window, per process station name."""
        return dict(zip(self._names, self._demand_ticks.tolist()))

    def shares(self) -> dict[str, float]:
        """Fraction of this station's busy time in the window each process's work takes
        (its demand of visits starting in the window over all of them)."""
        total = float(self._demand_ticks.sum())
        n = len(self._names)
        return {k: (v / total if total > 0 else 1.0 / n) for k, v in self.demand_in_window_s.items()}

    def service_s(self, packets):
        plan = self.plan
        n = len(packets)
        child = plan.child_idx[plan.child_ptr[packets.visit]]  # the process's own visit
        station = plan.station[child]
        parts = _Parts(
            packets.order_key(plan.n_visits), np.zeros(n, np.int64), np.zeros(n), np.full(n, -1), np.zeros(n)
        )
        for s in np.unique(station).tolist():
            m = station == s
            at = Packets(packets.t[m], packets.msg[m], child[m], packets.size[m], packets.pub_t[m])
            parts.who[m] = self._name_of_station[s]
            parts.demand[m] = self.processes[s].demand_s(at)
            relay = self.relays.get(s)
            if relay is not None:
                parts.relay_who[m] = self._name_of_relay[s]
                parts.relay_demand[m] = relay.service_s(packets.take(m))
        demand = parts.demand + parts.relay_demand
        if self.stretch != 1.0:
            demand *= self.stretch
        self._pending = _Parts.merge(self._pending, parts)
        return demand

    def priority(self, packets):
        """The process class of each packet (:class:`.pool.CappedPoolDiscipline`)."""
        plan = self.plan
        return self._cls_of_station[plan.station[plan.child_idx[plan.child_ptr[packets.visit]]]]

    def after_service(self, served):
        """Count each process's demand of the stages served (not dropped) that start in the
        window; forget the parts of every stage settled by this call."""
        n_visits = self.plan.n_visits
        pending = self._pending
        at = np.searchsorted(pending.key, served.packets.order_key(n_visits))
        inside = self.stats._in_window(served.start)
        if inside.any():
            i = at[inside]
            size = len(self._names)
            self._demand_ticks += np.bincount(pending.who[i], pending.demand[i], minlength=size) * self.stretch
            r = i[pending.relay_who[i] >= 0]
            if len(r):
                self._demand_ticks += (
                    np.bincount(pending.relay_who[r], pending.relay_demand[r], minlength=size) * self.stretch
                )
        self._count_extra()
        gone = np.concatenate([at, np.searchsorted(pending.key, served.dropped.order_key(n_visits))])
        if len(gone):
            keep = np.ones(len(pending.key), dtype=bool)
            keep[gone] = False
            self._pending = pending.take(keep)
        return super().after_service(served)

    def _count_extra(self):
        """Add the batches' fixed and wake-up times of processes with their own rule
        (starting in the window) to those processes' demand."""
        log = getattr(self.discipline, "extra_log", None)
        if not log:
            return
        start, cls, extra = (np.array(c) for c in zip(*log))
        log.clear()
        inside = self.stats._in_window(start)
        self._demand_ticks += np.bincount(cls[inside], extra[inside], minlength=len(self._names))

    @property
    def lookahead_s(self):
        least = []
        for s, proc in self.processes.items():
            relay = self.relays.get(s)
            least.append(proc.min_demand_s + (0.0 if relay is None else relay.lookahead_s))
        return min(least) * self.stretch


def _stretched(batch, stretch):
    """A batch rule with its fixed time stretched by the background load (None stays None)."""
    if batch is None:
        return None
    max_messages, max_bytes, fixed_s = batch
    return max_messages, max_bytes, fixed_s * stretch
