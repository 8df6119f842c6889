"""Sessions, retained messages and Will messages as a registry entry.

* a subscriber with a connection schedule or churn gets a
  :class:`~pubsim.models.mechanisms.sessions.sessions.Sessions` in its
  downlink's constructor;
* the per-flow retain flags reach the sessions through the wiring;
* a publisher with outages gets its source wrapped
  (:func:`~pubsim.models.mechanisms.sessions.will.wrap_source`: no publications while
  it is down, its Will published by the broker).
"""

from __future__ import annotations

import numpy as np

from ...stations.wiring import Wiring
from ..context import CompileContext
from ..keys import StationKey, StationKind
from .sessions import sessions_for
from .will import wrap_source

__all__ = ["SESSIONS", "SessionsMechanism"]


class SessionsMechanism:
    """Connection intervals, clean sessions, retain, outages and Will."""

    name = "sessions"

    def link_options(self, ctx: CompileContext, key: StationKey) -> dict | None:
        """The subscriber's session, in its downlink's constructor."""
        if key.kind is not StationKind.DOWNLINK:
            return None
        session = sessions_for(ctx.params(key.node), ctx.streams, f"subscriber:{key.node}")
        return None if session is None else {"session": session}

    def wire(self, ctx: CompileContext, wiring: Wiring) -> None:
        """Per-flow retain flags (None if no publisher retains)."""
        retain = np.array([ctx.params(ctx.publishers[p]).retain for p in wiring.plan.flow_publisher], dtype=bool)
        wiring.flow_retain = retain if retain.any() else None

    def wrap_source(self, ctx: CompileContext, publisher, source):
        """Outages and Will messages of the publisher, if it has any."""
        return wrap_source(source, ctx.params(publisher), ctx.topics)


SESSIONS = SessionsMechanism()
