"""Message serialization: the encode stage on the publisher's CPU.

Plug-in: :data:`SERIALIZATION` (:mod:`.plugin`).
"""

from .plugin import SERIALIZATION

__all__ = ["SERIALIZATION"]
