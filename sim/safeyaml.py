"""A YAML reader for user files that refuses what would crash, hang or eat memory.

:func:`safe_load` is ``yaml.safe_load`` (no Python tags) with three more
limits, each refused with a :class:`yaml.YAMLError` that carries the place in
the file (so callers print their usual one-line "malformed YAML" error):

* nesting deeper than :data:`MAX_DEPTH` levels (the composer recurses once per
  level: a file of ten thousand ``[`` would end in ``RecursionError``);
* a document whose aliases expand to more than :data:`MAX_NODES` nodes
  (a "billion laughs" alias bomb composes in microseconds but any walk of the
  result, a hash, a deep copy, an error message, expands it), or an alias
  inside its own anchor (a recursive structure);
* integers with more than :data:`MAX_INT_DIGITS` digits (``int()`` of
  thousands of digits raises ``ValueError`` and a seed of that size means
  nothing).
"""

from __future__ import annotations

from typing import Any

import yaml  # type: ignore[import-untyped]
from yaml.composer import ComposerError  # type: ignore[import-untyped]
from yaml.constructor import ConstructorError  # type: ignore[import-untyped]

__all__ = ["safe_load", "SafeLoader", "MAX_DEPTH", "MAX_NODES", "MAX_INT_DIGITS"]

#: Deepest nesting of mappings and sequences accepted.
MAX_DEPTH = 100
#: Most nodes a document may hold once its aliases are expanded.
MAX_NODES = 2_000_000
#: Most digits (with sign and ``_`` separators) in an integer.
MAX_INT_DIGITS = 100


class SafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the depth, expansion and integer limits of this module."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_expansion(node)
        return node


def _check_expansion(root: Any) -> None:
    """Refuse a node graph whose aliases expand beyond :data:`MAX_NODES`, or a cycle."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:  # recursion depth is bounded by MAX_DEPTH
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ComposerError(None, None, "an alias inside its own anchor (a recursive structure)", node.start_mark)
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        for child in children:
            total += size(child)
            if total > MAX_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?)",
                    node.start_mark,
                )
        open_nodes.discard(key)
        sizes[key] = total
        return total

    if root is not None:
        size(root)


def _construct_int(loader: SafeLoader, node: Any) -> int:
    text = str(node.value)
    if len(text) > MAX_INT_DIGITS:
        raise ConstructorError(
            None, None, f"an integer of at most {MAX_INT_DIGITS} digits (this one has {len(text):,})", node.start_mark
        )
    return yaml.SafeLoader.construct_yaml_int(loader, node)


SafeLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def safe_load(text: str) -> Any:
    """Parse one YAML document from ``text`` with :class:`SafeLoader`."""
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - SafeLoader subclass
