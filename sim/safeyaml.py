"""A YAML reader for user files that refuses what would crash, hang or eat memory.

:func:`safe_load` is ``yaml.safe_load`` (no Python tags; libyaml's C parser
when PyYAML has it) with three more limits, each refused with a
:class:`yaml.YAMLError` that carries the place in the file (so callers print
their usual one-line "malformed YAML" error):

* nesting deeper than :data:`MAX_DEPTH` levels (composing recurses once per
  level: a file of ten thousand ``[`` would end in ``RecursionError``, or
  overflow the C stack in libyaml's composer);
* a document whose aliases expand to more than :data:`MAX_NODES` nodes
  (a "billion laughs" alias bomb composes in microseconds but any walk of the
  result, a hash, a deep copy, an error message, expands it), or an alias
  inside its own anchor (a recursive structure);
* integers with more than :data:`MAX_INT_DIGITS` digits (``int()`` of
  thousands of digits raises ``ValueError`` and a seed of that size means
  nothing).

The first two are checked by :func:`check_events` on the parser's event
stream before anything is composed: one linear pass, no recursion. Reading
with libyaml matters for big files too: the pure-Python composer took 10-20 s
on a 600 kB list (a fuzz finding), libyaml about a second.
"""

from __future__ import annotations

from typing import Any

import yaml  # type: ignore[import-untyped]
from yaml.composer import ComposerError  # type: ignore[import-untyped]
from yaml.constructor import ConstructorError  # type: ignore[import-untyped]

__all__ = ["safe_load", "check_events", "SafeLoader", "MAX_DEPTH", "MAX_NODES", "MAX_INT_DIGITS"]

#: Deepest nesting of mappings and sequences accepted.
MAX_DEPTH = 100
#: Most nodes a document may hold once its aliases are expanded.
MAX_NODES = 2_000_000
#: Most digits (with sign and ``_`` separators) in an integer.
MAX_INT_DIGITS = 100


#: libyaml's C parser when PyYAML was built with it (about 20x faster than the pure-Python one).
_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SafeLoader(_BASE):
    """``yaml.SafeLoader`` (libyaml's when present) with this module's integer limit.

    The depth and expansion limits are checked before composing, by
    :func:`check_events`: libyaml composes nodes recursively in C, where a
    deep document would overflow the stack instead of raising.
    """


def check_events(text: str) -> None:
    """Refuse ``text`` if its nesting, alias expansion or aliases break this module's limits.

    One pass over the parser's events, with no recursion: the parser (C or
    Python) is a state machine, so ten thousand ``[`` cost one list, not a
    stack frame each. The expanded size counts every node as if each alias
    were replaced by a copy of its anchor's node.
    """
    total = 0
    open_at: list[tuple[int, str | None]] = []  # (total before the collection, its anchor)
    sizes: dict[str, int] = {}  # expanded size of each finished anchor
    opened: set[str] = set()
    for event in yaml.parse(text, Loader=_BASE):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_at) >= MAX_DEPTH:
                raise ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", event.start_mark)
            open_at.append((total, event.anchor))
            opened.update([event.anchor] if event.anchor else [])
            total += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            before, anchor = open_at.pop()
            if anchor:
                sizes[anchor] = total - before
                opened.discard(anchor)
        elif isinstance(event, yaml.ScalarEvent):
            sizes.update({event.anchor: 1} if event.anchor else {})
            total += 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in opened:
                raise ComposerError(
                    None, None, "an alias inside its own anchor (a recursive structure)", event.start_mark
                )
            total += sizes.get(event.anchor, 1)  # an undefined alias: the composer names it
        if total > MAX_NODES:
            raise ComposerError(
                None,
                None,
                f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?)",
                event.start_mark,
            )


def _construct_int(loader: SafeLoader, node: Any) -> int:
    text = str(node.value)
    if len(text) > MAX_INT_DIGITS:
        raise ConstructorError(
            None, None, f"an integer of at most {MAX_INT_DIGITS} digits (this one has {len(text):,})", node.start_mark
        )
    return yaml.SafeLoader.construct_yaml_int(loader, node)


SafeLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def safe_load(text: str) -> Any:
    """Parse one YAML document from ``text`` with :class:`SafeLoader`, after :func:`check_events`."""
    check_events(text)
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - SafeLoader subclass
