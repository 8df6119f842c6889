"""Errors raised for bad user input.

Every error about a configuration, trace or topology is a :class:`ConfigError`
whose message is one line naming the place (file, node, edge, field) and the
offending value, so the command-line tool can print it without a traceback.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input: a field, its value and what was expected.

    Parameters
    ----------
    field : str
        Dotted path of the offending field, e.g. ``"brokers.b1.workers"``.
    value : object
        The value that was rejected.
    expected : str
        What would have been accepted, in plain words.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(_one_line(f"{field}: {value!r} is invalid: {expected}"))


def _one_line(text: str) -> str:
    """``text`` with line breaks (from a wrapped library message) folded into spaces."""
    lines = text.splitlines()
    return text if len(lines) == 1 else " ".join(part.strip() for part in lines if part.strip())
