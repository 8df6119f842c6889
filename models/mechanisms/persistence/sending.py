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
(:class:`pubsim.models.stations.sources.ClosedLoopSource`, window 1 or W):
a confirm is the first delivery of the message below the broker's disk
(the persistence mechanism puts the disk between the broker and its
copies, so a delivery means the write was synced); the return leg of the
confirm is the delivery path. Transactions wrap it in
:class:`TransactionSource`.
"""

from __future__ import annotations

import heapq

__all__ = ["TransactionSource"]


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
        """Confirms (first deliveries) of this producer's messages."""
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
