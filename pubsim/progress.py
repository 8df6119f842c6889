"""Progress bars for long library calls, shown only when asked.

The long calls of the library (:func:`pubsim.run.simulate`,
:func:`pubsim.study.run_study`, :func:`pubsim.analysis.saturation_search`,
:func:`pubsim.calibration.validate.validate`) take a ``progress`` argument:
None or False (the default) shows nothing, so tests and batch runs stay
quiet; a callable receives the raw progress; True, or a string used as the
bar's label, shows a bar made by :mod:`tqdm.auto`: a widget in JupyterLab
(with ``ipywidgets``, the ``notebooks`` extra), text on standard error
elsewhere, never on standard output. :func:`track` puts the same bar on a
loop written in a notebook.

The adapters below turn ``progress`` into the callback each call expects:
:func:`seconds` (``callback(done_s, total_s)``, simulated seconds),
:func:`steps` (``callback(done, total, label)``) and :func:`counter`
(``callback(item)``, one unit of work of unknown total per call). Each
passes a callable ``progress`` through unchanged.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tqdm import TqdmWarning

with warnings.catch_warnings():
    # in a Jupyter kernel without ipywidgets tqdm.auto warns at import and
    # falls back to text bars on stderr, which is what we want there
    warnings.simplefilter("ignore", TqdmWarning)
    from tqdm.auto import tqdm

__all__ = ["wanted", "bar", "track", "seconds", "steps", "counter"]

T = TypeVar("T")


def wanted(progress: object) -> bool:
    """True when ``progress`` asks for a bar: True or a label (a string)."""
    return progress is True or isinstance(progress, str)


@contextmanager
def bar(progress: object, *, desc: str, total: float | None = None, unit: str = "it", **kw: Any) -> Iterator[Any]:
    """A tqdm bar (closed on exit) when :func:`wanted`, else None.

    Parameters
    ----------
    progress : bool or str
        True for a bar labelled ``desc``, a string for a bar labelled so.
    desc : str
        Default label.
    total : float, optional
        Amount of work (unknown: None, the bar counts).
    unit : str
        Unit of the work, shown in the rate.
    """
    if not wanted(progress):
        yield None
        return
    label = progress if isinstance(progress, str) else desc
    b = tqdm(total=total, desc=label, unit=unit, file=sys.stderr, dynamic_ncols=True, **kw)
    try:
        yield b
    finally:
        b.close()


def track(iterable: Iterable[T], progress: object = True, *, desc: str = "", total: int | None = None) -> Iterator[T]:
    """Iterate over ``iterable``, with a bar when ``progress`` is True or a label.

    For a loop of runs written in a notebook::

        for rate in track(RATES, desc="load sweep"):
            ...
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    with bar(progress, desc=desc, total=total) as b:
        for item in iterable:
            yield item
            if b is not None:
                b.update(1)


@contextmanager
def seconds(progress: object, *, desc: str, total_s: float) -> Iterator[Callable[[float, float], object] | None]:
    """``progress`` as ``callback(done_s, total_s)`` over ``total_s`` simulated seconds."""
    if not wanted(progress):
        yield progress if callable(progress) else None
        return
    with bar(progress, desc=desc, total=total_s, unit="s", unit_scale=True) as b:

        def callback(done_s: float, _total_s: float) -> None:
            b.update(min(done_s, total_s) - b.n)

        yield callback


@contextmanager
def steps(progress: object, *, desc: str, unit: str = "it") -> Iterator[Callable[[int, int, str], object] | None]:
    """``progress`` as ``callback(done, total, label)``, the label shown beside the bar."""
    if not wanted(progress):
        yield progress if callable(progress) else None
        return
    with bar(progress, desc=desc, unit=unit) as b:

        def callback(done: int, total: int, label: str) -> None:
            b.total = total
            b.set_postfix_str(str(label), refresh=False)
            b.update(done - b.n)

        yield callback


@contextmanager
def counter(
    progress: object, *, desc: str, unit: str = "it", label: Callable[[Any], str] = str
) -> Iterator[Callable[[Any], object] | None]:
    """``callback(item)`` after each unit of work of unknown total; the bar shows ``label(item)``."""
    if not wanted(progress):
        yield progress if callable(progress) else None
        return
    with bar(progress, desc=desc, unit=unit) as b:

        def callback(item: Any) -> None:
            b.set_postfix_str(label(item), refresh=False)
            b.update(1)

        yield callback
