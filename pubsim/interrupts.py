"""A Ctrl-C that a finalizer swallowed, kept until the main flow can act on it.

Python ignores an exception raised in ``__del__``: it reports it to
``sys.unraisablehook`` and goes on. So a Ctrl-C that lands while a finalizer
runs (pyarrow's ``ParquetWriter.__del__`` while a study writes its files) is
lost, and the command runs on; CI once saw a study interrupted that way
finish with exit status 0. Inside :func:`catching` such an interrupt is
recorded instead, and :func:`raise_if_swallowed` raises it again where the
main flow can stop: the study runner after each task's files, the command
line before it reports success.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["catching", "raise_if_swallowed"]

_swallowed = threading.Event()


def _hook(previous):
    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            _swallowed.set()
            return
        previous(unraisable)

    return hook


@contextmanager
def catching() -> Iterator[None]:
    """Record a Ctrl-C raised in a finalizer for :func:`raise_if_swallowed`, within the block."""
    previous = sys.unraisablehook
    sys.unraisablehook = _hook(previous)
    _swallowed.clear()
    try:
        yield
    finally:
        sys.unraisablehook = previous
        _swallowed.clear()


def raise_if_swallowed() -> None:
    """Raise ``KeyboardInterrupt`` if a finalizer swallowed one (inside :func:`catching`)."""
    if _swallowed.is_set():
        _swallowed.clear()
        raise KeyboardInterrupt
