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

import numpy as np

from ....sim.disciplines import FifoDiscipline, Overflow
from ...stations.core import ModelStation, _batch, make_discipline

__all__ = ["SocketStation", "socket_link_limits"]


class SocketStation(ModelStation):
    """A PUB/PUSH socket's I/O work on the publisher's host (fan-out paid here).

    Parameters
    ----------
    name : str
    params : ZmqSocketParams
    streams : sim.rng.StreamFactory
    window : (float, float)
    cpu_shared : bool
        Its host's CPU is shared (:mod:`pubsim.models.mechanisms.hosts.cpu`): the
        host's CPU station runs its demand (:meth:`demand_s`) on the socket's I/O
        thread, in its batches; a visit here then takes no time.
    """

    def __init__(self, name, params, *, streams, window, cpu_shared=False):
        self.cpu_shared = bool(cpu_shared)
        if cpu_shared:
            disc = FifoDiscipline(servers=1, capacity_messages=None, overflow=Overflow.DROP_NEWEST)
        else:
            disc = make_discipline(
                servers=1,
                capacity_messages=None,
                capacity_bytes=None,
                overflow=Overflow.DROP_NEWEST,
                idle_extra_s=params.idle_wakeup_cost_s,
                batch=_batch(params),
            )
        super().__init__(name, "socket", disc, window=window)
        self.params = params
        self.send = streams.draws(params.send_cost_s, name, "send")
        self.copy = streams.draws(params.copy_cost_s, name, "copy")

    def service_s(self, packets):
        return np.zeros(len(packets)) if self.cpu_shared else self.demand_s(packets)

    def demand_s(self, packets):
        """CPU demand of each message's visit, s (draws this socket's cost streams)."""
        n = len(packets)
        copies = self.plan.n_children[packets.visit]
        demand = self.send.take(n) + copies * self.copy.take(n)
        return demand + self.params.per_byte_cost_s * (packets.size * copies)

    @property
    def min_demand_s(self):
        """Least CPU demand of a visit, s."""
        return self.params.send_cost_s.min_value

    @property
    def batch_rule(self):
        """``(max_messages, max_bytes, fixed_s)`` of its I/O thread's writes, or None
        without batching (as :func:`pubsim.models.stations.core.make_discipline`)."""
        p = self.params
        if p.batch_max_messages <= 1:
            return None
        return p.batch_max_messages, _batch(p)["batch_max_bytes"], p.batch_fixed_cost_s

    @property
    def lookahead_s(self):
        return 0.0 if self.cpu_shared else self.min_demand_s


def socket_link_limits(link, params):
    """Queue limits of a peer pipe: the tighter of the link's own and the HWM."""
    vals = [v for v in (link.queue_messages, params.hwm_messages) if v is not None]
    return {"queue_messages": min(vals) if vals else None, "queue_bytes": link.queue_bytes, "overflow": params.overflow}
