"""Producer send modes: how a producer waits for the broker's confirms.

``PublisherParams.send_mode`` (:mod:`pubsim.models.params.client`):

* ``async``: the producer sends at its own arrival times and waits for
  nothing (AMQP without confirms, a JMS non-persistent send, ActiveMQ with
  ``useAsyncSend``);
* ``sync``: each send waits for the broker's confirm before the next one
  (a JMS persistent send outside a transaction: ActiveMQ Classic's default,
  Artemis's ``blockOnDurableSend=true``): a closed loop of one message,
  throughput ``1 / (RTT + write + sync)``;
* ``confirms``: pipelined publisher confirms with at most W unconfirmed
  (``window_requests``): throughput ``min(W / RTT, disk capacity)``;
* ``transactions``: N sends (``transaction_messages``), then a commit that
  waits until all N are confirmed; the next transaction starts then.

The first three are the closed-loop source
(:class:`pubsim.models.stations.sources.ClosedLoopSource`, window 1 or W);
transactions wrap it in :class:`TransactionSource`.

When the confirm comes: when the message is durable, independent of any
consumer. RabbitMQ acks a persistent message routed to a durable queue
once it is persisted to disk (www.rabbitmq.com/docs/confirms, "When will
published messages be confirmed by the broker?"); a JMS persistent send
(ActiveMQ Classic; Artemis ``blockOnDurableSend``) returns when the broker
has stored it (journal sync). So the confirm is issued when the message
leaves the disk station of the first broker it visits (its write batch was
synced), or that broker's station when the broker has no disk (or the
message is not persistent), and reaches the producer the uplink's
``latency_s`` later (the same link, reverse direction: no queue, no
jitter, no bytes; :func:`confirm_delays`). The drivers tell the source at
that departure (:meth:`pubsim.sim.network.Network.on_departed`); the
producer needs no subscriber, and a slow consumer does not slow it.
RabbitMQ's earlier confirm of a message consumed by all its queues'
consumers before it is persisted is not modelled.

One producer, one message at a time (``sync``), nobody else at the broker:

    1 / (uplink latency + broker + write + sync + uplink latency)

with the uplink's transmission (``size / bandwidth``) in the first leg.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..context import CompileContext
from ..keys import StationKey

__all__ = ["TransactionSource", "confirm_delays"]


def confirm_delays(ctx: CompileContext, plan) -> np.ndarray | None:
    """Per visit: the confirm's return delay (s) at the visit that issues it, NaN elsewhere.

    For each flow of a producer with ``send_mode`` other than ``async``: the
    first broker visit on its route, or the disk visit right below it (the
    persistence chain), returns the confirm after the producer's uplink
    latency. None when no producer waits for confirms.
    """
    waiting = [ctx.params(p).send_mode != "async" for p in ctx.publishers]
    if not any(waiting):
        return None
    brokers = {ctx.index_of(StationKey.broker(n)) for n in ctx.brokers}
    disks = {ctx.index_of(StationKey.disk(n)) for n in ctx.brokers if ctx.has(StationKey.disk(n))}
    delay = np.full(plan.n_visits, np.nan)
    for f, root in enumerate(plan.flow_root.tolist()):
        p = int(plan.flow_publisher[f])
        if not waiting[p]:
            continue
        v = _first_visit(plan, int(root), brokers)
        if v is None:
            continue
        if plan.n_children[v] == 1:
            child = int(plan.child_idx[plan.child_ptr[v]])
            v = child if int(plan.station[child]) in disks else v
        delay[v] = _return_latency_s(ctx, ctx.publishers[p])
    return delay


def _first_visit(plan, root: int, stations: set[int]) -> int | None:
    """First visit of one of ``stations`` on the single-child chain from ``root``, or None."""
    v = root
    while int(plan.station[v]) not in stations:
        if plan.n_children[v] != 1:
            return None
        v = int(plan.child_idx[plan.child_ptr[v]])
    return v


def _return_latency_s(ctx: CompileContext, publisher) -> float:
    """The producer's uplink latency, s (0 without an uplink station)."""
    key = StationKey.uplink(publisher)
    return float(ctx.stations[ctx.index_of(key)].params.latency_s) if ctx.has(key) else 0.0


class TransactionSource:
    """A closed-loop source whose window opens N slots at a time, at the commit.

    The first N messages go out at ``start_s``; confirms of a transaction's
    messages are held until the N-th comes, and the next N go out then
    (plus ``think_time_s``), in the order of the confirms' message ids.
    Everything else is the wrapped source's.

    Parameters
    ----------
    inner : ClosedLoopSource
        The publisher's source (window 1, no timeout).
    messages : int
        N, messages per transaction.
    """

    closed_loop = True

    def __init__(self, inner, messages):
        self.inner = inner
        self.messages = int(messages)
        self._held = []  # (confirm time, confirm msg, seq) of the open transaction
        start = inner._due[0][0]
        for i in range(1, self.messages):  # the first transaction's other N - 1 sends
            heapq.heappush(inner._due, (start, -1, i))

    def __getattr__(self, name):
        if name == "inner":  # not set yet (copying): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def on_reply(self, seq, t, msg):
        """Confirms of this producer's messages (at their durability, plus the return latency)."""
        inner = self.inner
        for q, tq, m in zip(seq.tolist(), t.tolist(), msg.tolist()):
            if q < 0 or q not in inner._unanswered:
                continue
            inner._unanswered.pop(q)
            self._held.append((tq, m, q))
            if len(self._held) == self.messages:  # committed: the next transaction starts
                commit = max(h[0] for h in self._held)
                for _, m_h, q_h in self._held:
                    heapq.heappush(inner._due, (commit + inner.think_s, m_h, q_h))
                self._held = []
