"""Persistent messages: broker disks (group commit) and broker restarts.

Plug-in: :data:`PERSISTENCE` (:mod:`.plugin`).
"""

from .plugin import PERSISTENCE

__all__ = ["PERSISTENCE"]
