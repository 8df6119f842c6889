"""Typed reads of a paper folder's setting (one-line errors naming the field)."""

from __future__ import annotations

import numbers

from ...sim.errors import ConfigError
from ...sim.units import parse_duration_s

__all__ = ["count", "counts", "duration_s", "names", "mapping"]


def _get(setting, key, where):
    if key not in setting:
        raise ConfigError(f"{where}.{key}", None, "a value (missing)")
    return setting[key]


def count(setting, key, where, minimum=1):
    """An integer >= ``minimum``."""
    value = _get(setting, key, where)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ConfigError(f"{where}.{key}", value, f"an integer >= {minimum}")
    return int(value)


def counts(setting, key, where, minimum=1):
    """A non-empty list of integers >= ``minimum``, increasing."""
    value = _get(setting, key, where)
    ok = (
        isinstance(value, list)
        and value
        and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= minimum for v in value)
    )
    if not ok or list(value) != sorted(set(value)):
        raise ConfigError(f"{where}.{key}", value, f"an increasing list of integers >= {minimum}")
    return [int(v) for v in value]


def duration_s(setting, key, where, positive=True):
    """A duration (``5min``, ``2s``), s."""
    value = parse_duration_s(_get(setting, key, where), f"{where}.{key}")
    if positive and not value > 0:
        raise ConfigError(f"{where}.{key}", setting[key], "a duration > 0")
    return value


def names(setting, key, where, choices=None):
    """A non-empty list of strings (each one of ``choices`` when given)."""
    value = _get(setting, key, where)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}.{key}", value, "a non-empty list of names")
    for v in value:
        if choices is not None and v not in choices:
            raise ConfigError(f"{where}.{key}", v, f"one of {sorted(choices)}")
    return list(value)


def mapping(setting, key, where):
    """A non-empty mapping."""
    value = _get(setting, key, where)
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"{where}.{key}", value, "a non-empty mapping")
    return value
