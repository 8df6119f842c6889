"""Shared subscriptions: a share group receives each matching message once, at one member.

Plug-in: :data:`SHARED` (:mod:`.plugin`); the dispatch station is in :mod:`.dispatch`.
"""

from .plugin import SHARED

__all__ = ["SHARED"]
