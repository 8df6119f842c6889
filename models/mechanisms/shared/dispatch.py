"""The dispatch of one share group at its broker: which member gets each message.

MQTT 5.0 shared subscriptions (``$share/{group}/{filter}``, §4.8.2) and AMQP
competing consumers (several consumers on one queue) deliver each matching
message to one member of the group. How the member is chosen is the broker's
policy (``BrokerParams.shared_dispatch``):

``round_robin``
    The members in turn, in order of subscription. Mosquitto (2.x,
    ``src/subs.c``, ``subs__shared_process``) sends to the first member of
    each share group and moves it to the back of the list; RabbitMQ deals a
    queue's messages to its consumers round robin (tutorial 2, "Work
    Queues"; with a prefetch limit a consumer whose window is full is skipped,
    which is not modelled here); EMQX's default ``shared_subscription_strategy``
    is ``round_robin`` (docs.emqx.com, "MQTT Shared Subscription").
``random``
    A member drawn uniformly per message (EMQX ``random``; VerneMQ
    ``shared_subscription_policy = random``).
``sticky``
    A member drawn at random for the first message, then always that one
    (EMQX ``sticky``: "selects a session randomly at first and keeps using it
    until the subscriber goes offline"; members never go offline here: shared
    subscriptions with connection schedules or churn are refused,
    :mod:`pubsim.models.params.features`).

On the route plan the group's copy is a *choice* visit
(:class:`pubsim.sim.routing.Hop` ``choice=True``) at this station whose
alternatives, one per member, lead to the members' downlinks. The station
takes no time; it picks the member of each packet in arrival order before
service, which both drivers hand it identically (counter for round robin, a
seeded stream of this station for random and sticky), so they agree record
for record.
"""

from __future__ import annotations

import numpy as np

from ....sim.disciplines import FifoDiscipline, Overflow
from ...stations.core import ModelStation

__all__ = ["DispatchStation", "POLICIES"]

POLICIES = ("round_robin", "random", "sticky")
_BLOCK = 4096


class DispatchStation(ModelStation):
    """Zero-time dispatch of one share group to one member per message.

    Parameters
    ----------
    name : str
    members : int
        Members of the group (alternatives of each choice visit, in order).
    policy : str
        One of :data:`POLICIES`.
    streams : pubsim.sim.rng.StreamFactory
    window : (float, float)
    """

    def __init__(self, name, members, policy, *, streams, window):
        if policy not in POLICIES:
            raise ValueError(f"unknown dispatch policy {policy!r}")
        disc = FifoDiscipline(servers=1, capacity_messages=None, overflow=Overflow.DROP_NEWEST)
        super().__init__(name, "dispatch", disc, window=window)
        self.members = int(members)
        self.policy = policy
        self.rng = streams.generator(name, "dispatch")
        self.dealt = 0  # messages dispatched so far (round robin)
        self.sticky = int(self.rng.integers(self.members)) if policy == "sticky" else -1
        self._buf = np.empty(0, dtype=np.int64)
        self._pos = 0

    def _random(self, n):
        out = np.empty(n, dtype=np.int64)
        filled = 0
        while filled < n:
            if self._pos == len(self._buf):
                self._buf = self.rng.integers(self.members, size=_BLOCK)
                self._pos = 0
            k = min(n - filled, len(self._buf) - self._pos)
            out[filled : filled + k] = self._buf[self._pos : self._pos + k]
            self._pos += k
            filled += k
        return out

    def pick(self, n):
        """Member index (0 .. members - 1) of the next ``n`` messages, in arrival order."""
        if self.policy == "round_robin":
            out = (self.dealt + np.arange(n, dtype=np.int64)) % self.members
            self.dealt += n
            return out
        if self.policy == "random":
            return self._random(n)
        return np.full(n, self.sticky, dtype=np.int64)

    def before_service(self, packets):
        """Each packet continues at the alternative of its chosen member."""
        if len(packets) == 0:
            return packets, None
        plan = self.plan
        visit = plan.child_idx[plan.child_ptr[packets.visit] + self.pick(len(packets))]
        out = packets.take(slice(None))
        out.visit = visit
        return out, None

    def service_s(self, packets):
        return np.zeros(len(packets))
