"""Errors raised for bad user input.

Every error about a configuration, trace or topology is a :class:`ConfigError`
whose message is one line naming the place (file, node, edge, field) and the
offending value, so the command-line tool can print it without a traceback.
The value is quoted shortened (:func:`short_repr`): a whole 8 MB list in an
error line helps nobody.
"""

from __future__ import annotations

import reprlib

__all__ = ["ConfigError", "short_repr", "MAX_VALUE_CHARS"]

#: Longest quoted value in an error message, characters (before the "cut" note).
MAX_VALUE_CHARS = 200

# Values with more parts than this (items, nested levels, digits) are quoted by
# reprlib, which stops early, rather than by repr, which would walk them whole.
_SMALL_PARTS = 400
_SMALL_DEPTH = 8
_MAX_INT_BITS = 600  # about 180 decimal digits; repr of a 5000-digit int even raises


class ConfigError(ValueError):
    """Bad user input: a field, its value and what was expected.

    Parameters
    ----------
    field : str
        Dotted path of the offending field, e.g. ``"brokers.b1.workers"``.
    value : object
        The value that was rejected (kept whole in :attr:`value`; quoted
        shortened in the message).
    expected : str
        What would have been accepted, in plain words.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(_one_line(f"{_cut(field)}: {short_repr(value)} is invalid: {_cut(expected, 600)}"))


def _one_line(text: str) -> str:
    """``text`` with line breaks (from a wrapped library message) folded into spaces."""
    lines = text.splitlines()
    return text if len(lines) == 1 else " ".join(part.strip() for part in lines if part.strip())


def _cut(text: str, limit: int = 300) -> str:
    """``text``, cut to ``limit`` characters with a note saying so."""
    return text if len(text) <= limit else f"{text[:limit]}... (cut, {len(text):,} characters)"


def _is_small(value: object, depth: int = 0, budget: list[int] | None = None) -> bool:
    """True if ``repr(value)`` is cheap and safe: few parts, shallow, no huge integer."""
    budget = [_SMALL_PARTS] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0 or depth > _SMALL_DEPTH:
        return False
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return True
    if isinstance(value, int):
        return value.bit_length() <= _MAX_INT_BITS
    if isinstance(value, (str, bytes)):
        budget[0] -= len(value) // 50
        return budget[0] >= 0
    if isinstance(value, dict):
        return all(_is_small(k, depth + 1, budget) and _is_small(v, depth + 1, budget) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_is_small(v, depth + 1, budget) for v in value)
    return True  # other objects: their own repr


class _ShortRepr(reprlib.Repr):
    """reprlib that also survives integers too long for ``repr``."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = 12
        self.maxdict = 8
        self.maxstring = self.maxother = MAX_VALUE_CHARS
        self.maxlong = 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > _MAX_INT_BITS:
            return f"<integer of about {int(x.bit_length() * 0.30103):,} digits>"
        return super().repr_int(x, level)


_SHORT = _ShortRepr()


def short_repr(value: object, limit: int = MAX_VALUE_CHARS) -> str:
    """``repr(value)`` of at most about ``limit`` characters, saying so when it was cut.

    Small values give exactly ``repr(value)``; big or deep ones are quoted by
    :mod:`reprlib` (which stops early, so an 8 MB list costs little) and
    marked cut, with a note such as ``(cut: list of 1,000,000 items)``.
    """
    small = _is_small(value)
    try:
        text = repr(value) if small else _SHORT.repr(value)
    except Exception:  # a repr that fails on bad input must not hide the error itself
        text, small = f"<{type(value).__name__}>", True
    if small and len(text) <= limit:
        return text
    try:
        noun = "characters" if isinstance(value, str) else "items"
        size = f"{type(value).__name__} of {len(value):,} {noun}"  # type: ignore[arg-type]
    except TypeError:
        size = type(value).__name__
    return f"{text[:limit]}... (cut: {size})"
