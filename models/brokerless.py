"""Brokerless ZeroMQ PUB/SUB and PUSH/PULL: sender-side fan-out, prefix filters, HWM.

In ZeroMQ (libzmq 4.x) there is no broker: each subscriber connects to every
publisher, and the publisher's PUB socket keeps one *pipe* per connected
peer. A message is matched against the subscriptions the peers sent (byte
prefixes: a subscription ``"a"`` takes every message whose first bytes are
``a``) and copied into the pipe of each matching peer, so the fan-out cost
is paid on the publisher's host. A pipe holds at most ``ZMQ_SNDHWM``
messages (default 1000): beyond it a PUB socket drops the message for that
peer, a PUSH socket blocks the sender (ZeroMQ guide, ch. 2 "High-Water
Marks"; zmq_setsockopt(3)). libzmq's I/O thread writes every message queued
in a pipe in one ``send()`` call, up to ``out_batch_size`` = 8192 bytes
(libzmq src/config.hpp; ZeroMQ guide ch. 1, "message batching"): the
automatic batching of :class:`pubsim.sim.disciplines.BatchDiscipline`.

Graph representation (:mod:`pubsim.models.topology`): a node of kind ``socket``
(params :class:`ZmqSocketParams`) per publisher, linked to its publisher
(the in-process hand-off, a free link by default) and to every subscriber
that connects to it (the peer pipe: a link whose transmit queue is the
HWM). Subscribers in a brokerless topology link to one or more sockets
instead of one broker. Stations: the publisher's hand-off link, the socket
(send cost + per-copy cost + per-byte cost, batched), one pipe link per
(socket, matching subscriber), the subscriber.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..sim.disciplines import Overflow
from ..sim.distributions import Constant, Distribution
from ..sim.errors import ConfigError
from ..sim.station import Station

from .params import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["ZmqSocketParams", "SocketStation", "SOCKET_TYPES"]

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

    def __post_init__(self):
        check_fields(self)

    @property
    def topic_syntax(self):
        """ZeroMQ subscriptions are byte prefixes."""
        return "prefix"

    @property
    def overflow(self):
        """What a full pipe does: PUB drops the newest, PUSH blocks the sender."""
        return Overflow.BACKPRESSURE if self.socket_type == "push" else Overflow.DROP_NEWEST

    @property
    def hwm_messages(self):
        """The pipe's queue limit, messages (None: no limit)."""
        return None if self.sndhwm == 0 else self.sndhwm


class SocketStation(Station):
    """A PUB/PUSH socket's I/O work on the publisher's host (fan-out paid here).

    Parameters
    ----------
    name : str
    params : ZmqSocketParams
    streams : sim.rng.StreamFactory
    window : (float, float)
    """

    def __init__(self, name, params, *, streams, window):
        from .stations import _batch, make_discipline

        disc = make_discipline(servers=1, capacity_messages=None, capacity_bytes=None,
                               overflow=Overflow.DROP_NEWEST, idle_extra_s=params.idle_wakeup_cost_s,
                               batch=_batch(params))
        super().__init__(name, "socket", disc, window=window)
        self.params = params
        self.send = streams.draws(params.send_cost_s, name, "send")
        self.copy = streams.draws(params.copy_cost_s, name, "copy")

    def service_s(self, packets):
        n = len(packets)
        copies = self.plan.n_children[packets.visit]
        demand = self.send.take(n) + copies * self.copy.take(n)
        return demand + self.params.per_byte_cost_s * (packets.size * copies)

    @property
    def lookahead_s(self):
        return self.params.send_cost_s.min_value


def check_socket(g, n, kinds):
    """A socket links to exactly one publisher and to subscribers; PUSH to one peer."""
    from .topology import PARAMS, NodeKind

    nbrs = list(g.neighbors(n))
    pubs = [m for m in nbrs if kinds(m) is NodeKind.PUBLISHER]
    if len(pubs) != 1:
        raise ConfigError(f"node {n!r}", f"{len(pubs)} publishers linked",
                          "exactly one publisher per socket (the socket lives on its host)")
    other = [m for m in nbrs if kinds(m) not in (NodeKind.PUBLISHER, NodeKind.SUBSCRIBER)]
    if other:
        raise ConfigError(f"node {n!r}", f"linked to {kinds(other[0]).value} {other[0]!r}",
                          "links to one publisher and to subscribers only")
    params = g.nodes[n][PARAMS]
    if params.socket_type == "push" and len(nbrs) - 1 > 1:
        raise ConfigError(f"node {n!r}.socket_type", "push",
                          "one connected peer for a PUSH socket (round-robin over PULL peers is not modelled)")


def socket_link_limits(link, params):
    """Queue limits of a peer pipe: the tighter of the link's own and the HWM."""
    vals = [v for v in (link.queue_messages, params.hwm_messages) if v is not None]
    return {"queue_messages": min(vals) if vals else None, "queue_bytes": link.queue_bytes,
            "overflow": params.overflow}
