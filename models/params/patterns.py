"""Parameters of the messaging patterns: push/pull acknowledgements, polling, request/reply servers.

The models are in :mod:`pubsim.models.mechanisms.patterns`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...sim.distributions import Constant, Distribution
from ...sim.errors import ConfigError
from .mapping import MAX_WORKERS, check_fields
from .provenance import ASSUMED, Provenance
from .serialization import SerializationParams

__all__ = ["AckParams", "PollingParams", "ReplyParams"]


@dataclass(frozen=True, kw_only=True)
class AckParams:
    """The acknowledgement a worker returns for each command.

    Parameters
    ----------
    ack_bytes : int
        Bytes of one ack at the middleware layer (MQTT PUBACK: 4).
    ack_cost_s : float
        Broker CPU to relay one ack, s (0 for brokerless ZeroMQ).
    provenance : Provenance
    """

    ack_bytes: int = field(default=4, metadata={"unit": "size"})
    ack_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class PollingParams:
    """A polling client and the sensor it polls.

    Parameters
    ----------
    poll_interval_s : float
        Time between two requests, s (> 0).
    sample_interval_s : float
        Time between two sensor samples, s (> 0).
    request_delay_s, reply_delay_s : float
        One-way delays client -> sensor and back, s, used when no simulated
        request path gives the read times (an assumption; see provenance).
    provenance : Provenance
    """

    poll_interval_s: float = field(metadata={"unit": "duration"})
    sample_interval_s: float = field(metadata={"unit": "duration"})
    request_delay_s: float = field(default=0.0, metadata={"unit": "duration"})
    reply_delay_s: float = field(default=0.0, metadata={"unit": "duration"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("poll_interval_s", "sample_interval_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(name, getattr(self, name), "an interval > 0 s")


@dataclass(frozen=True, kw_only=True)
class ReplyParams:
    """What a request/reply server does between a request and its reply.

    Set as a broker's ``reply`` (``BrokerParams.reply``), it makes the broker
    a server for request/reply clients (``arrival="closed_loop"``): after the
    broker's own demand, each request is handled by the server stage
    (:mod:`pubsim.models.mechanisms.patterns.server`) and leaves as the reply.

    Parameters
    ----------
    size_bytes : Distribution or None
        Reply payload before serialization, bytes; None = the request's size
        (the symmetric model of earlier versions).
    server_s : Distribution
        Server processing time per request, s (application work between
        receiving the request and sending the reply).
    serialization : SerializationParams or None
        The server's message format: it decodes each request
        (``decode_cost_s + decode_cost_per_byte_s x request bytes``) and
        encodes each reply (``encode_cost_s + encode_cost_per_byte_s x reply
        bytes``, the reply's size multiplied by ``size_ratio``). The request's
        own encoding is its client's ``serialization`` and the reply's
        decoding the reply subscriber's.
    workers : int
        Requests the server handles at once (FIFO workers).
    queue_messages : int or None
        Limit of the server's input queue (waiting plus in service); None = unlimited.
    provenance : Provenance
    """

    size_bytes: Distribution | None = field(default=None, metadata={"unit": "optional_size_dist"})
    server_s: Distribution = field(default=Constant(value=0.0), metadata={"unit": "duration_dist"})
    serialization: SerializationParams | None = field(default=None, metadata={"unit": "serialization"})
    workers: int = field(default=1, metadata={"unit": "positive_count", "max": MAX_WORKERS})
    queue_messages: int | None = field(default=None, metadata={"unit": "optional_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if self.size_bytes is not None and self.size_bytes.min_value < 0:
            raise ConfigError("size_bytes", str(self.size_bytes), "a reply size distribution of bytes >= 0")
        if self.server_s.min_value < 0:
            raise ConfigError("server_s", str(self.server_s), "a processing time distribution of s >= 0")
