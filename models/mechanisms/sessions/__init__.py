"""Subscriber sessions (churn, clean sessions), retained messages, publisher outages and Will messages.

Plug-in: :data:`SESSIONS` (:mod:`.plugin`).
"""

from .plugin import SESSIONS

__all__ = ["SESSIONS"]
