"""Cooperating edge brokers (ILDM): control plane, relays, bridges, traffic accounting.

Plug-in: :data:`ILDM` (:mod:`.plugin`).
"""

from .plugin import ILDM

__all__ = ["ILDM"]
