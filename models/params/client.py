"""Publisher and subscriber parameters.

A publisher emits messages at constant rate, as a Poisson process, or from an
explicit schedule of (time, size, topic); sizes come from a distribution and
topics from a weighted choice. A subscriber holds subscription filters, a
processing time per message and a receive buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...sim.distributions import Constant, Distribution
from ...sim.errors import ConfigError
from ...sim.units import parse_durations_s, parse_sizes_bytes
from .features import refuse
from .mapping import check_fields
from .provenance import ASSUMED, Provenance
from .serialization import SerializationParams
from .topics import split_shared

__all__ = ["PublisherParams", "SubscriberParams", "ARRIVALS", "SEND_MODES", "TOPIC_CHOICES", "check_intervals"]

ARRIVALS = ("poisson", "constant", "schedule", "closed_loop")
#: How a producer sends (:mod:`pubsim.models.mechanisms.persistence.sending`).
SEND_MODES = ("async", "sync", "confirms", "transactions")
TOPIC_CHOICES = ("weighted", "round_robin")


@dataclass(frozen=True, kw_only=True)
class PublisherParams:
    """A publishing client.

    Parameters
    ----------
    topics : tuple of str
        Topics it publishes to.
    arrival : str
        ``poisson``, ``constant`` (random phase in the first period),
        ``schedule`` (explicit arrays) or ``closed_loop`` (request/reply with
        a window: request i is sent when the reply to request i - W came
        back, plus ``think_time_s``; :mod:`pubsim.models.mechanisms.patterns.reqrep`).
    rate_per_s : float
        Mean messages per second (poisson, constant).
    size_bytes : Distribution
        Payload size, bytes (rounded to whole bytes).
    topic_weights : tuple of float or None
        Relative frequency of each topic; None = equal.
    start_s : float
        Time of the first possible publication, s.
    schedule_time_s, schedule_size_bytes, schedule_topic : tuple
        The explicit schedule (``arrival="schedule"``): times must not decrease.
    priority : int
        Message priority, higher first (YAMI4 uses 0..2); only brokers with
        ``scheduling="priority"`` look at it.
    qos : int
        Publish QoS 0, 1 or 2 (AMQP: 1 = publisher confirms); see :mod:`pubsim.models.mechanisms.qos.rules`.
    inflight_messages : int
        Most un-acknowledged QoS > 0 messages on its connection (0 = no
        limit). Default 20: Eclipse Paho Python ``max_inflight_messages_set``
        default (AMQP publisher confirms have no such limit: set 0).
    retry_timeout_s : float
        Resend an unacknowledged packet after this time, s. Default 20 s:
        Mosquitto's historical ``retry_interval`` (mosquitto.conf(5), 1.x).
    retain : bool
        Its messages are retained by the broker (last one per topic, sent
        to subscribers when they connect; see :mod:`pubsim.models.mechanisms.sessions.sessions`).
    offline_s : tuple
        Outages ``((disconnect_s, reconnect_s), ...)``: unexpected
        disconnects, nothing published until the reconnect (see :mod:`pubsim.models.mechanisms.sessions.will`).
    will_topic : str
        Topic of its Will message, published by the broker at each
        unexpected disconnect; "" = none.
    will_size_bytes : float
        Payload of the Will message, bytes.
    will_delay_s : float
        Time from the disconnect to the Will's publication, s (0: TCP reset;
        keep-alive detection takes up to 1.5 x keep-alive).
        Message priority, higher first (YAMI4 uses 0 = lowest .. 2 =
        highest; any integer >= 0 is accepted); only priority queues (a
        broker with ``scheduling="priority"``, a priority link or client
        queue) look at it.
    topic_priorities : tuple of int or None
        One priority per topic (a YAMI4 publisher sending priorities 0, 2, 1
        on one connection); None = ``priority`` for every topic.
    topic_choice : str
        ``weighted`` (random by ``topic_weights``) or ``round_robin``:
        consecutive messages cycle through ``topics`` in order, as a ZeroMQ
        PUSH socket deals messages to its PULL peers (one topic per puller).
    window_requests : int
        W, requests outstanding at most (``closed_loop``); the first W are
        sent at ``start_s``.
    think_time_s : float
        Time from a reply to the request it releases, s (``closed_loop``).
    request_timeout_s : float
        ``closed_loop``: a request not answered ``request_timeout_s`` after it
        was sent is sent again (and again after each further timeout); the
        first reply to any copy answers it, later ones are counted as late
        replies (:mod:`pubsim.models.mechanisms.patterns.reqrep`). 0 (the
        default) = no timeout: a lost request or reply closes its window slot.
    serialization : SerializationParams or None
        Message format (:mod:`pubsim.models.params.serialization`): payload sizes are
        multiplied by its ``size_ratio`` and encoding takes the publisher's
        CPU before the uplink; None = no serialization stage.
    persistent : bool
        Persistent (durable) messages (AMQP delivery mode 2): at a broker
        with a disk they are written and synced before delivery
        (:mod:`pubsim.models.mechanisms.persistence.disk`).
    send_mode : str
        How the producer sends (:mod:`pubsim.models.mechanisms.persistence.sending`):
        ``async`` (default: at its own arrival times), ``sync`` (each send
        waits for the broker's confirm, i.e. its sync to disk, before the
        next: a JMS persistent send), ``confirms`` (pipelined publisher
        confirms: at most ``window_requests`` unconfirmed) or
        ``transactions`` (``transaction_messages`` sends, then a commit
        that waits for all of them). Not ``async`` needs ``arrival:
        closed_loop``; the confirm comes when the message is durable (it
        leaves the first broker's disk; without a disk, that broker) and
        returns over the uplink's latency, whoever consumes it.
    transaction_messages : int
        N, messages per transaction (``send_mode: transactions``).
    preloaded : bool
        Its messages are already in the broker's store when they arrive (a
        backlog stored before the run: the consume phase of a benchmark):
        persistent ones skip the write and are read back on consumption
        when the backlog exceeds the store's memory. Needs ``persistent``.
    provenance : Provenance
    """

    topics: tuple = field(metadata={"unit": "strings"})
    arrival: str = field(default="poisson", metadata={"unit": "choice", "choices": ARRIVALS})
    rate_per_s: float = field(default=0.0, metadata={"unit": "rate"})
    size_bytes: Distribution = field(default=Constant(value=0.0), metadata={"unit": "size_dist"})
    topic_weights: tuple | None = field(default=None, metadata={"unit": "raw"})
    start_s: float = field(default=0.0, metadata={"unit": "duration"})
    schedule_time_s: tuple = field(default=(), metadata={"unit": "raw"})
    schedule_size_bytes: tuple = field(default=(), metadata={"unit": "raw"})
    schedule_topic: tuple = field(default=(), metadata={"unit": "raw"})
    priority: int = field(default=0, metadata={"unit": "count"})
    qos: int = field(default=0, metadata={"unit": "count"})
    inflight_messages: int = field(default=20, metadata={"unit": "count"})
    retry_timeout_s: float = field(default=20.0, metadata={"unit": "duration"})
    retain: bool = field(default=False, metadata={"unit": "flag"})
    offline_s: tuple = field(default=(), metadata={"unit": "raw"})
    will_topic: str = field(default="", metadata={"unit": "raw"})
    will_size_bytes: float = field(default=0.0, metadata={"unit": "size"})
    will_delay_s: float = field(default=0.0, metadata={"unit": "duration"})
    topic_priorities: tuple | None = field(default=None, metadata={"unit": "raw"})
    topic_choice: str = field(default="weighted", metadata={"unit": "choice", "choices": TOPIC_CHOICES})
    window_requests: int = field(default=1, metadata={"unit": "positive_count"})
    think_time_s: float = field(default=0.0, metadata={"unit": "duration"})
    request_timeout_s: float = field(default=0.0, metadata={"unit": "duration"})
    serialization: SerializationParams | None = field(default=None, metadata={"unit": "serialization"})
    persistent: bool = field(default=False, metadata={"unit": "flag"})
    send_mode: str = field(default="async", metadata={"unit": "choice", "choices": SEND_MODES})
    transaction_messages: int = field(default=1, metadata={"unit": "positive_count"})
    preloaded: bool = field(default=False, metadata={"unit": "flag"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        _check_qos(self)
        _check_send_mode(self)
        if self.arrival == "closed_loop" and len(self.topics) != 1:
            raise ConfigError("topics", self.topics, "one request topic with arrival closed_loop")
        refuse(self, "publisher")  # pairs of features that do not combine (models.params.features)
        if not self.topics:
            raise ConfigError("topics", self.topics, "at least one topic")
        if self.arrival not in ("schedule", "closed_loop") and not self.rate_per_s > 0:
            raise ConfigError("rate_per_s", self.rate_per_s, "a rate > 0")
        if self.topic_weights is not None:
            w = np.asarray(self.topic_weights, dtype=float)
            if w.shape != (len(self.topics),) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise ConfigError(
                    "topic_weights",
                    self.topic_weights,
                    f"{len(self.topics)} finite non-negative weights, not all zero",
                )
        if self.arrival == "schedule":
            self._check_schedule()
        self._check_outages()
        if self.topic_priorities is not None:
            self._check_topic_priorities()

    def _check_outages(self) -> None:
        try:
            pairs = np.asarray(check_intervals(self.offline_s)).T
        except ConfigError as err:
            raise ConfigError("offline_s", self.offline_s, err.expected) from None
        object.__setattr__(self, "offline_s", tuple(tuple(float(x) for x in p) for p in pairs))
        if not isinstance(self.will_topic, str):
            raise ConfigError("will_topic", self.will_topic, "a topic name (or empty)")

    def _check_topic_priorities(self) -> None:
        p = self.topic_priorities
        if not (
            isinstance(p, (tuple, list))
            and len(p) == len(self.topics)
            and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0 for x in p)
        ):
            raise ConfigError("topic_priorities", p, f"{len(self.topics)} integers >= 0, one per topic")
        object.__setattr__(self, "topic_priorities", tuple(int(x) for x in p))

    def flow_priority(self, topic: str) -> int:
        """Priority of this publisher's messages on ``topic``."""
        if self.topic_priorities is None:
            return self.priority
        return self.topic_priorities[self.topics.index(topic)]

    def _check_schedule(self) -> None:
        times = _schedule_list(self, "schedule_time_s", parse_durations_s)
        _schedule_list(self, "schedule_size_bytes", parse_sizes_bytes)
        _schedule_list(self, "schedule_topic", _topic_list)
        t = np.asarray(times, dtype=float)
        n = len(t)
        if len(self.schedule_size_bytes) != n or len(self.schedule_topic) != n:
            raise ConfigError(
                "schedule",
                f"{n} times, {len(self.schedule_size_bytes)} sizes, {len(self.schedule_topic)} topics",
                "arrays of equal length",
            )
        if n and (np.any(np.diff(t) < 0) or t[0] < 0 or not np.all(np.isfinite(t))):
            raise ConfigError("schedule_time_s", "unsorted or negative", "finite times >= 0 in order")
        unknown = set(self.schedule_topic) - set(self.topics)
        if unknown:
            raise ConfigError("schedule_topic", sorted(unknown)[0], f"one of topics {list(self.topics)}")

    @property
    def mean_rate_per_s(self) -> float:
        if self.arrival == "schedule":
            t = self.schedule_time_s
            return len(t) / max(t[-1] - t[0], 1e-9) if len(t) > 1 else 0.0
        return self.rate_per_s


def _not_topic(value: Any, field: str) -> str:
    raise ConfigError(field, value, "a topic name (a string)")


def _topic_list(values: Any, field: str) -> tuple:
    if set(map(type, values)) <= {str}:  # C-speed check of a long trace's topics
        return tuple(values)
    return tuple(v if isinstance(v, str) else _not_topic(v, f"{field}[{i}]") for i, v in enumerate(values))


def _schedule_list(p: PublisherParams, name: str, read: Callable[[Any, str], tuple]) -> tuple:
    """Read a schedule list field (a bad item is a one-line error naming ``name[i]``); store it as a tuple."""
    values = getattr(p, name)
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, np.ndarray)):
        raise ConfigError(name, values, "a list")
    out = read(values, name)
    object.__setattr__(p, name, out)
    return out


@dataclass(frozen=True, kw_only=True)
class SubscriberParams:
    """A subscribing client.

    Parameters
    ----------
    subscriptions : tuple of str
        Topic filters, in the broker's syntax. ``$share/{group}/{filter}``
        makes it a member of a share group (MQTT 5 shared subscription; with
        AMQP, a consumer of the queue ``group`` bound with ``filter``): each
        matching message goes to one member (:mod:`pubsim.models.mechanisms.shared`).
    processing_s : Distribution
        Time to handle one message, s (a FIFO server).
    buffer_messages : int or None
        Receive buffer (messages waiting plus the one being handled);
        overflow drops the newest.
    qos : int
        Granted QoS 0, 1 or 2 of its subscriptions (AMQP: 1 = manual acks).
        With QoS > 0 it acknowledges after processing, so its receive buffer
        is the in-flight window (leave ``buffer_messages`` unset).
    inflight_messages : int or None
        In-flight window of its connection (AMQP ``basic.qos`` prefetch
        count); None = the broker's ``max_inflight_messages``.
    online_s : tuple
        Connection intervals ``((connect_s, disconnect_s), ...)``, ordered
        and disjoint; empty = always online (see :mod:`pubsim.models.mechanisms.sessions.sessions`).
    clean_session : bool
        True: copies published while it is offline are not owed. False:
        QoS > 0 copies wait at the broker until it reconnects.
    churn_online_mean_s, churn_offline_mean_s : float
        Mean online / offline periods of a churn process (exponential,
        seeded per subscriber, online first); 0 = no churn.
    serialization : SerializationParams or None
        Format it decodes: its decode cost is added to ``processing_s``;
        None = no decoding stage.
    provenance : Provenance
    """

    subscriptions: tuple = field(metadata={"unit": "strings"})
    processing_s: Distribution = field(default=Constant(value=0.0), metadata={"unit": "duration_dist"})
    buffer_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    qos: int = field(default=0, metadata={"unit": "count"})
    inflight_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    online_s: tuple = field(default=(), metadata={"unit": "raw"})
    clean_session: bool = field(default=True, metadata={"unit": "flag"})
    churn_online_mean_s: float = field(default=0.0, metadata={"unit": "duration"})
    churn_offline_mean_s: float = field(default=0.0, metadata={"unit": "duration"})
    serialization: SerializationParams | None = field(default=None, metadata={"unit": "serialization"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        _check_qos(self)
        for f in self.subscriptions:
            split_shared(f)  # one-line error for a malformed $share/{group}/{filter}
        self._check_sessions()

    def _check_sessions(self) -> None:
        object.__setattr__(
            self,
            "online_s",
            tuple(tuple(float(x) for x in pair) for pair in np.asarray(check_intervals(self.online_s)).T),
        )
        if (self.churn_online_mean_s > 0) != (self.churn_offline_mean_s > 0):
            raise ConfigError(
                "churn_offline_mean_s",
                self.churn_offline_mean_s,
                "> 0 together with churn_online_mean_s (both or neither)",
            )
        refuse(self, "subscriber")  # pairs of features that do not combine (models.params.features)
        if not self.subscriptions:
            raise ConfigError("subscriptions", self.subscriptions, "at least one topic filter")


def _check_send_mode(p: PublisherParams) -> None:
    """A producer waiting for confirms is a closed loop; sync waits for one message at a time."""
    if p.send_mode == "async":
        if p.transaction_messages != 1:
            raise ConfigError("transaction_messages", p.transaction_messages, "1 unless send_mode is transactions")
    elif p.arrival != "closed_loop":
        raise ConfigError("arrival", p.arrival, f"closed_loop with send_mode {p.send_mode} (confirms pace the sends)")
    elif p.send_mode == "sync" and p.window_requests != 1:
        raise ConfigError("window_requests", p.window_requests, "1 with send_mode sync (one send at a time)")
    elif p.send_mode == "transactions" and p.window_requests != 1:
        raise ConfigError("window_requests", p.window_requests, "1 with send_mode transactions (one open transaction)")
    elif p.send_mode == "transactions" and p.request_timeout_s > 0:
        raise ConfigError("request_timeout_s", p.request_timeout_s, "0 with send_mode transactions (no resend)")
    if p.preloaded and not p.persistent:
        raise ConfigError("preloaded", p.preloaded, "false unless persistent (only stored messages are preloaded)")


def _check_qos(params: PublisherParams | SubscriberParams) -> None:
    if params.qos not in (0, 1, 2):
        raise ConfigError("qos", params.qos, "0, 1 or 2")


def check_intervals(online_s: Any) -> tuple[np.ndarray, np.ndarray]:
    """``online_s`` as two float arrays (connect, disconnect), checked."""
    try:
        pairs = np.asarray(online_s, dtype=float).reshape(-1, 2)
    except (TypeError, ValueError):
        raise ConfigError("online_s", online_s, "a list of [connect_s, disconnect_s] pairs") from None
    c, d = pairs[:, 0], pairs[:, 1]
    # NaN compares false: without the isnan test a NaN disconnect time passed every check (a fuzz finding)
    if np.any(~np.isfinite(c)) or np.any(np.isnan(d)) or np.any(c < 0) or np.any(d <= c) or np.any(c[1:] < d[:-1]):
        raise ConfigError(
            "online_s", online_s, "ordered, non-overlapping [connect_s, disconnect_s) with connect < disconnect"
        )
    return c.copy(), d.copy()
