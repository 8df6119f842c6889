"""Parameters of a ZeroMQ sending socket (brokerless PUB/SUB and PUSH/PULL).

The station and its route are in :mod:`pubsim.models.mechanisms.brokerless`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...sim.disciplines import Overflow
from ...sim.distributions import Constant, Distribution
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["ZmqSocketParams", "SOCKET_TYPES"]

SOCKET_TYPES = ("pub", "push")

_ZERO = Constant(value=0.0)


@dataclass(frozen=True, kw_only=True)
class ZmqSocketParams:
    """A ZeroMQ sending socket on a publisher's host.

    Demand of one message at the socket (seconds of the publisher host's
    I/O thread)::

        send + copies * copy + per_byte * size * copies

    where ``copies`` is the number of connected peers whose subscription
    prefix matches the topic (PUB) or 1 (PUSH). Messages are served in
    batches (``batch_*``, see :class:`pubsim.sim.disciplines.BatchDiscipline`).

    Parameters
    ----------
    socket_type : str
        ``pub`` (fan-out to matching peers; a full pipe drops) or ``push``
        (one peer; a full pipe blocks the sender).
    send_cost_s : Distribution
        Cost per message sent, s.
    copy_cost_s : Distribution
        Cost per copy into a peer's pipe (matching, enqueue, write), s.
    per_byte_cost_s : float
        Cost per payload byte per copy, s/byte.
    idle_wakeup_cost_s : float
        Extra cost of a batch that finds the I/O thread idle (wake-up), s.
    sndhwm : int
        High-water mark of each peer's pipe, messages (ZMQ_SNDHWM, libzmq
        default 1000; 0 = no limit as in libzmq).
    batch_max_messages : int
        Most messages per write (1 = no batching).
    batch_fixed_cost_s : float
        Cost per write (system call), s.
    batch_max_bytes : int or None
        Most payload bytes per write (libzmq ``out_batch_size`` 8192).
    provenance : Provenance
    """

    socket_type: str = field(default="pub", metadata={"unit": "choice", "choices": SOCKET_TYPES})
    send_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    copy_cost_s: Distribution = field(default=_ZERO, metadata={"unit": "duration_dist"})
    per_byte_cost_s: float = field(default=0.0, metadata={"unit": "float"})
    idle_wakeup_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    sndhwm: int = field(default=1000, metadata={"unit": "count"})
    batch_max_messages: int = field(default=1, metadata={"unit": "positive_count"})
    batch_fixed_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    batch_max_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def topic_syntax(self) -> str:
        """ZeroMQ subscriptions are byte prefixes."""
        return "prefix"

    @property
    def overflow(self) -> str:
        """What a full pipe does: PUB drops the newest, PUSH blocks the sender."""
        return Overflow.BACKPRESSURE if self.socket_type == "push" else Overflow.DROP_NEWEST

    @property
    def hwm_messages(self) -> int | None:
        """The pipe's queue limit, messages (None: no limit)."""
        return None if self.sndhwm == 0 else self.sndhwm
