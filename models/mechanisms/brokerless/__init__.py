"""Brokerless ZeroMQ PUB/SUB and PUSH/PULL: socket stations and peer pipes.

Plug-in: :data:`BROKERLESS` (:mod:`.plugin`).
"""

from .plugin import BROKERLESS

__all__ = ["BROKERLESS"]
