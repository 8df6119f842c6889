"""Readers woken by the broker's writes: a copy whose reader sleeps costs the broker more.

Plug-in: :data:`READERS` (:mod:`.plugin`); parameters
:class:`pubsim.models.params.readers.ReaderWakeParams`; the per-copy rule
:class:`.wakes.ReaderWakes`.
"""

from .plugin import READERS
from .wakes import ReaderWakes

__all__ = ["READERS", "ReaderWakes"]
