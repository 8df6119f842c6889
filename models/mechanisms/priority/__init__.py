"""Priority channels and per-subscriber queue policies.

Plug-in: :data:`PRIORITY` (:mod:`.plugin`).
"""

from .plugin import PRIORITY

__all__ = ["PRIORITY"]
