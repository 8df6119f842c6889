"""Runtime stations built from the parameter objects.

Each class overrides the hooks of :class:`pubsim.sim.station.Station`; the queueing
itself (FIFO arithmetic or event-driven) is the discipline's business.
"""

from __future__ import annotations

import numpy as np

from ...sim import kernels as K
from ...sim.disciplines import BatchDiscipline, FifoDiscipline, Overflow, QueueDiscipline
from ...sim.distributions import Constant
from ...sim.restart import RestartQueueDiscipline
from ...sim.station import Station
from ...sim.station_pass import Propagation
from ..params.broker import filter_load
from ..protocol import mqtt_length_bytes, needs_topic, wire_bytes
from .wiring import Wiring

__all__ = ["ModelStation", "LinkStation", "BrokerStation", "SubscriberStation", "EncodeStation", "make_discipline"]


def make_discipline(
    *,
    servers,
    capacity_messages,
    capacity_bytes,
    overflow,
    idle_extra_s=0.0,
    priority=False,
    disk_cost_s=0.0,
    batch=None,
    restart=None,
    idle_exit=None,
    sleep_entry_s=0.0,
    **quota,
):
    """FIFO arithmetic unless priorities or the overflow policy
    (``Overflow.EVENT_DRIVEN``) need an event-driven queue.

    ``quota``: ``cpu_quota_s`` and ``cpu_period_s`` (FIFO arithmetic only);
    ``idle_exit``: the idle-exit curve ``(idle_s, exit_s)`` of the servers
    and ``sleep_entry_s`` their sleep entry, s (FIFO arithmetic only;
    :mod:`pubsim.models.params.features` refuses the others);
    ``disk_cost_s``: extra service of a message spilled by ``flow_to_disk``, s.
    ``batch``: keyword arguments of :class:`BatchDiscipline` (batching with
    more than one message per batch), or None. ``restart``: keyword
    arguments of :class:`pubsim.sim.restart.RestartQueueDiscipline`, or None.
    """
    if restart is not None:
        return RestartQueueDiscipline(
            servers=servers,
            capacity_messages=capacity_messages,
            capacity_bytes=capacity_bytes,
            overflow=overflow,
            idle_extra_s=idle_extra_s,
            disk_cost_s=disk_cost_s,
            **restart,
        )
    if batch is not None and batch["batch_max_messages"] > 1:
        return BatchDiscipline(
            capacity_messages=capacity_messages,
            capacity_bytes=capacity_bytes,
            overflow=overflow,
            idle_extra_s=idle_extra_s,
            **batch,
        )
    if priority or overflow in Overflow.EVENT_DRIVEN:
        return QueueDiscipline(
            servers=servers,
            capacity_messages=capacity_messages,
            capacity_bytes=capacity_bytes,
            overflow=overflow,
            idle_extra_s=idle_extra_s,
            disk_cost_s=disk_cost_s,
        )
    return FifoDiscipline(
        servers=servers,
        capacity_messages=capacity_messages,
        capacity_bytes=capacity_bytes,
        overflow=overflow,
        idle_extra_s=idle_extra_s,
        idle_exit=idle_exit,
        sleep_entry_s=sleep_entry_s,
        **quota,
    )


class ModelStation(Station):
    """A station of the model layer: takes its per-visit collaborators in one bind step.

    :func:`pubsim.models.assembly.build.build_network` calls :meth:`wire` once per
    station, after the route plan is known and before the network binds the
    stations (:meth:`pubsim.sim.station.Station.bind`).
    """

    def wire(self, index: int, wiring: Wiring) -> None:
        """Take what this station needs from ``wiring`` (nothing by default).

        Parameters
        ----------
        index : int
            This station's index in the network.
        wiring : Wiring
        """

    def _wire_durable(self, index: int, wiring: Wiring) -> None:
        """A restarting queue learns which visits survive a restart."""
        durable = wiring.durable_visit.get(index)
        if durable is not None:
            self.discipline.set_durable(durable)


class LinkStation(ModelStation):
    """Transmitter (FIFO or priority channel) then propagation with jitter and loss.

    Parameters
    ----------
    name : str
    params : models.params.link.LinkParams
    protocol : str
        Framing protocol (see :mod:`pubsim.models.protocol`).
    topic_bytes : numpy.ndarray
        Topic length in bytes per flow.
    streams : sim.rng.StreamFactory
    window : (float, float)
    queue_messages, queue_bytes : int or None
        Effective transmit-queue limits (link's own, or the broker's
        per-client queue on a broker-to-subscriber link).
    scheduling, overflow : str
        Transmit queue order (``fifo``/``priority``) and overflow policy
        (default: the link's own).
    max_priority : int or None
        Priorities above it count as it (AMQP ``x-max-priority``).
    disk_cost_s : float
        Extra time of a message spilled by ``flow_to_disk``, s.
    session : models.mechanisms.sessions.sessions.Sessions or None
        Connection intervals of the subscriber at the end of a downlink; it
        settles each copy before service (``before_service(station, packets, qos)``).
    restart : dict or None
        Restart settings of the transmit queue (a restarting broker's
        per-client queue, :class:`pubsim.sim.restart.RestartQueueDiscipline`).
    """

    def __init__(
        self,
        name,
        params,
        *,
        protocol,
        topic_bytes,
        streams,
        window,
        queue_messages=None,
        queue_bytes=None,
        scheduling=None,
        overflow=None,
        max_priority=None,
        disk_cost_s=0.0,
        session=None,
        restart=None,
    ):
        self.scheduling = params.scheduling if scheduling is None else scheduling
        self.max_priority = max_priority
        overflow = params.overflow if overflow is None else overflow
        disc = make_discipline(
            servers=1,
            capacity_messages=queue_messages,
            capacity_bytes=queue_bytes,
            overflow=overflow,
            priority=self.scheduling == "priority",
            disk_cost_s=disk_cost_s,
            restart=restart,
        )
        super().__init__(name, "link", disc, window=window)
        self.params = params
        self.protocol = protocol
        self.topic_bytes = topic_bytes
        self.session = session
        self.jitter = streams.draws(params.jitter_s, name, "jitter")
        self.loss = streams.draws(_UNIFORM, name, "loss")
        self._last = np.zeros(1)
        self._wire = None

    def wire(self, index, wiring):
        """Topic bytes per flow (framing); the session's and restart queue's per-visit arrays."""
        self.topic_bytes = wiring.flow_topic_bytes
        if self.session is not None:
            self.session.wire(wiring)
        self._wire_durable(index, wiring)

    def hop_qos(self, packets):
        """QoS of each packet on this link (0 on plain links)."""
        return np.zeros(len(packets), dtype=np.int64)

    def before_service(self, packets):
        if self.session is None:
            return packets, None
        return self.session.before_service(self, packets, self.hop_qos(packets))

    def wire_bytes(self, packets):
        topic = self.topic_bytes[self.plan.flow[packets.visit]] if needs_topic(self.protocol) else None
        return wire_bytes(self.protocol, packets.size, topic, self.params.overhead_bytes)

    def service_s(self, packets):
        wire = self.wire_bytes(packets)
        self._wire = (packets, wire)  # buffer_bytes of the same packets comes next (Station._serve)
        return wire / self.params.bandwidth_Bps

    def buffer_bytes(self, packets):
        cached, self._wire = self._wire, None
        wire = cached[1] if cached is not None and cached[0] is packets else self.wire_bytes(packets)
        return wire.astype(np.float64)

    def priority(self, packets):
        if self.scheduling != "priority":
            return None
        return _capped(self.plan.flow_priority[self.plan.flow[packets.visit]], self.max_priority)

    def after_service(self, served):
        n = len(served.depart)
        jitter = self.jitter.dist
        if jitter.is_constant:  # the same sums as adding the constant draws, one array fewer
            delay = np.full(n, self.params.latency_s + jitter.mean)
        else:
            delay = self.params.latency_s + self.jitter.take(n)
        p = self.params.loss_probability
        lost = self.loss.take(n) < p if p > 0.0 else np.zeros(n, dtype=bool)  # no draw can fall below 0
        code = np.zeros(n, dtype=np.int64)
        arrive = np.empty(n)
        latency, idle = float(self.params.latency_s), self.params.idle_receiver
        K.propagate(self._last, served.depart, code, delay, lost, arrive, latency, idle)
        return arrive, code

    def propagation(self):
        """:meth:`after_service` for the fused pass (:mod:`pubsim.sim.station_pass`):
        latency plus jitter, loss, delivery order kept; None if a subclass changed it."""
        if type(self).after_service is not LinkStation.after_service:
            return None
        jitter = self.jitter.dist
        p = self.params.loss_probability
        return Propagation(
            ordered=True,
            latency_s=self.params.latency_s,
            constant_delay_s=self.params.latency_s + jitter.mean if jitter.is_constant else 0.0,
            jitter=None if jitter.is_constant else self.jitter,
            loss=self.loss if p > 0.0 else None,
            loss_probability=p,
            last=self._last,
            idle_receiver=self.params.idle_receiver,
        )

    @property
    def lookahead_s(self):
        p = self.params
        jitter = 0.0 if p.idle_receiver else p.jitter_s.min_value  # a message read with the one before pays none
        return p.latency_s + jitter + p.overhead_bytes / p.bandwidth_Bps

    def compiled_spec(self):
        """A plain lossless link with one FIFO transmitter and no queue limit
        (:mod:`pubsim.sim.closed_kernel`): its service per packet, latency,
        jitter stream and propagation order; None for anything else."""
        if type(self) is not LinkStation or self.session is not None or self.params.loss_probability > 0:
            return None
        if not _open_fifo(self.discipline):
            return None
        return {
            "kind": "link",
            "discipline": self.discipline,
            "idle_extra_s": float(self.discipline.fs[K.IDLE_EXTRA]),
            "latency_s": float(self.params.latency_s),
            "jitter": self.jitter,
            "idle_receiver": self.params.idle_receiver,
            "last": self._last,
            "service": self.pure_service_s,
        }

    def pure_service_s(self, packets):
        """:meth:`service_s` without leaving the wire-bytes cache set."""
        out = self.service_s(packets)
        self._wire = None
        return out


def _open_fifo(disc):
    """One FIFO server, no message or byte limit, no CPU quota or speed drift, no idle exit,
    sleep entry or wake-up curve (:func:`pubsim.sim.kernels.plain_wakes`), drop-newest."""
    return (
        type(disc) is FifoDiscipline
        and len(disc.free) == 1
        and disc.ist[K.CAP_MSGS] < 0
        and disc.fs[K.CAP_BYTES] == np.inf
        and not K.periodic(disc.fs)
        and K.plain_wakes(disc.fs)
        and not disc.reject
    )


def _capped(priority, max_priority):
    """Priorities above ``max_priority`` count as it (AMQP x-max-priority); None = no cap."""
    return priority if max_priority is None else np.minimum(priority, max_priority)


class _Uniform(Constant):
    """U[0, 1) draws for loss decisions."""

    is_constant = False

    def sample(self, rng, n):
        return rng.random(n)


_UNIFORM = _Uniform(value=0.5)


def _quota(params):
    """CPU quota left to a broker's messages per period (``cpu_fraction`` 1 = no quota):
    the background load takes its share of the budget first."""
    if params.cpu_quota_cores is None:
        return {}
    share = params.cpu_quota_cores - params.background_cpu_fraction
    return {"cpu_quota_s": share * params.cpu_period_s, "cpu_period_s": params.cpu_period_s}


def _drift_key(params, streams, name):
    """Key of the broker's speed-drift stream (:func:`pubsim.sim.kernels.set_speed_drift`), or None."""
    if params.speed_drift_log_sd == 0.0:
        return None
    return int(streams.generator(name, "speed_drift").integers(2**53))


def _background_stretch(params):
    """Service-time factor of an uncapped broker whose workers also run a
    constant background load (processor sharing): ``1 / (1 - B / workers)``."""
    if params.cpu_quota_cores is not None or params.background_cpu_fraction == 0.0:
        return 1.0
    return 1.0 / (1.0 - params.background_cpu_fraction / params.workers)


def _wakeup_s(params, connections):
    """Extra cost of a message that finds the worker idle, s: the wake-up and its per-connection part."""
    return params.idle_wakeup_cost_s + params.connection_wakeup_cost_s * connections


def _batch(params):
    """Batch rule of a broker (or socket, disk) parameter object."""
    return {
        "batch_max_messages": params.batch_max_messages,
        "batch_fixed_cost_s": params.batch_fixed_cost_s,
        "batch_max_bytes": np.inf if params.batch_max_bytes is None else float(params.batch_max_bytes),
    }


def _restart(params):
    """Restart settings of a broker, or None."""
    if not params.restart_at_s:
        return None
    return {"restart_at_s": params.restart_at_s, "downtime_s": params.restart_downtime_s}


class BrokerStation(ModelStation):
    """A broker's workers; demand per message as in :mod:`pubsim.models.params.broker`.

    Parameters
    ----------
    name : str
    params : models.params.broker.BrokerParams
    filters : int
        Subscription filters installed on this broker.
    streams : sim.rng.StreamFactory
    window : (float, float)
    connections : int
        Client connections of this broker (publishers and subscribers
        attached to it), for ``connection_cost_s``.
    cpu_shared : bool
        Its CPU is a shared host CPU station that charges this broker's
        demand (:meth:`demand_s`) together with its interworking node's
        (:mod:`pubsim.models.mechanisms.hosts.cpu`): here a visit then takes no time.
    """

    def __init__(self, name, params, *, filters, streams, window, connections=0, cpu_shared=False):
        self.cpu_shared = bool(cpu_shared)
        self.connections = int(connections)
        cap = None if params.queue_messages is None else params.queue_messages + params.workers
        disc = make_discipline(
            servers=params.workers,
            capacity_messages=cap,
            capacity_bytes=params.queue_bytes,
            overflow=params.overflow,
            idle_extra_s=0.0 if cpu_shared else _wakeup_s(params, connections) * _background_stretch(params),
            priority=params.scheduling == "priority",
            batch=_batch(params),
            restart=_restart(params),
            disk_cost_s=params.flow_to_disk_cost_s,
            idle_exit=None if cpu_shared or params.idle_exit is None else params.idle_exit.curve,
            sleep_entry_s=0.0 if cpu_shared else params.sleep_entry_s,
            **_quota(params),
        )
        super().__init__(name, "broker", disc, servers=params.workers, window=window)
        self.params = params
        self.filters = int(filters)
        self.stretch = 1.0 if cpu_shared else _background_stretch(params)  # shared: the host CPU stretches
        self.ingress = streams.draws(params.ingress_cost_s, name, "ingress")
        self.match = streams.draws(params.match_cost_s, name, "match")
        self.delivery = streams.draws(params.delivery_cost_s, name, "delivery")
        self.ack_packets = None  # QoS handshake packets with the sender per visit (models.mechanisms.qos), or None
        self.copy_ack_packets = None  # ... with the copies' receivers (set with ack_packets)
        self.copies_by_visit = None  # copies made per visit below a disk (models.mechanisms.persistence), or None
        self.topic_bytes = None  # topic length per flow, for length_byte_cost_s
        self.reader_wakes = None  # copies that wake their readers (models.mechanisms.readers), or None
        self._drift_key = _drift_key(params, streams, name)

    def wire(self, index, wiring):
        """Handshake packets per visit, copies per visit below a disk, durable visits, topic bytes."""
        self.topic_bytes = wiring.flow_topic_bytes
        self.ack_packets = wiring.ack_packets
        self.copy_ack_packets = wiring.copy_ack_packets
        self.copies_by_visit = wiring.copies_by_visit.get(index)
        self._wire_durable(index, wiring)
        fs = getattr(self.discipline, "fs", None)  # the discipline the station ended with (mechanisms replace it)
        if fs is None:  # not a FIFO discipline (a drift is refused there: models.params.features)
            return
        if self._drift_key is not None:
            p = self.params
            K.set_speed_drift(fs, p.speed_drift_log_sd, p.speed_drift_time_s, self._drift_key)
        K.set_throttle_window(fs, self.stats.w0, self.stats.w1)
        if self.params.cpu_tick_s > 0:
            K.set_quota_tick(fs, self.params.cpu_tick_s)
        if self.params.wake_curve is not None and not self.cpu_shared:  # refused on a shared CPU anyway
            K.set_wake_curve(fs, *self.params.wake_curve.curve)

    def service_s(self, packets):
        return np.zeros(len(packets)) if self.cpu_shared else self.demand_s(packets)

    def record(self):
        """The station's figures; ``wakeups`` are the wake-ups charged (by start in the window)
        where an idle exit delays them, a sleep entry spares some or a wake-up curve prices them
        by idle time (the FIFO kernel counts them, :func:`pubsim.sim.kernels.count_woke`), else
        the messages that started the moment they were admitted (the same thing without these)."""
        row = super().record()
        if self.reader_wakes is not None:
            row.update(self.reader_wakes.record())
        disc = self.discipline
        if type(disc) is FifoDiscipline and not K.plain_wakes(disc.fs):
            row["wakeups"] = int(disc.fs[K.WOKE_N])
        return row

    def demand_s(self, packets):
        """CPU demand of each packet's visit, s (draws this broker's cost streams)."""
        p = self.params
        n = len(packets)
        matched = self.plan.matched[packets.visit]
        copies = (self.plan.n_children if self.copies_by_visit is None else self.copies_by_visit)[packets.visit]
        demand = self.ingress.take(n) + matched * self.match.take(n) + copies * self.delivery.take(n)
        demand = demand + p.per_byte_cost_s * (packets.size * (1 + copies))
        if self.reader_wakes is not None:
            demand = demand + p.reader_wake.wake_cost_s * self.reader_wakes.asleep(packets.t, packets.visit, copies)
        if p.length_byte_cost_s:
            demand = demand + p.length_byte_cost_s * self.extra_length_bytes(packets)
        if p.heap_trim is not None:
            demand = demand + p.heap_trim.cost_s(packets.size)
        if self.ack_packets is not None:
            v = packets.visit
            demand = demand + p.ack_cost_s * self.ack_packets[v] + p.copy_ack_s * self.copy_ack_packets[v]
        demand = demand + self.constant_s
        return demand if self.stretch == 1.0 else demand * self.stretch

    def extra_length_bytes(self, packets):
        """Bytes of each packet's MQTT remaining-length field beyond the first (QoS 0 sizes)."""
        return mqtt_length_bytes(packets.size, self.topic_bytes[self.plan.flow[packets.visit]]) - 1

    @property
    def constant_s(self):
        """Demand every visit pays whatever it carries, s: installed filters
        scanned and client connections (``filter_scan_cost_s`` in its ``filter_cost_form``,
        ``connection_cost_s``)."""
        p = self.params
        scan = p.filter_scan_cost_s * float(filter_load(self.filters, p.filter_cost_form, p.filter_cost_exponent))
        return scan + p.connection_cost_s * self.connections

    def priority(self, packets):
        if self.params.scheduling != "priority":
            return None
        return _capped(self.plan.flow_priority[self.plan.flow[packets.visit]], self.params.max_priority)

    @property
    def min_demand_s(self):
        """Least CPU demand of a visit, s."""
        return self.params.ingress_cost_s.min_value

    @property
    def lookahead_s(self):
        return 0.0 if self.cpu_shared else self.min_demand_s

    def compiled_spec(self):
        """A broker with one FIFO worker and no queue limit, whose demand is its
        cost draws (:mod:`pubsim.sim.closed_kernel`); None for anything else."""
        if type(self) is not BrokerStation or self.cpu_shared or not _open_fifo(self.discipline):
            return None
        p = self.params
        if self.ack_packets is not None or self.copies_by_visit is not None or p.length_byte_cost_s or p.heap_trim:
            return None
        if self.reader_wakes is not None:
            return None
        return {
            "kind": "broker",
            "discipline": self.discipline,
            "idle_extra_s": float(self.discipline.fs[K.IDLE_EXTRA]),
            "draws": (self.ingress, self.match, self.delivery),
            "per_byte_s": float(p.per_byte_cost_s),
            "constant_s": self.constant_s,
            "stretch": float(self.stretch),
        }


class SubscriberStation(ModelStation):
    """A subscriber handling messages one at a time, with a receive buffer.

    ``cpu_shared``: its host's CPU station charges its demand (:meth:`demand_s`,
    :mod:`pubsim.models.mechanisms.hosts.cpu`); a visit here then takes no time.
    """

    def __init__(self, name, params, *, streams, window, cpu_shared=False):
        disc = FifoDiscipline(servers=1, capacity_messages=params.buffer_messages, overflow=Overflow.DROP_NEWEST)
        super().__init__(name, "subscriber", disc, window=window)
        self.params = params
        self.cpu_shared = bool(cpu_shared)
        self.processing = streams.draws(params.processing_s, name, "processing")

    def service_s(self, packets):
        return np.zeros(len(packets)) if self.cpu_shared else self.demand_s(packets)

    def demand_s(self, packets):
        """CPU demand of each packet, s (processing, then decoding)."""
        service = self.processing.take(len(packets))
        codec = self.params.serialization
        return service if codec is None else service + codec.decode_s(packets.size)

    @property
    def min_demand_s(self):
        """Least CPU demand of a visit, s."""
        codec = self.params.serialization
        return self.params.processing_s.min_value + (0.0 if codec is None else codec.decode_cost_s)

    @property
    def lookahead_s(self):
        return 0.0 if self.cpu_shared else self.min_demand_s


class EncodeStation(ModelStation):
    """A publisher's CPU encoding its messages (FIFO, one core, no limit):
    ``encode_cost_s + encode_cost_per_byte_s x encoded size`` per message
    (:mod:`pubsim.models.params.serialization`). ``cpu_shared``: its host's CPU
    station charges the demand (:meth:`demand_s`); a visit here then takes no time."""

    def __init__(self, name, params, *, window, cpu_shared=False):
        disc = FifoDiscipline(servers=1, capacity_messages=None, overflow=Overflow.DROP_NEWEST)
        super().__init__(name, "publisher_cpu", disc, window=window)
        self.params = params
        self.cpu_shared = bool(cpu_shared)

    def service_s(self, packets):
        return np.zeros(len(packets)) if self.cpu_shared else self.demand_s(packets)

    def demand_s(self, packets):
        """CPU demand of each packet, s."""
        return self.params.encode_s(packets.size.astype(np.float64))

    @property
    def min_demand_s(self):
        """Least CPU demand of a visit, s."""
        return self.params.encode_cost_s

    @property
    def lookahead_s(self):
        return 0.0 if self.cpu_shared else self.min_demand_s
