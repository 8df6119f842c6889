"""What a load run is: :class:`LoadSpec`, the workload (topics, subscriptions) and the pacing.

See :mod:`pubsim.calibration.harness.loadgen` for the workload, the payload
and the pacing rules these functions implement.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ....sim.errors import ConfigError
from ...workload import (  # noqa: F401 - topic_name, idle_filter_names re-exported for the roles
    IDLE_TOPIC,
    idle_filter_names,
    topic_assignment,
    topic_name,
)
from .records import HEADER_BYTES

__all__ = [
    "PROTOCOLS",
    "ZMQ_MODES",
    "BATCH_INTERVAL_S",
    "MAX_BATCH",
    "QOS2_WINDOW",
    "max_batch_for",
    "HarnessError",
    "PublisherBlocked",
    "LoadSpec",
    "topic_of",
    "subscriber_topics",
    "batch_size",
    "pacing_batch",
]

PROTOCOLS = ("mqtt", "nats", "zmq")
ZMQ_MODES = ("proxy", "direct")

_MAX_BATCH_BYTES = 256 * 1024
BATCH_INTERVAL_S = 0.001  # default pacing interval of a publisher, s
MAX_BATCH = 256  # default largest batch, messages
MAX_IDLE_FILTERS = 1_000_000  # most idle subscriptions a run installs
#: Most QoS 2 exchanges a publisher leaves unreleased (PUBLISH sent, PUBREC not yet answered):
#: Mosquitto's max_inflight_messages default (mosquitto.conf(5)), beyond which it closes an MQTT
#: 3.1.1 connection (its test/broker/03-publish-qos2-max-inflight-exceeded.py); also Paho's default.
QOS2_WINDOW = 20


class HarnessError(RuntimeError):
    """A client process failed or did not get ready in time."""


class PublisherBlocked(HarnessError):
    """A publisher did not finish its run within the run's deadline (30 s past
    its end): the broker stopped reading its socket, e.g. RabbitMQ's memory
    alarm blocking publishers after a run far past its limit. The load was
    not sustained."""


class SetupTimeout(HarnessError):
    """A client did not get ready within the set-up time: its connection or
    subscription was not answered, e.g. by a broker still working off the
    backlog of a run past its limit."""


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True, kw_only=True)
class LoadSpec:
    """One load run (see the module docstring for the workload and the pacing).

    Parameters
    ----------
    protocol : str
        ``"mqtt"``, ``"nats"`` or ``"zmq"``.
    rate_per_s : float
        Offered load over all publishers, msg/s (split evenly).
    duration_s, warmup_s, cooldown_s : float
        Publishing time, s; messages sent in the first ``warmup_s`` and the
        last ``cooldown_s`` are not counted.
    pub_port, sub_port : int or None
        Broker ports for publishers and subscribers (MQTT / NATS: one port,
        ``sub_port`` defaults to ``pub_port``; ZeroMQ proxy: the XSUB and
        XPUB ports; ZeroMQ direct: unused).
    host : str
    publishers, subscribers : int
        Client processes (>= 1 each).
    topics, fanout : int
        Topic count and subscribers per topic (``fanout <= subscribers``).
    payload_bytes : int
        >= 20 (the header).
    qos : int
        MQTT QoS of publications and subscriptions (0, 1 or 2; 0 for the others).
    idle_filters : int
        Subscriptions installed besides the workload's, on topics nobody
        publishes to (:func:`pubsim.calibration.workload.idle_filter_names`):
        subscriber 0 subscribes to them at set-up, so the broker matches
        every message with that many more subscriptions installed and no
        connection more; 0..1,000,000. Through a ZeroMQ proxy keep them
        below the proxy's high-water mark (or set it to 0): libzmq's XSUB
        resends its subscriptions to each publisher that connects through a
        pipe bounded by its ``SNDHWM`` and drops the rest (``xsub.cpp``
        ``send_subscription``), in the trie's order, so the workload's own
        filters (``pubsim/t...`` after ``pubsim/i...``) are lost first
        (measured: 990 pass, 1,100 time out at the default 1,000).
    pub_cpus, sub_cpus : tuple of int or None
        CPU sets (``os.sched_setaffinity``) of the publisher and subscriber
        processes.
    drain_s : float or None
        Fixed wait after the last send; None: adaptive (module docstring).
    max_drain_s : float
        Upper bound of the adaptive drain.
    batch_interval_s : float
        Target time between a publisher's batches (pacing granularity).
    max_batch : int
        Most messages per batch (a publisher behind schedule sends batches
        back to back).
    zmq_mode : str
        ``"proxy"`` or ``"direct"``.
    zmq_hwm : int
        ZMQ_SNDHWM / ZMQ_RCVHWM, messages (0: unlimited).
    setup_timeout_s : float
        Time allowed for connecting, subscribing and the probe round.
    mqtt_username, mqtt_password : str or None
        MQTT CONNECT credentials (None: none sent; ejabberd's mod_mqtt
        needs a password even for anonymous login).
    kernel_timestamps : bool
        MQTT, NATS and ZeroMQ-proxy subscribers ask the kernel for the
        receive time of every read (``SO_TIMESTAMPNS``), so that latency is
        measured to the message's arrival at the subscriber's socket and the
        subscriber's own delay is reported apart (:mod:`.subscriber`; the
        ZeroMQ subscribers then speak ZMTP themselves,
        :mod:`pubsim.calibration.harness.zmtpwire`, instead of through
        pyzmq). False: only the time the subscriber's code read the message,
        with pyzmq SUB sockets (the rule before issue 18).
    """

    protocol: str
    rate_per_s: float
    duration_s: float
    warmup_s: float = 0.0
    cooldown_s: float = 0.0
    pub_port: int | None = None
    sub_port: int | None = None
    host: str = "127.0.0.1"
    publishers: int = 1
    subscribers: int = 1
    topics: int = 1
    fanout: int = 1
    payload_bytes: int = 64
    qos: int = 0
    idle_filters: int = 0
    pub_cpus: tuple | None = None
    sub_cpus: tuple | None = None
    drain_s: float | None = None
    max_drain_s: float = 10.0
    batch_interval_s: float = BATCH_INTERVAL_S
    max_batch: int = MAX_BATCH
    zmq_mode: str = "proxy"
    zmq_hwm: int = 1000
    setup_timeout_s: float = 20.0
    mqtt_username: str | None = None
    mqtt_password: str | None = None
    kernel_timestamps: bool = True

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise ConfigError("protocol", self.protocol, f"one of {', '.join(PROTOCOLS)}")
        for name in ("publishers", "subscribers", "topics", "fanout"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= 65535:
                raise ConfigError(name, v, "an integer in 1..65535")
        if self.fanout > self.subscribers:
            raise ConfigError("fanout", self.fanout, f"at most subscribers ({self.subscribers})")
        if not _is_int(self.payload_bytes) or not HEADER_BYTES <= self.payload_bytes <= 256 * 2**20:
            raise ConfigError(
                "payload_bytes",
                self.payload_bytes,
                f"an integer in {HEADER_BYTES}..{256 * 2**20} (the header takes {HEADER_BYTES})",
            )
        if self.qos not in (0, 1, 2) or isinstance(self.qos, bool):
            raise ConfigError("qos", self.qos, "0, 1 or 2")
        if self.qos and self.protocol != "mqtt":
            raise ConfigError("qos", self.qos, f"0 for protocol {self.protocol} (QoS 1 and 2 are MQTT only)")
        if not _is_int(self.idle_filters) or not 0 <= self.idle_filters <= MAX_IDLE_FILTERS:
            raise ConfigError("idle_filters", self.idle_filters, f"an integer in 0..{MAX_IDLE_FILTERS}")
        if not _is_num(self.rate_per_s) or self.rate_per_s <= 0:
            raise ConfigError("rate_per_s", self.rate_per_s, "a finite rate > 0 msg/s")
        for name in ("duration_s", "warmup_s", "cooldown_s"):
            v = getattr(self, name)
            if not _is_num(v) or v < 0:
                raise ConfigError(name, v, "a finite number of seconds >= 0")
        if self.warmup_s + self.cooldown_s >= self.duration_s:
            raise ConfigError("warmup_s", self.warmup_s, f"warmup + cooldown < duration ({self.duration_s} s)")
        if self.drain_s is not None and (not _is_num(self.drain_s) or self.drain_s < 0):
            raise ConfigError("drain_s", self.drain_s, "None or a finite number of seconds >= 0")
        for name in ("max_drain_s", "setup_timeout_s", "batch_interval_s"):
            v = getattr(self, name)
            if not _is_num(v) or v <= 0:
                raise ConfigError(name, v, "a finite number of seconds > 0")
        if not _is_int(self.max_batch) or self.max_batch < 1:
            raise ConfigError("max_batch", self.max_batch, "an integer >= 1")
        if self.zmq_mode not in ZMQ_MODES:
            raise ConfigError("zmq_mode", self.zmq_mode, "'proxy' or 'direct'")
        if not _is_int(self.zmq_hwm) or self.zmq_hwm < 0:
            raise ConfigError("zmq_hwm", self.zmq_hwm, "an integer >= 0 (0: no limit)")
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError("host", self.host, "a host name or address")
        if not isinstance(self.kernel_timestamps, bool):
            raise ConfigError("kernel_timestamps", self.kernel_timestamps, "true or false")
        for name in ("mqtt_username", "mqtt_password"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ConfigError(name, getattr(self, name), "a string or None")
        if self.mqtt_password is not None and self.mqtt_username is None:
            raise ConfigError("mqtt_password", "***", "only with mqtt_username (MQTT 3.1.1)")
        need = {
            "mqtt": ("pub_port",),
            "nats": ("pub_port",),
            "zmq": ("pub_port", "sub_port") if self.zmq_mode == "proxy" else (),
        }[self.protocol]
        for name in ("pub_port", "sub_port"):
            v = getattr(self, name)
            if v is None:
                if name in need:
                    raise ConfigError(
                        name,
                        v,
                        f"a TCP port in 1..65535 for protocol {self.protocol}"
                        + (f" ({self.zmq_mode} mode)" if self.protocol == "zmq" else ""),
                    )
            elif not _is_int(v) or not 1 <= v <= 65535:
                raise ConfigError(name, v, "a TCP port in 1..65535")
        try:
            allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):  # pragma: no cover - non-Linux
            allowed = None
        for name in ("pub_cpus", "sub_cpus"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, list):
                object.__setattr__(self, name, tuple(v))
                v = tuple(v)
            if not isinstance(v, tuple) or not v or not all(_is_int(c) and c >= 0 for c in v):
                raise ConfigError(name, v, "None or a non-empty tuple of CPU numbers")
            if allowed is not None and not set(v) <= allowed:
                raise ConfigError(name, v, f"CPUs this process may use: {sorted(allowed)}")

    @property
    def window_s(self):
        return self.duration_s - self.warmup_s - self.cooldown_s

    @property
    def sub_port_effective(self):
        return self.pub_port if self.sub_port is None and self.protocol != "zmq" else self.sub_port


def topic_of(publisher: int, seq, topics: int):
    """Topic index of message ``seq`` of ``publisher``: ``(seq + publisher) mod topics``.

    Works elementwise on integer arrays (``seq``, ``publisher``) too.
    """
    return (seq + publisher) % topics


def subscriber_topics(spec: LoadSpec) -> list[list[int]]:
    """Topic indices of every subscriber of ``spec`` (``[]`` for an idle one)."""
    _, filters = topic_assignment(
        publishers=spec.publishers, subscribers=spec.subscribers, topics=spec.topics, fanout=spec.fanout
    )
    return [[int(f.rsplit("/t", 1)[1]) for f in fs if f != IDLE_TOPIC] for fs in filters]


def batch_size(spec: LoadSpec) -> int:
    """Messages per batch of one publisher of ``spec`` (package docstring, Pacing); at QoS 2 at most
    :data:`QOS2_WINDOW`, the exchanges it may leave open."""
    return pacing_batch(
        spec.rate_per_s / spec.publishers,
        spec.payload_bytes,
        spec.topics,
        max_batch=max_batch_for(spec.qos, spec.max_batch),
        batch_interval_s=spec.batch_interval_s,
    )


def max_batch_for(qos: int, max_batch: int = MAX_BATCH) -> int:
    """Most messages per batch at ``qos``: at QoS 2 no more than :data:`QOS2_WINDOW`, the exchanges a
    publisher may leave open (the simulated twin batches as the load generator does)."""
    return min(max_batch, QOS2_WINDOW) if qos == 2 else max_batch


def pacing_batch(
    rate_per_s: float,
    payload_bytes: int,
    topics: int,
    *,
    max_batch: int = MAX_BATCH,
    batch_interval_s: float = BATCH_INTERVAL_S,
) -> int:
    """Messages per batch of one publisher (package docstring, Pacing).

    Parameters
    ----------
    rate_per_s : float
        That publisher's rate, msg/s.
    payload_bytes : int
        Message payload, bytes (a batch holds at most 256 KiB of packets,
        counting 64 bytes of framing per message).
    topics : int
        Topics it cycles over.
    max_batch : int
        Most messages per batch.
    batch_interval_s : float
        Target time between batches, s.

    Returns
    -------
    int
        Messages per batch, a multiple or a divisor of ``topics``.
    """
    pkt = payload_bytes + 64
    cap = max(1, min(max_batch, _MAX_BATCH_BYTES // pkt))
    b = int(min(max(1, round(rate_per_s * batch_interval_s)), cap))
    t = topics
    if b >= t:
        return b - b % t
    return max(d for d in range(1, b + 1) if t % d == 0)
