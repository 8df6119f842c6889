"""Broker parameters.

Service demand of one message at a broker (seconds of a worker's time)::

    ingress + matched * match + deliveries * delivery
            + per_byte * size * (1 + deliveries) + filter_scan * f(filters)
            [+ heap_trim.cost_s(size)]
            (+ idle_wakeup when the message finds its worker idle)

where ``matched`` is the number of subscription filters the topic matches at
this broker, ``deliveries`` the copies it sends on (to subscribers and
neighbour brokers) and ``filters`` the filters installed on the broker
(``f`` is :func:`filter_load`: the count, or its logarithm). Each
of ``ingress``, ``match`` and ``delivery`` is a distribution drawn once per
message and multiplied by its count. ``idle_wakeup`` captures load-dependent
cost: an event-loop broker that sleeps between messages pays a wake-up
(system call, context switch, cache misses) per message at low load and
almost none when busy (issue #3 measured Mosquitto at about 21 us of CPU per
message at 1k msg/s and about 8 us at 40k msg/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...sim.disciplines import Overflow
from ...sim.distributions import Constant, Distribution
from ...sim.errors import ConfigError
from .disk import DiskParams
from .features import refuse
from .heap import HeapTrimParams
from .idle import IdleExitParams, WakeCurveParams
from .io import IoParams
from .mapping import MAX_WORKERS, check_fields
from .overload import OverloadParams
from .patterns import ReplyParams
from .provenance import ASSUMED, Provenance
from .readers import ReaderWakeParams
from .store import StoreParams
from .topics import TopicSyntax

__all__ = ["BrokerParams", "FILTER_FORMS", "SHARED_DISPATCH", "filter_load"]

#: Dispatch policies of shared subscriptions (models.mechanisms.shared).
SHARED_DISPATCH = ("round_robin", "random", "sticky")

_ZERO = Constant(value=0.0)

#: How the cost of installed filters grows with their number (:func:`filter_load`).
FILTER_FORMS = ("linear", "log", "power")


def filter_load(filters: int | float | np.ndarray, form: str = "linear", exponent: float = 1.0) -> float | np.ndarray:
    """Multiplier of ``filter_scan_cost_s`` for ``filters`` installed filters (scalar or array).

    ``linear``: ``filters`` (a broker that tests every filter per message).
    ``log``: ``ln(1 + filters)``. ``power``: ``filters ** exponent``. The
    concave forms are empirical, for a cost that grows ever more slowly with
    the filters; a campaign chooses one by held-out error where its data
    demand it (:mod:`pubsim.calibration.forms`). NATS under a CPU quota paid
    per idle subscription through its garbage collector, which marks the
    larger heap less often as it grows (calibration/README.md, "Installed
    subscriptions nobody publishes to"); no form models the collector.
    """
    if form == "log":
        return np.log1p(filters)
    if form == "power":
        return np.power(np.asarray(filters, dtype=float), exponent)
    return filters


@dataclass(frozen=True, kw_only=True)
class BrokerParams:
    """A broker: workers, service demand, buffers, overflow policy, topic syntax.

    Parameters
    ----------
    workers : int
        Worker threads / cores that serve messages in parallel (Mosquitto: 1).
    ingress_cost_s : Distribution
        Fixed cost per incoming message, s.
    match_cost_s : Distribution
        Cost per matched subscription filter, s.
    delivery_cost_s : Distribution
        Cost per outgoing copy, s.
    per_byte_cost_s : float
        Cost per payload byte handled, once on ingress and once per copy, s/byte.
    length_byte_cost_s : float
        Cost per byte of an incoming MQTT PUBLISH's remaining-length field
        beyond the first, s: Mosquitto 2.0 (``lib/packet_mosq.c``
        ``packet__read``) reads the fixed header's remaining length one
        byte per ``read`` system call, so a PUBLISH of 128 B to 16 KiB costs
        one ``read`` more than a smaller one, and one of 16 KiB to 2 MiB two
        more (:func:`pubsim.models.protocol.mqtt_length_bytes`, QoS 0 sizes):
        a step with the payload that ``per_byte_cost_s`` cannot express.
        Default 0 (brokers that read whole buffers).
    filter_scan_cost_s : float
        Cost per installed filter per message (topic matching grows with the
        number of subscriptions), s; with ``filter_cost_form`` ``log``, per
        unit of ``ln(1 + filters)``, with ``power``, per unit of
        ``filters ** filter_cost_exponent``.
    filter_cost_form : str
        How that cost grows with the installed filters (:func:`filter_load`):
        ``linear`` (default), ``log`` or ``power``.
    filter_cost_exponent : float
        The exponent of the ``power`` form, in (0, 1]; 1 (default) otherwise.
    idle_wakeup_cost_s : float
        Extra cost of a message that finds its worker idle, s.
    sleep_entry_s : float
        How long after running out of work a worker (an event loop) still
        takes a message without a wake-up, s: a message arriving that soon
        after its server became free pays neither ``idle_wakeup_cost_s``
        nor the idle core's exit latency (Linux ``fs/eventpoll.c``
        ``ep_poll`` returns the events that came before the task was
        switched out, and ``schedule()`` does not switch away from a task
        woken meanwhile, so no voluntary context switch is counted; a Go
        runtime's idle threads spin before they park). Fitted so that the
        simulated wake-ups per message equal the measured voluntary context
        switches (:class:`pubsim.calibration.sleep.SleepEntryCalibrator`).
        0 (default): every message that finds its server free wakes it.
        Needs the FIFO worker or ``io`` (as ``idle_exit``).
    connection_cost_s : float
        Cost per client connection of the broker (publishers and
        subscribers attached to it) per ingress message, s: what more
        sockets cost each message (issue 18; fitted by
        :class:`pubsim.calibration.fit.BrokerDemandCalibrator` from
        measurements that vary the connection counts). Default 0.
    connection_wakeup_cost_s : float
        Extra cost per client connection of a message that finds its worker
        idle (a wake-up that costs more with more sockets), s; the other
        form of the per-connection cost. Default 0.
    cpu_fraction : float
        CPU quota of the broker, in cores: in (0, 1], or up to its host's
        cores when it is placed on a host (a cgroup CPU quota:
        ``cpu.cfs_quota_us / cpu.cfs_period_us``). All costs are CPU seconds
        at full speed. The workers together may work ``cpu_fraction x
        cpu_period_s`` per period; past that they stall until the next
        period (Linux CFS bandwidth control; see :mod:`pubsim.sim.kernels`). 1 (the
        default) is no quota, and so is a quota of at least ``workers`` cores
        (:attr:`cpu_quota_cores`).
    cpu_period_s : float
        Quota period, s (Linux default 100 ms; pubsim's harness uses 10 ms).
    cpu_tick_s : float
        The scheduler tick at which a busy broker's quota is checked, s
        (``1 / CONFIG_HZ``; 4 ms on the calibration machine's kernel,
        ``CONFIG_HZ=250``). Linux throttles a cgroup only when it charges its
        runtime (``update_curr``: at each tick and when a thread sleeps or
        wakes), so a broker that works without a break runs past its quota
        until the next tick and repays the deficit from the next periods,
        throttled for whole periods meanwhile
        (:func:`pubsim.sim.kernels.set_quota_tick`). One worker only. 0
        (default): the quota is enforced at every instant.
    speed_drift_log_sd : float
        The broker's speed drifts. In each period of ``cpu_period_s`` (its
        quota's, if it has one) its work takes ``S`` times its nominal CPU, ``log S`` a stationary
        Gaussian AR(1) over the periods with this standard deviation (about
        the coefficient of variation of ``S``) and ``E[S] = 1``
        (:func:`pubsim.sim.kernels.set_speed_drift`). It is what puts a
        capped broker into throttled periods below its limit; fitted from
        the measured throttled-period fractions by
        :class:`pubsim.calibration.drift.SpeedDriftCalibrator`. 0 (default):
        constant speed.
    speed_drift_time_s : float
        Correlation time of ``log S``, s (0: independent per period).
    background_cpu_fraction : float
        CPU the broker spends on work that is not messages (timers, runtime
        housekeeping, ``$SYS`` updates, other work on its machine), in cores,
        in [0, 1), or below its host's cores on a host. Under a quota it
        takes its share of the budget first (the messages get
        ``cpu_fraction - background_cpu_fraction`` cores); without one it
        time-shares the workers, stretching every service by
        ``1 / (1 - background / workers)`` (processor sharing of a constant
        background load; an approximation that keeps FIFO arithmetic).
    queue_messages, queue_bytes : int or None
        Limit of the shared ingress queue (messages waiting for a worker, plus
        those in service), messages / bytes; None = unlimited.
    client_queue_messages, client_queue_bytes : int or None
        Limit of each subscriber's outgoing queue at this broker (Mosquitto
        ``max_queued_messages``), messages / bytes.
    overflow : str
        What a full ingress queue does: ``drop_newest``, ``drop_oldest`` or
        ``backpressure`` (the publisher holds the message until there is room;
        nothing is lost, the wait counts in latency); also ``reject``,
        ``ring``, ``update`` and ``flow_to_disk`` (:class:`pubsim.sim.disciplines.Overflow`).
    topic_syntax : str
        ``mqtt``, ``amqp`` or ``prefix`` (ZeroMQ).
    scheduling : str
        ``fifo``, or ``priority``: waiting messages are served by their
        publisher's priority (higher first, FIFO within a priority,
        non-preemptive), as in YAMI4's outgoing queues (SYSTEMS.md §1).
    ack_cost_s : float
        CPU cost per QoS handshake packet the broker sends or receives
        (PUBACK, PUBREC, PUBREL, PUBCOMP, AMQP basic.ack), s; default 0
        (assumption: not measured; handshake packets have no payload). With
        ``copy_ack_cost_s`` set, only the packets of the exchange with the
        sender (the publisher or the upstream hop) pay it.
    copy_ack_cost_s : float or None
        CPU cost per handshake packet of the exchanges with the receivers of
        the copies (the subscribers' PUBACKs; PUBREC, PUBREL, PUBCOMP), s;
        None (default): ``ack_cost_s``. Mosquitto 2.0 reads one packet per
        ready connection per ``epoll_wait`` (``src/mux_epoll.c``), so the
        copies' acknowledgements, ready together on several connections,
        share a pass that the sender's, one connection, does not
        (calibration/README.md, "The copies' handshake packets": 3.8 us
        against 6.3 us for the sender's, measured here at 0.2 core).
    max_inflight_messages : int
        Most un-acknowledged QoS > 0 messages per client connection (and
        bridge) it sends on; 0 = no limit. Default 20: Mosquitto
        ``max_inflight_messages`` (mosquitto.conf(5)).
    retry_timeout_s : float
        Resend an unacknowledged packet to a client after this time, s
        (Mosquitto 1.x ``retry_interval``, default 20 s).
    client_scheduling : str
        ``fifo`` or ``priority``: order of each subscriber's outgoing queue
        (the broker-to-subscriber link's transmit queue): a YAMI4 priority
        channel, an AMQP priority queue per consumer.
    client_overflow : str
        What a full per-subscriber queue does (same choices as ``overflow``);
        the default ``drop_newest`` leaves the link's own ``overflow`` in force.
    max_priority : int or None
        AMQP ``x-max-priority`` (RabbitMQ): priorities above it count as it,
        at the ingress queue and the per-subscriber queues; None = no cap.
    flow_to_disk_cost_s : float
        ``flow_to_disk`` (Qpid): extra time a message admitted beyond a
        queue's limit needs (written to disk and read back), s.
    client_frame_bytes : int or None
        YAMI4 frames: each message to a subscriber is cut into frames of at
        most this many wire bytes and the per-subscriber queue orders frames
        (``pubsim.models.mechanisms.frames``); the subscriber reads inside its
        channel. None (default) = whole messages, as before. YAMI4's default
        ``tcp_frame_size`` is 4096 bytes (yami4-core ``options.cpp``).
    client_send_window_bytes : int or None
        Send window of each framed channel (socket buffers between the queue
        and the reader), bytes; frames leave the queue only while it has
        room and the reader's takes free it. None = unlimited; needs
        ``client_frame_bytes`` and at least one frame.
    batch_max_messages : int
        Automatic batching (ZeroMQ writes every queued message of a pipe in
        one ``send()``): when the worker becomes free it takes up to this
        many waiting messages and serves them as one batch in
        ``batch_fixed_cost_s`` plus their own demands; all leave at the batch
        end (:class:`pubsim.sim.disciplines.BatchDiscipline`). 1 (the default) is
        no batching: plain FIFO. Needs one worker, FIFO scheduling, no CPU
        quota and no drop_oldest.
    batch_fixed_cost_s : float
        Cost per batch (system call, wake-up of the I/O thread), s.
    batch_max_bytes : int or None
        Most payload bytes per batch (libzmq's out batch size is 8192 B);
        None = no limit. A batch always takes its first message.
    disk : DiskParams or None
        Disk stage for persistent messages (:mod:`pubsim.models.mechanisms.persistence.disk`): they pass
        through it after the worker and before delivery; None = no disk
        (persistent messages are treated as transient). In scenario files a
        mapping of DiskParams fields, which may name a ``preset``; in GraphML
        a JSON mapping.
    store : StoreParams or None
        How the product stores persistent messages (journal, index, message
        store; sync policy; acknowledgement writes; memory before read-back):
        :mod:`pubsim.models.params.store`, presets in ``stores.yaml``. Needs
        a ``disk``; None = the disk alone (group commit of the payload).
    restart_at_s : tuple of float
        Times the broker restarts, s (e.g. a crash and restart): every
        message it holds is lost (cause ``broker_restart``) unless it is
        persistent and ``durable_queue`` is set; survivors are served after
        the downtime. Modelled in the event-driven queue
        (:mod:`pubsim.sim.restart`), for the worker queue and the per-subscriber
        queues alike; the disk stage keeps its content.
    restart_downtime_s : float
        How long the broker is down after a restart, s; arrivals meanwhile
        are refused (cause ``broker_down``).
    durable_queue : bool
        The broker's queue is durable (AMQP ``durable=true``): persistent
        messages in it survive a restart.
    shared_dispatch : str
        How a share group's messages are dealt to its members
        (:mod:`pubsim.models.mechanisms.shared`): ``round_robin`` (Mosquitto,
        RabbitMQ competing consumers, EMQX's default), ``random`` or
        ``sticky`` (EMQX ``shared_subscription_strategy``).
    reply : ReplyParams or None
        Makes the broker a request/reply server: reply size, server
        processing, serialization of the reply
        (:mod:`pubsim.models.mechanisms.patterns.reqrep`); None = replies are
        the requests themselves, with no server work beyond the broker's demand.
    io : IoParams or None
        I/O cycles of a multi-threaded broker (NATS, ZeroMQ proxy): a fixed
        cost per cycle plus one per connection flushed, paid once per cycle
        rather than per message (:mod:`pubsim.models.mechanisms.iothreads`);
        with ``cycle_max_per_connection: 1``, Mosquitto's event-loop passes
        (one packet per ready connection per pass, a pass's cost shared by
        the messages of different connections read in it); with
        ``cycle_max_bytes``, a cycle reads at most a read buffer's bytes
        (nats-server: 64 KiB); None (default)
        = the plain FIFO worker. Needs one worker, FIFO scheduling, an
        unlimited ingress queue, no batching and no restarts. In scenario
        files a mapping of IoParams fields (``cycle_cost_s``,
        ``flush_cost_s``, ``cycle_max_messages``, ``cycle_max_bytes``,
        ``message_overhead_bytes``, ``cycle_max_per_connection``).
    overload : OverloadParams or None
        TCP flow control past the broker's limit: each publisher connection
        holds a bounded socket buffer, a publisher whose buffer is full waits
        (back-pressure) and its messages are stamped when sent
        (:mod:`pubsim.models.mechanisms.overload`); None (default) = an
        unlimited ingress queue, publishers never wait. Needs one worker,
        FIFO scheduling, no ingress queue limits, no batching, no restarts,
        and, with ``io``, its passes (``cycle_max_per_connection`` set). In
        scenario files a mapping of OverloadParams fields.
    idle_exit : IdleExitParams or None
        How long the broker's core takes to leave its idle state, by how
        long it idled (:mod:`pubsim.models.params.idle`): a message that
        finds the worker idle starts that much later, without CPU. None
        (default): at once. Needs FIFO scheduling, drop_newest, reject or
        backpressure on the ingress queue, no batching, no restarts, no
        ``io`` and a CPU of its own (not a host CPU shared with other
        processes). In scenario files a mapping of IdleExitParams fields.
    wake_curve : WakeCurveParams or None
        What a wake-up costs by how long the worker idled before it
        (:class:`pubsim.models.params.idle.WakeCurveParams`): a message that
        wakes it pays ``share(idle) x (idle_wakeup_cost_s + work_share x
        its demand)`` instead of ``idle_wakeup_cost_s``. None (default): the
        same wake-up whatever the idle. Needs what ``idle_exit`` needs. In
        scenario files a mapping of WakeCurveParams fields.
    heap_trim : HeapTrimParams or None
        Pages the broker's allocator gives back to the kernel after each
        large message and faults in again on the next
        (:mod:`pubsim.models.params.heap`): a message of ``size`` bytes costs
        ``heap_trim.cost_s(size)`` more. None (default): none. In scenario
        files a mapping of HeapTrimParams fields.
    reader_wake : ReaderWakeParams or None
        Extra CPU for a copy whose reader sleeps when the broker writes it
        (:mod:`pubsim.models.params.readers`, :mod:`pubsim.models.mechanisms.readers`):
        a loopback write wakes the reader in the broker's context. None
        (default): every copy costs ``delivery_cost_s``. In scenario files a
        mapping of ReaderWakeParams fields.
    copies_in_turn : bool
        True: the broker writes each copy of a message as it routes it, so
        the copy of rank ``k`` (0 first) of ``n`` leaves
        ``(n - 1 - k) x`` the least ``delivery_cost_s`` before the message's
        service ends (:mod:`pubsim.models.mechanisms.turns`; Mosquitto 2.0:
        ``subs__send`` -> ``db__message_insert`` -> ``packet__queue`` ->
        ``packet__write`` per subscriber). False (default): every copy
        leaves when the service ends (a broker that flushes its clients
        after the message, or one whose order is not known). Not with a
        host CPU shared with other processes (refused there).
    provenance : Provenance
    """

    workers: int = field(default=1, metadata={"unit": "positive_count", "max": MAX_WORKERS})
    ingress_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    match_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    delivery_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    per_byte_cost_s: float = field(default=0.0, metadata={"unit": "float"})
    length_byte_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    filter_scan_cost_s: float = field(default=0.0, metadata={"unit": "float"})
    filter_cost_form: str = field(default="linear", metadata={"unit": "choice", "choices": FILTER_FORMS})
    filter_cost_exponent: float = field(default=1.0, metadata={"unit": "float"})
    idle_wakeup_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    sleep_entry_s: float = field(default=0.0, metadata={"unit": "duration"})
    connection_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    connection_wakeup_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    cpu_fraction: float = field(default=1.0, metadata={"unit": "cpu_cores"})
    cpu_period_s: float = field(default=0.1, metadata={"unit": "duration"})
    cpu_tick_s: float = field(default=0.0, metadata={"unit": "duration"})
    speed_drift_log_sd: float = field(default=0.0, metadata={"unit": "float"})
    speed_drift_time_s: float = field(default=0.0, metadata={"unit": "duration"})
    background_cpu_fraction: float = field(default=0.0, metadata={"unit": "cpu_load"})
    queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    queue_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    client_queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    client_queue_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    overflow: str = field(default=Overflow.DROP_NEWEST, metadata={"unit": "choice", "choices": Overflow.ALL})
    topic_syntax: str = field(
        default="mqtt", metadata={"unit": "choice", "choices": tuple(s.value for s in TopicSyntax)}
    )
    scheduling: str = field(default="fifo", metadata={"unit": "choice", "choices": ("fifo", "priority")})
    ack_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    copy_ack_cost_s: float | None = field(default=None, metadata={"unit": "optional_duration"})
    max_inflight_messages: int = field(default=20, metadata={"unit": "count"})
    retry_timeout_s: float = field(default=20.0, metadata={"unit": "duration"})
    client_scheduling: str = field(default="fifo", metadata={"unit": "choice", "choices": ("fifo", "priority")})
    client_overflow: str = field(default=Overflow.DROP_NEWEST, metadata={"unit": "choice", "choices": Overflow.ALL})
    max_priority: int | None = field(default=None, metadata={"unit": "optional_count"})
    flow_to_disk_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    client_frame_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    client_send_window_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    batch_max_messages: int = field(default=1, metadata={"unit": "positive_count"})
    batch_fixed_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    batch_max_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    disk: DiskParams | None = field(default=None, metadata={"unit": "params", "cls": DiskParams, "preset": "disk"})
    store: StoreParams | None = field(default=None, metadata={"unit": "params", "cls": StoreParams, "preset": "store"})
    restart_at_s: tuple = field(default=(), metadata={"unit": "raw"})
    restart_downtime_s: float = field(default=0.0, metadata={"unit": "duration"})
    durable_queue: bool = field(default=False, metadata={"unit": "flag"})
    shared_dispatch: str = field(default="round_robin", metadata={"unit": "choice", "choices": SHARED_DISPATCH})
    reply: ReplyParams | None = field(default=None, metadata={"unit": "params", "cls": ReplyParams, "preset": "reply"})
    io: IoParams | None = field(default=None, metadata={"unit": "params", "cls": IoParams})
    overload: OverloadParams | None = field(default=None, metadata={"unit": "params", "cls": OverloadParams})
    idle_exit: IdleExitParams | None = field(default=None, metadata={"unit": "params", "cls": IdleExitParams})
    wake_curve: WakeCurveParams | None = field(default=None, metadata={"unit": "params", "cls": WakeCurveParams})
    reader_wake: ReaderWakeParams | None = field(default=None, metadata={"unit": "params", "cls": ReaderWakeParams})
    heap_trim: HeapTrimParams | None = field(default=None, metadata={"unit": "params", "cls": HeapTrimParams})
    copies_in_turn: bool = field(default=False, metadata={"unit": "flag"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if self.restart_at_s != ():
            _check_restarts(self)
        _check_frames(self)
        if self.store is not None and self.disk is None:
            raise ConfigError("store", self.store.product or "a store", "a disk with it (store needs disk)")
        refuse(self, "broker")  # pairs of features that do not combine (models.params.features)
        cpu = self.workers if self.cpu_quota_cores is None else self.cpu_quota_cores
        if self.background_cpu_fraction >= cpu:
            raise ConfigError(
                "background_cpu_fraction",
                self.background_cpu_fraction,
                f"less than the broker's CPU: in [0, {cpu:g}) cores "
                f"(cpu_fraction {self.cpu_fraction:g}, {self.workers} workers)",
            )
        if not self.cpu_period_s > 0:
            raise ConfigError("cpu_period_s", self.cpu_period_s, "a period > 0 s")
        _check_filter_exponent(self)

    @property
    def cpu_quota_cores(self) -> float | None:
        """The CPU quota in cores, or None: ``cpu_fraction`` below 1, or between 1
        and ``workers`` (a multi-core quota on a host); 1 or at least ``workers`` is none."""
        c = self.cpu_fraction
        return c if c < 1.0 or 1.0 < c < self.workers else None

    @property
    def copy_ack_s(self) -> float:
        """Cost per handshake packet with a copy's receiver, s: ``copy_ack_cost_s``, or ``ack_cost_s`` if None."""
        return self.ack_cost_s if self.copy_ack_cost_s is None else self.copy_ack_cost_s

    @property
    def mean_demand_s(self) -> float:
        """Mean demand of a message with one match and one copy, s (for quick sizing)."""
        return self.ingress_cost_s.mean + self.match_cost_s.mean + self.delivery_cost_s.mean


def _check_filter_exponent(p: BrokerParams) -> None:
    """The power form's exponent in (0, 1] (concave or linear); 1 with the other forms."""
    e = p.filter_cost_exponent
    if p.filter_cost_form == "power" and not 0 < e <= 1:
        raise ConfigError("filter_cost_exponent", e, "an exponent in (0, 1] for filter_cost_form power")
    if p.filter_cost_form != "power" and e != 1.0:
        raise ConfigError("filter_cost_exponent", e, f"1 with filter_cost_form {p.filter_cost_form} (power takes one)")


def _check_frames(p: BrokerParams) -> None:
    """Frame size > 0; a send window needs frames and holds at least one frame."""
    f, w = p.client_frame_bytes, p.client_send_window_bytes
    if f is not None and not f > 0:
        raise ConfigError("client_frame_bytes", f, "a frame size > 0 bytes")
    if w is None:
        return
    if f is None:
        raise ConfigError("client_send_window_bytes", w, "unset without client_frame_bytes (frames off)")
    if w < f:
        raise ConfigError("client_send_window_bytes", w, f"at least one frame (client_frame_bytes {f})")


def _check_restarts(p: BrokerParams) -> None:
    """Restart times: finite, >= 0, increasing (what they combine with: models.params.features)."""
    try:
        times = [float(t) for t in p.restart_at_s]
    except (TypeError, ValueError):
        raise ConfigError("restart_at_s", p.restart_at_s, "a list of times in s") from None
    if any(not (t >= 0 and t < float("inf")) for t in times) or times != sorted(times):
        raise ConfigError("restart_at_s", p.restart_at_s, "finite times >= 0 in increasing order")
    object.__setattr__(p, "restart_at_s", tuple(times))
