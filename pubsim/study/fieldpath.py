"""Dotted field paths into a raw scenario mapping.

A path such as ``topology.publishers[0].rate_per_s`` names a value in the
mapping that ``yaml.safe_load`` gives for a scenario file: dotted mapping
keys, ``[k]`` list indices. Overrides are applied to a deep copy, so the base
mapping is never changed.
"""

from __future__ import annotations

import copy
import re

from ..sim.errors import ConfigError

__all__ = ["parse_path", "apply_overrides"]

_SEGMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_\-]*)((?:\[\d+\])*)$")


def parse_path(path, field):
    """Split ``path`` into keys (str) and list indices (int).

    Raises
    ------
    ConfigError
        Naming ``field`` when the path is not ``key(.key|[k])*``.
    """
    if not isinstance(path, str) or not path:
        raise ConfigError(field, path, "a field path such as topology.publishers[0].rate_per_s")
    parts = []
    for segment in path.split("."):
        m = _SEGMENT.match(segment)
        if m is None:
            raise ConfigError(field, path, "a field path such as topology.publishers[0].rate_per_s")
        parts.append(m.group(1))
        parts.extend(int(k) for k in re.findall(r"\[(\d+)\]", m.group(2)))
    return tuple(parts)


def _describe(parts):
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else p)
    return text or "the scenario"


def _set(data, parts, value, field, path):
    """Set ``value`` at ``parts`` in ``data`` (changed in place)."""
    node = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = _describe(parts[:depth])
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                size = f"a list of {len(node)}" if isinstance(node, list) else type(node).__name__
                raise ConfigError(field, path, f"a path into the base scenario ({where} is {size}, no index {part})")
        elif not isinstance(node, dict):
            raise ConfigError(
                field, path, f"a path into the base scenario ({where} is {type(node).__name__}, not a mapping)"
            )
        elif part not in node and not last:
            raise ConfigError(field, path, f"a path into the base scenario ({where} has no key {part})")
        if last:
            node[part] = copy.deepcopy(value)
        else:
            node = node[part]


def apply_overrides(raw, overrides, field_of=lambda path: path):
    """A deep copy of ``raw`` with ``{path: value}`` overrides applied.

    Every container along a path must exist in ``raw``; the last key may be
    new in an existing mapping (a field the scenario leaves at its default
    or preset value), a list index must be in range.
    """
    out = copy.deepcopy(raw)
    for path, value in overrides.items():
        _set(out, parse_path(path, field_of(path)), value, field_of(path), path)
    return out
