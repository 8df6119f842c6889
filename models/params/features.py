"""Features of the parameter objects and the one table of combinations that are refused.

A *feature* is a mechanism or queue property a component uses (QoS > 0,
restarts, a priority queue, back-pressure, batching...). Most features
combine freely; :data:`REFUSED` lists, for each pair that does not and each
*scope* where it is checked, the field the one-line
:class:`~pubsim.sim.errors.ConfigError` names and the reason.

Scopes ``broker``, ``link``, ``subscriber``, ``publisher``: the features of
one parameter object, checked when it is built (:func:`refuse`, called by
its ``__post_init__``), so that a scenario file's error names its path.
Scope ``connection``: the features of one link station of a compiled
network (its queue, the QoS it carries, the broker whose queue it is),
checked once per compile by
:func:`pubsim.models.assembly.features.check_features`, which detects them.
``pubsim features`` prints the table.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...sim.disciplines import Overflow
from ...sim.errors import ConfigError
from .topics import is_shared

__all__ = ["Feature", "Refusal", "REFUSED", "DETECT", "object_features", "refuse"]


class Feature(str, enum.Enum):
    """A feature a component of a topology uses."""

    QOS = "qos"  # QoS > 0 (windowed, acknowledged connections)
    RESTART = "restart"  # a broker that restarts (restart_at_s), its client queues with it
    PRIORITY = "priority"  # a priority queue (scheduling)
    BACKPRESSURE = "backpressure"  # a full queue blocks its sender
    QUEUE_POLICY = "queue_policy"  # reject, drop_oldest, ring, update or flow_to_disk
    EVENT_QUEUE = "event_queue"  # drop_oldest, ring, update or flow_to_disk (event-driven queue)
    CLIENT_PRIORITY = "client_priority"  # a broker's per-client queues are priority queues
    CLIENT_BACKPRESSURE = "client_backpressure"  # a broker's full per-client queue blocks it
    BATCHING = "batching"  # batch_max_messages > 1
    WORKERS = "workers"  # more than one worker
    CPU_QUOTA = "cpu_quota"  # a CPU quota (BrokerParams.cpu_quota_cores is not None)
    BUFFER = "buffer"  # a subscriber's receive buffer limit
    CHURN = "churn"  # a subscriber's churn process
    SCHEDULE = "schedule"  # a connection schedule (online_s) or a publication schedule
    ROUND_ROBIN = "round_robin"  # topics taken in turn (push/pull)
    TOPIC_WEIGHTS = "topic_weights"
    DISK = "disk"  # a broker disk for persistent messages
    BROKERLESS = "brokerless"  # ZeroMQ socket nodes
    RELAY = "relay"  # ILDM relay in front of a broker
    BRIDGE = "bridge"  # static bridges (forwarding: bridge)
    SESSIONS = "sessions"  # connection schedules or churn
    RETAIN = "retain"  # retained messages
    WILL = "will"  # publisher outages and Will messages
    CLOSED_LOOP = "closed_loop"  # request/reply clients (arrival closed_loop)
    SERIALIZATION = "serialization"
    SHARED = "shared"  # shared subscriptions ($share/{group}/{filter}, AMQP competing consumers)
    CARD = "card"  # a connection between hosts that passes a network card (models.mechanisms.hosts)
    FRAMES = "frames"  # YAMI4 frame channels (client_frame_bytes): frame queue, send window, reader inside
    LOSSY = "lossy"  # a link with loss or random jitter
    SEND_MODE = "send_mode"  # a producer waiting for confirms (sync, confirms, transactions)
    PRELOADED = "preloaded"  # a publisher whose messages were stored before the run
    IDLE_RECEIVER = "idle_receiver"  # a link whose jitter only a message finding the receiver idle pays (jitter_on)
    IDLE_EXIT = "idle_exit"  # a broker whose core takes time to leave its idle state (idle_exit)
    SLEEP_ENTRY = "sleep_entry"  # a broker whose worker stays awake a while after its work (sleep_entry_s)
    WAKE_CURVE = "wake_curve"  # a broker whose wake-up costs more the longer it idled (wake_curve)
    SPEED_DRIFT = "speed_drift"  # a broker whose speed drifts per period (speed_drift_log_sd > 0)
    QUOTA_TICK = "quota_tick"  # a broker whose CPU quota is checked at scheduler ticks (cpu_tick_s > 0)


F = Feature


@dataclass(frozen=True)
class Refusal:
    """A pair of features refused in one scope, and why.

    Parameters
    ----------
    scope : str
        ``broker``, ``link``, ``subscriber``, ``publisher`` (one parameter
        object) or ``connection`` (one link station of a compiled network).
    first, second : Feature
    field : str
        The field the error names; for connections a template with
        ``{link}`` and ``{subscriber}``.
    value : str
        The attribute whose value the error shows.
    reason : str
        What would be accepted (the error's ``expected``); may name the
        object's fields as ``{field}``.
    """

    scope: str
    first: Feature
    second: Feature
    field: str
    value: str
    reason: str

    def error(self, obj: Any, field: str | None = None) -> ConfigError:
        """The one-line error of this refusal for ``obj`` (a parameter object or a connection)."""
        values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return ConfigError(field or self.field, getattr(obj, self.value), self.reason.format(**values))


_QOS_FIFO = (
    "a FIFO queue with drop_newest or backpressure on a connection with QoS > 0 "
    "(the in-flight window is modelled for FIFO queues)"
)
_FRAMES = "a frame channel (client_frame_bytes) "
_QUOTA = "1 with priority scheduling or {overflow} (the CPU quota is modelled for FIFO brokers)"
_IDLE_EXIT = " with idle_exit (the idle exit is modelled for FIFO brokers)"
_DRIFT = " with speed_drift_log_sd > 0 (the speed drift is modelled for FIFO brokers)"
_SLEEP = " with sleep_entry_s > 0 (the sleep entry is modelled for FIFO brokers)"
_WAKE = " with wake_curve (the wake-up by idle time is modelled for FIFO brokers)"

#: The refused pairs, per scope, in the order they are checked.
REFUSED: tuple[Refusal, ...] = (
    # one broker (BrokerParams)
    Refusal("broker", F.BATCHING, F.WORKERS, "workers", "workers", "1 with batch_max_messages > 1"),
    Refusal("broker", F.BATCHING, F.CPU_QUOTA, "cpu_fraction", "cpu_fraction", "1 with batch_max_messages > 1"),
    Refusal("broker", F.BATCHING, F.PRIORITY, "scheduling", "scheduling", "fifo with batch_max_messages > 1"),
    Refusal(
        "broker",
        F.BATCHING,
        F.QUEUE_POLICY,
        "overflow",
        "overflow",
        "drop_newest or backpressure with batch_max_messages > 1",
    ),
    Refusal("broker", F.RESTART, F.BATCHING, "batch_max_messages", "batch_max_messages", "1 with restart_at_s"),
    Refusal("broker", F.RESTART, F.CPU_QUOTA, "cpu_fraction", "cpu_fraction", "1 with restart_at_s"),
    Refusal(
        "broker", F.RESTART, F.BACKPRESSURE, "overflow", "overflow", "drop_newest or drop_oldest with restart_at_s"
    ),
    Refusal("broker", F.IDLE_EXIT, F.BATCHING, "batch_max_messages", "batch_max_messages", "1" + _IDLE_EXIT),
    Refusal("broker", F.IDLE_EXIT, F.RESTART, "restart_at_s", "restart_at_s", "empty" + _IDLE_EXIT),
    Refusal("broker", F.IDLE_EXIT, F.PRIORITY, "scheduling", "scheduling", "fifo" + _IDLE_EXIT),
    Refusal("broker", F.SLEEP_ENTRY, F.BATCHING, "batch_max_messages", "batch_max_messages", "1" + _SLEEP),
    Refusal("broker", F.SLEEP_ENTRY, F.RESTART, "restart_at_s", "restart_at_s", "empty" + _SLEEP),
    Refusal("broker", F.SLEEP_ENTRY, F.PRIORITY, "scheduling", "scheduling", "fifo" + _SLEEP),
    Refusal(
        "broker", F.SLEEP_ENTRY, F.EVENT_QUEUE, "overflow", "overflow", "drop_newest, reject or backpressure" + _SLEEP
    ),
    Refusal(
        "broker", F.IDLE_EXIT, F.EVENT_QUEUE, "overflow", "overflow", "drop_newest, reject or backpressure" + _IDLE_EXIT
    ),
    Refusal("broker", F.WAKE_CURVE, F.BATCHING, "batch_max_messages", "batch_max_messages", "1" + _WAKE),
    Refusal("broker", F.WAKE_CURVE, F.RESTART, "restart_at_s", "restart_at_s", "empty" + _WAKE),
    Refusal("broker", F.WAKE_CURVE, F.PRIORITY, "scheduling", "scheduling", "fifo" + _WAKE),
    Refusal(
        "broker", F.WAKE_CURVE, F.EVENT_QUEUE, "overflow", "overflow", "drop_newest, reject or backpressure" + _WAKE
    ),
    Refusal("broker", F.SPEED_DRIFT, F.BATCHING, "batch_max_messages", "batch_max_messages", "1" + _DRIFT),
    Refusal("broker", F.SPEED_DRIFT, F.RESTART, "restart_at_s", "restart_at_s", "empty" + _DRIFT),
    Refusal("broker", F.SPEED_DRIFT, F.PRIORITY, "scheduling", "scheduling", "fifo" + _DRIFT),
    Refusal(
        "broker", F.SPEED_DRIFT, F.EVENT_QUEUE, "overflow", "overflow", "drop_newest, reject or backpressure" + _DRIFT
    ),
    Refusal(
        "broker",
        F.QUOTA_TICK,
        F.WORKERS,
        "cpu_tick_s",
        "cpu_tick_s",
        "0 (checked at every instant) with workers > 1 (the quota is checked at ticks for one worker)",
    ),
    Refusal("broker", F.CPU_QUOTA, F.PRIORITY, "cpu_fraction", "cpu_fraction", _QUOTA),
    Refusal("broker", F.CPU_QUOTA, F.EVENT_QUEUE, "cpu_fraction", "cpu_fraction", _QUOTA),
    Refusal(
        "broker",
        F.PRIORITY,
        F.BACKPRESSURE,
        "overflow",
        "overflow",
        "drop_newest or drop_oldest with priority scheduling",
    ),
    Refusal(
        "broker",
        F.CLIENT_PRIORITY,
        F.CLIENT_BACKPRESSURE,
        "client_overflow",
        "client_overflow",
        "drop_newest, reject, drop_oldest, ring, update or flow_to_disk with client_scheduling=priority",
    ),
    # one link (LinkParams)
    Refusal(
        "link",
        F.PRIORITY,
        F.BACKPRESSURE,
        "overflow",
        "overflow",
        "drop_newest, reject, drop_oldest, ring or update with scheduling=priority",
    ),
    # one publisher (PublisherParams)
    Refusal(
        "publisher",
        F.ROUND_ROBIN,
        F.SCHEDULE,
        "topic_choice",
        "topic_choice",
        "weighted with a schedule or topic_weights (round_robin takes topics in order)",
    ),
    Refusal(
        "publisher",
        F.ROUND_ROBIN,
        F.TOPIC_WEIGHTS,
        "topic_choice",
        "topic_choice",
        "weighted with a schedule or topic_weights (round_robin takes topics in order)",
    ),
    Refusal(
        "publisher",
        F.SEND_MODE,
        F.WILL,
        "send_mode",
        "send_mode",
        "async with offline_s (outages of a producer waiting for confirms are not modelled)",
    ),
    Refusal(
        "publisher",
        F.PRELOADED,
        F.SEND_MODE,
        "send_mode",
        "send_mode",
        "async for a preloaded publisher (its messages were stored before the run: nothing to confirm)",
    ),
    # one subscriber (SubscriberParams)
    Refusal(
        "subscriber",
        F.QOS,
        F.BUFFER,
        "buffer_messages",
        "buffer_messages",
        "unset with qos > 0 (the in-flight window bounds what the client holds)",
    ),
    Refusal("subscriber", F.CHURN, F.SCHEDULE, "online_s", "online_s", "empty with a churn process"),
    Refusal(
        "subscriber",
        F.SHARED,
        F.SESSIONS,
        "subscriptions",
        "subscriptions",
        "filters without $share/ with online_s or a churn process (dispatch that skips offline share-group "
        "members is not modelled)",
    ),
    # one connection of a compiled network (models.assembly.features)
    Refusal(
        "connection",
        F.QOS,
        F.RESTART,
        "{subscriber}.qos",
        "qos",
        "0 at a broker with restart_at_s (windowed connections are not modelled across broker restarts)",
    ),
    Refusal(
        "connection", F.RESTART, F.BACKPRESSURE, "{link}.overflow", "overflow", "not backpressure with restart_at_s"
    ),
    Refusal(
        "connection",
        F.PRIORITY,
        F.BACKPRESSURE,
        "{link}.overflow",
        "overflow",
        "drop_newest, reject, drop_oldest, ring, update or flow_to_disk on a priority queue (not backpressure)",
    ),
    Refusal("connection", F.QOS, F.PRIORITY, "{link}.overflow", "queue", _QOS_FIFO),
    Refusal("connection", F.QOS, F.QUEUE_POLICY, "{link}.overflow", "queue", _QOS_FIFO),
    Refusal(
        "connection",
        F.SHARED,
        F.BROKERLESS,
        "{subscriber}.subscriptions",
        "subscriptions",
        "filters without $share/ on a brokerless ZeroMQ peer (ZeroMQ SUB sockets have no shared "
        "subscriptions; PUSH/PULL deals messages to workers)",
    ),
    Refusal(
        "connection",
        F.QOS,
        F.CARD,
        "{link}.qos",
        "qos",
        "0 on a connection through a host's network card (handshakes and the in-flight window "
        "are modelled on connections without a card)",
    ),
    Refusal(
        "connection", F.FRAMES, F.QOS, "{subscriber}.qos", "qos", _FRAMES + "carries QoS 0 (no acknowledged reads)"
    ),
    Refusal(
        "connection", F.FRAMES, F.RESTART, "{link}.restart_at_s", "link", _FRAMES + "at a broker without restart_at_s"
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.QUEUE_POLICY,
        "{link}.overflow",
        "queue",
        _FRAMES + "drops the newest message at its limits (drop_newest)",
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.BACKPRESSURE,
        "{link}.overflow",
        "queue",
        _FRAMES + "drops the newest message at its limits (drop_newest)",
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.LOSSY,
        "{link}.loss_probability",
        "link",
        _FRAMES + "on a link without loss and with constant jitter",
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.IDLE_RECEIVER,
        "{link}.jitter_on",
        "jitter_on",
        _FRAMES + "on a link with jitter_on=every_packet (the channel's reader is modelled inside it)",
    ),
    Refusal(
        "connection",
        F.QOS,
        F.IDLE_RECEIVER,
        "{link}.jitter_on",
        "jitter_on",
        "every_packet on a connection with QoS > 0 (the in-flight window's propagation draws jitter for every packet)",
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.SESSIONS,
        "{subscriber}.online_s",
        "subscriber",
        _FRAMES + "to an always connected subscriber (no online_s, no churn)",
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.BUFFER,
        "{subscriber}.buffer_messages",
        "subscriber",
        _FRAMES + "to a subscriber without buffer_messages (the send window bounds what it holds)",
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.CARD,
        "{subscriber}.host",
        "link",
        _FRAMES + "to a subscriber on the broker's host or behind no card (a card after the channel's "
        "reader is not modelled)",
    ),
    Refusal(
        "connection",
        F.FRAMES,
        F.SHARED,
        "{subscriber}.subscriptions",
        "subscriptions",
        _FRAMES + "to a subscriber without $share/ filters (dispatch to frame channels is not modelled)",
    ),
)


def _queue(overflow: str) -> Feature | None:
    return (
        F.BACKPRESSURE
        if overflow == Overflow.BACKPRESSURE
        else None
        if overflow == Overflow.DROP_NEWEST
        else F.QUEUE_POLICY
    )


#: How each feature of a parameter object is detected, per scope.
DETECT: dict[str, dict[Feature, Callable[[Any], bool]]] = {
    "broker": {
        F.BATCHING: lambda p: p.batch_max_messages > 1,
        F.WORKERS: lambda p: p.workers != 1,
        F.CPU_QUOTA: lambda p: p.cpu_quota_cores is not None,
        F.PRIORITY: lambda p: p.scheduling != "fifo",
        F.BACKPRESSURE: lambda p: _queue(p.overflow) is F.BACKPRESSURE,
        F.QUEUE_POLICY: lambda p: _queue(p.overflow) is F.QUEUE_POLICY,
        F.EVENT_QUEUE: lambda p: p.overflow in Overflow.EVENT_DRIVEN,
        F.RESTART: lambda p: p.restart_at_s != (),
        F.CLIENT_PRIORITY: lambda p: p.client_scheduling == "priority",
        F.CLIENT_BACKPRESSURE: lambda p: p.client_overflow == Overflow.BACKPRESSURE,
        F.DISK: lambda p: p.disk is not None,
        F.FRAMES: lambda p: p.client_frame_bytes is not None,
        F.IDLE_EXIT: lambda p: p.idle_exit is not None,
        F.SLEEP_ENTRY: lambda p: p.sleep_entry_s > 0,
        F.WAKE_CURVE: lambda p: p.wake_curve is not None,
        F.SPEED_DRIFT: lambda p: p.speed_drift_log_sd > 0,
        F.QUOTA_TICK: lambda p: p.cpu_tick_s > 0,
    },
    "link": {
        F.PRIORITY: lambda p: p.scheduling == "priority",
        F.BACKPRESSURE: lambda p: _queue(p.overflow) is F.BACKPRESSURE,
        F.QUEUE_POLICY: lambda p: _queue(p.overflow) is F.QUEUE_POLICY,
        F.IDLE_RECEIVER: lambda p: p.idle_receiver,
    },
    "publisher": {
        F.QOS: lambda p: p.qos > 0,
        F.ROUND_ROBIN: lambda p: p.topic_choice == "round_robin",
        F.SCHEDULE: lambda p: p.arrival == "schedule",
        F.TOPIC_WEIGHTS: lambda p: p.topic_weights is not None,
        F.CLOSED_LOOP: lambda p: p.arrival == "closed_loop",
        F.RETAIN: lambda p: bool(p.retain),
        F.WILL: lambda p: bool(p.offline_s),
        F.SERIALIZATION: lambda p: p.serialization is not None,
        F.SEND_MODE: lambda p: p.send_mode != "async",
        F.PRELOADED: lambda p: bool(p.preloaded),
    },
    "subscriber": {
        F.QOS: lambda p: p.qos > 0,
        F.BUFFER: lambda p: p.buffer_messages is not None,
        F.CHURN: lambda p: p.churn_online_mean_s > 0,
        F.SCHEDULE: lambda p: bool(p.online_s),
        F.SESSIONS: lambda p: bool(p.online_s) or p.churn_online_mean_s > 0,
        F.SERIALIZATION: lambda p: p.serialization is not None,
        F.SHARED: lambda p: any(is_shared(f) for f in p.subscriptions),
    },
}


def object_features(obj: Any, scope: str) -> set[Feature]:
    """Features the parameter object ``obj`` of ``scope`` uses."""
    return {f for f, used in DETECT[scope].items() if used(obj)}


def refuse(obj: Any, scope: str) -> None:
    """Raise the error of the first refused pair of ``scope`` that ``obj`` uses.

    Parameters
    ----------
    obj : dataclass instance
        A parameter object (``BrokerParams``, ``LinkParams``, ``PublisherParams``,
        ``SubscriberParams``).
    scope : str
        Its scope in :data:`REFUSED`.
    """
    used = object_features(obj, scope)
    for r in REFUSED:
        if r.scope == scope and r.first in used and r.second in used:
            raise r.error(obj)
