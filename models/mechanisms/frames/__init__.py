"""YAMI4 frame channels: a broker's per-client queue of frames behind a send window.

Plug-in: :data:`FRAMES` (:mod:`.plugin`).
"""

from .plugin import FRAMES

__all__ = ["FRAMES"]
