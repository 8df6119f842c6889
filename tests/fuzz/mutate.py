"""Mutations of the fuzzer's seeds, one per case, each labelled.

A mutation changes one place of a valid input and says whether the result
*must be refused*: nonsense by construction (NaN, a negated quantity, a
unit nobody knows, an unknown key or preset, a list where a name belongs,
unparseable text). Accepting such an input is a finding ("nonsense
accepted"). Every other mutation (a deleted key, an odd but possibly
meaningful value, a truncated or bit-flipped file) may be valid or refused;
either is fine as long as the refusal is one clean line.

Every operator takes a :class:`random.Random`, so a case is a pure function
of its seed.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Mutation",
    "expand",
    "mutate_tree",
    "mutate_yaml_text",
    "mutate_graphml",
    "mutate_bytes",
    "mutate_ndjson_gz",
]


@dataclass(frozen=True, kw_only=True)
class Mutation:
    """What one mutation did: the operator, the place, and whether the result must be refused."""

    operator: str
    where: str
    must_refuse: bool


# --------------------------------------------------------------------------- values

#: Values that may or may not make sense where they land.
POOL: tuple[Any, ...] = (
    0,
    -1,
    1,
    0.5,
    1e308,
    -1e308,
    2**63,
    2**64 + 1,
    "",
    " ",
    "é✓🚀",
    None,
    True,
    False,
    [],
    {},
    "0s",
    "1e400s",
    "NaN",
    "inf",
    "-0s",
    "1e-320s",
    "999999999999TB",
)
#: A physical quantity written with its unit: ``0.5s``, ``36B``, ``4000/s``, ``100Mbit/s``, ``1KiB``.
QUANTITY = re.compile(r"^\s*\d+(\.\d+)?([eE][+-]?\d+)?\s*[A-Za-z/%][A-Za-z/%0-9]*\s*$")
#: The number in front of a quantity's unit.
NUMBER = re.compile(r"\s*\d+(\.\d+)?([eE][+-]?\d+)?")
#: Keys whose numbers are non-negative by meaning.
NON_NEGATIVE = re.compile(r"(_s|_bytes|_Bps|_per_s|_messages|^count|^replications|^seed|^workers|^size|^rate)$")
#: Keys whose values are names or references: a list or mapping there is nonsense.
NAME_KEYS = {"name", "preset", "builder", "broker", "local", "remote", "forwarding", "protocol", "scheduling"}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_quantity(value: Any) -> bool:
    return _is_number(value) or (isinstance(value, str) and QUANTITY.match(value) is not None)


def _negated(value: Any) -> Any:
    return -value if _is_number(value) else "-" + value.strip()


#: Placeholders for what the YAML dumper cannot write (it recurses into nested lists, and
#: refuses integers of over 4,300 digits), expanded in the dumped text by :func:`expand`.
DEEP = re.compile(r"__deep_(\d+)__")
DIGITS = re.compile(r"__digits_(\d+)__")


def _deep(depth: int) -> str:
    return f"__deep_{depth}__"


def _digits(n: int) -> str:
    return f"__digits_{n}__"


def expand(text: str) -> str:
    """``text`` with each placeholder replaced by a list nested that deep, or an integer of that many digits."""
    text = DEEP.sub(lambda m: "[" * int(m.group(1)) + "1" + "]" * int(m.group(1)), text)
    return DIGITS.sub(lambda m: "1" + "0" * (int(m.group(1)) - 1), text)


# --------------------------------------------------------------------------- tree walking

Path = tuple[Any, ...]


def _places(doc: Any, path: Path = ()) -> list[Path]:
    """Every path below ``doc`` (mapping keys and list indexes)."""
    out: list[Path] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((*path, key))
        out.extend(_places(value, (*path, key)))
    return out


def _parent(doc: Any, path: Path) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def _get(doc: Any, path: Path) -> Any:
    return _parent(doc, path)[path[-1]]


def _text(path: Path) -> str:
    return ".".join(str(p) for p in path) or "<top>"


def _key_of(path: Path) -> str:
    """The nearest mapping key on ``path`` (a list item's key is its list's)."""
    return next((str(p) for p in reversed(path) if isinstance(p, str)), "")


# --------------------------------------------------------------------------- tree operators
# Each takes (rnd, doc, path) and returns must_refuse, or None when it does not apply.

TreeOp = Callable[[random.Random, Any, Path], "bool | None"]


def _delete(rnd: random.Random, doc: Any, path: Path) -> bool | None:
    parent = _parent(doc, path)
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    return False


def _rename(rnd: random.Random, doc: Any, path: Path) -> bool | None:
    parent = _parent(doc, path)
    if not isinstance(parent, dict):
        return None
    parent[f"{path[-1]}_typo"] = parent.pop(path[-1])
    return True  # keys are a closed vocabulary: an unknown one must be refused


def _pool(rnd: random.Random, doc: Any, path: Path) -> bool | None:
    _parent(doc, path)[path[-1]] = copy.deepcopy(rnd.choice(POOL))
    return False


def _leaf_op(make: Callable[[random.Random, Any, Path], Any], must: bool) -> TreeOp:
    """An operator on quantity leaves only: replaces the value by ``make(rnd, value, path)``."""

    def op(rnd: random.Random, doc: Any, path: Path) -> bool | None:
        value = _get(doc, path)
        if not _is_quantity(value):
            return None
        new = make(rnd, value, path)
        if new is _SKIP:
            return None
        _parent(doc, path)[path[-1]] = new
        return must

    return op


_SKIP = object()


def _negate(rnd: random.Random, value: Any, path: Path) -> Any:
    if _is_number(value) and not (value > 0 and NON_NEGATIVE.search(_key_of(path))):
        return _SKIP
    if isinstance(value, str) and float(NUMBER.match(value).group(0)) == 0:
        return _SKIP  # -0s is zero: accepting it is not nonsense
    return _negated(value)


def _name_to_container(rnd: random.Random, doc: Any, path: Path) -> bool | None:
    key = _key_of(path)
    value = _get(doc, path)
    in_names = key in NAME_KEYS or key in {"topics", "subscriptions", "connect"}
    if not (in_names and isinstance(value, str)):
        return None
    _parent(doc, path)[path[-1]] = rnd.choice([[value], {value: 1}, [[value]]])
    return True


def _unknown_preset(rnd: random.Random, doc: Any, path: Path) -> bool | None:
    if _key_of(path) != "preset" or not isinstance(_get(doc, path), str):
        return None
    _parent(doc, path)[path[-1]] = "no-such-preset"
    return True


def _duplicate(rnd: random.Random, doc: Any, path: Path) -> bool | None:
    parent = _parent(doc, path)
    if not isinstance(parent, list):
        return None
    parent[path[-1] : path[-1]] = [copy.deepcopy(parent[path[-1]]) for _ in range(rnd.randint(1, 8))]
    return False


def _long_string(rnd: random.Random, doc: Any, path: Path) -> bool | None:
    if not isinstance(_get(doc, path), str):
        return None
    _parent(doc, path)[path[-1]] = "x" * rnd.choice([10_000, 1_000_000])
    return False


TREE_OPS: dict[str, TreeOp] = {
    "delete": _delete,
    "rename": _rename,
    "pool": _pool,
    "nan": _leaf_op(lambda rnd, v, p: float("nan"), True),
    "inf": _leaf_op(lambda rnd, v, p: rnd.choice([float("inf"), float("-inf")]), True),
    "negate": _leaf_op(_negate, True),
    "unit": _leaf_op(lambda rnd, v, p: rnd.choice(["5 parsecs", "12 furlongs/s", "3xs", "1e3e3s"]), True),
    "type": _leaf_op(lambda rnd, v, p: rnd.choice(["abc", True, [1, 2], {"value": 1}]), True),
    "huge": _leaf_op(lambda rnd, v, p: rnd.choice([_digits(5000), 10**30, 2**63, "1e300s", "1e300B"]), False),
    "deep": _leaf_op(lambda rnd, v, p: _deep(rnd.choice([50, 500, 5000])), True),
    "long_list": _leaf_op(lambda rnd, v, p: list(range(rnd.choice([1000, 100_000]))), True),
    "name": _name_to_container,
    "preset": _unknown_preset,
    "duplicate": _duplicate,
    "long_string": _long_string,
}


def mutate_tree(rnd: random.Random, doc: Any) -> tuple[Any, Mutation]:
    """A deep copy of ``doc`` with one tree mutation applied (retrying places where an operator does not apply)."""
    for _ in range(200):
        out = copy.deepcopy(doc)
        places = _places(out)
        name = rnd.choice(sorted(TREE_OPS))
        path = rnd.choice(places)
        must = TREE_OPS[name](rnd, out, path)
        if must is not None:
            return out, Mutation(operator=name, where=_text(path), must_refuse=must)
    raise RuntimeError("no mutation applies to this document")


# --------------------------------------------------------------------------- YAML text operators

_BOMB = "\n".join(
    ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
)


def mutate_yaml_text(rnd: random.Random, text: str) -> tuple[str, Mutation]:
    """``text`` (a YAML file) with one textual mutation."""
    lines = text.splitlines()
    op = rnd.choice(["bomb", "tag", "truncate", "flip", "brackets", "tab", "duplicate_key"])
    if op == "bomb":
        return text + "\n" + _BOMB + "\n", Mutation(operator=op, where="top", must_refuse=True)
    if op == "tag":
        i = _value_line(rnd, lines)
        key = lines[i].split(":", 1)[0]
        lines[i] = f'{key}: !!python/object/apply:os.system ["true"]'
        return "\n".join(lines), Mutation(operator=op, where=f"line {i + 1}", must_refuse=True)
    if op == "brackets":
        i = _value_line(rnd, lines)
        key = lines[i].split(":", 1)[0]
        lines[i] = f"{key}: " + "[" * rnd.choice([1000, 100_000])
        return "\n".join(lines), Mutation(operator=op, where=f"line {i + 1}", must_refuse=True)
    if op == "tab":
        i = rnd.randrange(len(lines))
        lines[i] = "\t" + lines[i].lstrip(" ")
        return "\n".join(lines), Mutation(operator=op, where=f"line {i + 1}", must_refuse=False)
    if op == "duplicate_key":
        i = _value_line(rnd, lines)
        lines.insert(i + 1, lines[i])
        return "\n".join(lines), Mutation(operator=op, where=f"line {i + 1}", must_refuse=False)
    data = mutate_bytes(rnd, text.encode(), ops=("truncate",) if op == "truncate" else ("flip",))[0]
    return data.decode("utf-8", errors="surrogateescape"), Mutation(operator=op, where="bytes", must_refuse=False)


def _value_line(rnd: random.Random, lines: list[str]) -> int:
    """A line of the form ``key: value``."""
    candidates = [i for i, line in enumerate(lines) if re.match(r"^\s*[\w.\[\]]+:\s*\S", line)]
    return rnd.choice(candidates)


# --------------------------------------------------------------------------- GraphML

_DATA = re.compile(r'<data key="([^"]+)">([^<]*)</data>')
_ELEMENT = re.compile(r"<(node|edge)\b.*?</\1>", re.S)


def mutate_graphml(rnd: random.Random, text: str) -> tuple[str, Mutation]:
    """``text`` (a GraphML file) with one mutation of a data value or an element."""
    op = rnd.choice(["value", "value", "value", "drop_data", "drop_element", "dup_element", "kind", "truncate", "key"])
    if op in ("drop_element", "dup_element"):
        m = rnd.choice(list(_ELEMENT.finditer(text)))
        repl = "" if op == "drop_element" else m.group(0) + m.group(0)
        return text[: m.start()] + repl + text[m.end() :], Mutation(
            operator=op, where=m.group(0)[:40], must_refuse=False
        )
    if op == "truncate":
        cut = rnd.randrange(len(text) - 20)
        return text[:cut], Mutation(operator=op, where=f"char {cut}", must_refuse=True)
    if op == "key":
        i = text.index("</node>")
        out = text[:i] + '<data key="no_such_attribute">1</data>' + text[i:]
        return out, Mutation(operator=op, where="first node", must_refuse=True)
    matches = list(_DATA.finditer(text))
    if op == "kind":
        matches = [m for m in matches if m.group(2) in ("broker", "publisher", "subscriber")] or matches
    m = rnd.choice(matches)
    key, value = m.group(1), m.group(2)
    if op == "drop_data":
        return text[: m.start()] + text[m.end() :], Mutation(operator=op, where=key, must_refuse=False)
    new, must = _graphml_value(rnd, op, key, value)
    out = text[: m.start()] + f'<data key="{key}">{new}</data>' + text[m.end() :]
    return out, Mutation(operator=f"{op}:{new[:20]}", where=key, must_refuse=must)


def _graphml_value(rnd: random.Random, op: str, key: str, value: str) -> tuple[str, bool]:
    if op == "kind":
        return "router", True
    number = _float_or_none(value)
    choice = rnd.choice(["nan", "negative", "garbage", "huge", "empty", "unicode", "pool"])
    if choice == "nan":
        return "NaN", number is not None
    if choice == "negative" and number is not None and number > 0:
        return str(-number), bool(NON_NEGATIVE.search(key))
    if choice == "garbage":
        return "abc", number is not None
    if choice == "huge":
        return "1" + "0" * rnd.choice([30, 400, 5000]), False
    if choice == "empty":
        return "", False
    if choice == "unicode":
        return "é✓🚀", False
    return str(rnd.choice(POOL)), False


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------- bytes (traces)

BYTE_OPS = ("flip", "truncate", "insert", "length", "zero")


def mutate_bytes(rnd: random.Random, data: bytes, ops: tuple[str, ...] = BYTE_OPS) -> tuple[bytes, Mutation]:
    """``data`` with bytes flipped, cut, inserted, or a 4-byte length field set to 0xFFFFFFFF or zeroed."""
    op = rnd.choice(ops)
    buf = bytearray(data)
    at = rnd.randrange(len(buf))
    if op == "flip":
        for _ in range(rnd.randint(1, 8)):
            i = rnd.randrange(len(buf))
            buf[i] ^= 1 << rnd.randrange(8)
    elif op == "truncate":
        del buf[at:]
    elif op == "insert":
        buf[at:at] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 64)))
    elif op == "length":
        buf[at : at + 4] = b"\xff\xff\xff\xff"
    else:
        buf[at : at + rnd.randint(1, 64)] = bytes(rnd.randint(1, 64))
    return bytes(buf), Mutation(operator=op, where=f"byte {at}", must_refuse=False)


#: Values put into a CampusIoT record's fields.
TRACE_VALUES: tuple[Any, ...] = (10**30, -(10**30), float("nan"), float("inf"), -1, "abc", None, [], {}, 1.5, "")


def mutate_ndjson_gz(rnd: random.Random, data: bytes) -> tuple[bytes, Mutation]:
    """A gzip'd NDJSON trace with one record's field set to an odd value, or its bytes mutated."""
    if rnd.random() < 0.4:
        return mutate_bytes(rnd, data)
    lines = gzip.decompress(data).decode().splitlines()
    i = rnd.randrange(len(lines))
    try:
        record = json.loads(lines[i])
    except ValueError:
        return mutate_bytes(rnd, data)
    if not isinstance(record, dict) or not record:
        return mutate_bytes(rnd, data)
    key = rnd.choice(sorted(record))
    record[key] = rnd.choice(TRACE_VALUES)
    lines[i] = json.dumps(record)
    out = gzip.compress("\n".join(lines).encode(), mtime=0)
    return out, Mutation(operator="field", where=f"line {i + 1}.{key}", must_refuse=False)
