"""Reading parameter dataclasses from plain mappings (YAML, GraphML).

Every field of a parameter dataclass declares how a human value is read with
``metadata={"unit": ...}``: ``"duration"`` (s), ``"size"`` (bytes),
``"bandwidth"`` (bytes/s), ``"rate"`` (1/s), ``"duration_dist"`` and
``"size_dist"`` (distributions), ``"count"``, ``"optional_count"``, ``"optional_duration"``,
``"optional_size"``, ``"probability"``, ``"float"``, ``"strings"``,
``"choice"`` (with ``choices``), ``"provenance"``. :func:`from_mapping`
rejects unknown fields and bad values with a one-line
:class:`~pubsim.sim.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ...sim import units
from ...sim.distributions import Distribution, parse_distribution
from ...sim.errors import ConfigError
from .. import presets
from .provenance import Provenance, parse_provenance

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["from_mapping", "to_mapping", "check_fields", "read_name", "check_one_core", "MAX_COUNT", "MAX_WORKERS"]

#: Reads one human value of a field: (value, field path) -> value in SI form.
Reader = Callable[[Any, str], Any]
_T = TypeVar("_T", bound="DataclassInstance")


#: Largest integer a count field accepts (the largest a float holds exactly);
#: a field may set a smaller one with ``metadata["max"]``. Whether the memory a
#: count implies fits is the resource estimate's question (:mod:`pubsim.budget`).
MAX_COUNT = 2**53
#: Most workers (threads, cores) of one broker or relay: each is a slot in the kernel.
MAX_WORKERS = 100_000


def _count(value: Any, field: str, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    bounded = f"an integer in [{minimum}, {maximum:,}]"
    expected = f"an integer >= {minimum}" if maximum == MAX_COUNT else bounded
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(field, value, expected)
    if isinstance(value, int):  # exact, and no float() of a 5000-digit integer (OverflowError)
        number: float = value
    else:
        try:
            number = float(value)
        except (ValueError, OverflowError):
            raise ConfigError(field, value, expected) from None
        if not math.isfinite(number) or not number.is_integer():
            raise ConfigError(field, value, expected)
    if number < minimum:
        raise ConfigError(field, value, expected)
    if number > maximum:
        raise ConfigError(field, value, bounded)
    return int(number)


def _optional(reader: Reader) -> Reader:
    def read(value: Any, field: str) -> Any:
        if value is None or (isinstance(value, str) and value.lower() in ("none", "unlimited", "inf", "")):
            return None
        return reader(value, field)

    return read


def _probability(value: Any, field: str) -> float:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "a probability in [0, 1)") from None
    if not 0.0 <= p < 1.0:
        raise ConfigError(field, value, "a probability in [0, 1)")
    return p


def _float(value: Any, field: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "a number") from None
    if not math.isfinite(x) or x < 0:
        raise ConfigError(field, value, "a finite number >= 0")
    return x


def _cpu_fraction(value: Any, field: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "a fraction of one core in (0, 1]") from None
    if not 0.0 < x <= 1.0:
        raise ConfigError(field, value, "a fraction of one core in (0, 1]")
    return x


_CORES = "a number of cores in (0, 1] (up to the cores of its host when placed on one)"
_LOAD = "a CPU load in [0, 1) cores (below the cores of its host when placed on one)"


def _cpu_cores(value: Any, field: str) -> float:
    """CPU in cores: > 0; more than one core only on a host (checked with the topology)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, _CORES) from None
    if not 0.0 < x <= MAX_WORKERS:
        raise ConfigError(field, value, _CORES)
    return x


def _cpu_load(value: Any, field: str) -> float:
    """A CPU load in cores: >= 0; one core or more only on a host (checked with the topology)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, _LOAD) from None
    if not 0.0 <= x < MAX_WORKERS:
        raise ConfigError(field, value, _LOAD)
    return x


def check_one_core(cpu_cores: float, load: float, where: str) -> None:
    """The limits of a process on no host: CPU at most one core, load below one core.

    ``where`` prefixes the field names (``"topology.broker."``, ``"node 'b'."``)."""
    if cpu_cores > 1.0:
        raise ConfigError(f"{where}cpu_fraction", cpu_cores, _CORES)
    if load >= 1.0:
        raise ConfigError(f"{where}background_cpu_fraction", load, _LOAD)


def _strings(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.split(";") if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(field, value, "a list of strings (or one string, ';'-separated)")
    return tuple(value)


READERS: dict[str, Reader] = {
    "duration": units.parse_duration_s,
    "size": units.parse_size_bytes,
    "bandwidth": units.parse_rate_Bps,
    "rate": units.parse_rate_per_s,
    "duration_dist": lambda v, f: parse_distribution(v, units.parse_duration_s, f),
    "size_dist": lambda v, f: parse_distribution(v, units.parse_size_bytes, f),
    "optional_size_dist": _optional(lambda v, f: parse_distribution(v, units.parse_size_bytes, f)),
    "count": _count,
    "positive_count": lambda v, f: _count(v, f, 1),
    "optional_count": _optional(_count),
    "optional_size": _optional(units.parse_size_bytes),
    "optional_duration": _optional(units.parse_duration_s),
    "probability": _probability,
    "float": _float,
    "cpu_fraction": _cpu_fraction,
    "cpu_cores": _cpu_cores,
    "cpu_load": _cpu_load,
    "strings": _strings,
    "provenance": parse_provenance,
    "text": lambda v, f: _text(v, f),
}


_COUNTS: dict[str, Callable[[Any, str, int], Any]] = {
    "count": lambda v, f, m: _count(v, f, 0, m),
    "positive_count": lambda v, f, m: _count(v, f, 1, m),
    "optional_count": lambda v, f, m: _optional(lambda x, g: _count(x, g, 0, m))(v, f),
}


def _text(value: Any, field: str) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ConfigError(field, value, "a name (text)")
    return str(value)


def read_name(value: Any, field: str) -> str:
    """A name (of a client, broker, topic or preset) as text: a string, or an
    integer written without quotes; a list, mapping, boolean or empty string is refused."""
    name = _text(value, field)
    if not name:
        raise ConfigError(field, value, "a non-empty name (text)")
    return name


def _flag(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
        return value.lower() in ("true", "yes")
    raise ConfigError(field, value, "true or false")


READERS["flag"] = _flag


def _nested(fld: dataclasses.Field, value: Any, path: str) -> Any:
    """A nested parameter object (``metadata["cls"]``): None, an instance, or a
    mapping (which may name a ``preset`` of kind ``metadata["preset"]``)."""
    cls = fld.metadata["cls"]
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, dict) and "preset" in value:
        try:
            value = presets.apply(fld.metadata["preset"], value)
        except ConfigError as err:
            raise ConfigError(f"{path}.preset", err.value, err.expected) from None
    return from_mapping(cls, value, path)


def _read(fld: dataclasses.Field, value: Any, path: str) -> Any:
    unit = cast(str, fld.metadata.get("unit"))  # every field declares one
    if unit == "choice":
        choices = fld.metadata["choices"]
        text = getattr(value, "value", value)
        if text not in choices:
            raise ConfigError(path, value, f"one of {list(choices)}")
        return text
    if unit == "params":  # a nested parameter object
        return _nested(fld, value, path)
    if unit == "raw":  # list-valued fields checked by the class itself; lists become tuples
        return tuple(value) if isinstance(value, list) else value
    if "max" in fld.metadata and unit in _COUNTS:  # a field's own upper bound
        return _COUNTS[unit](value, path, fld.metadata["max"])
    return READERS[unit](value, path)


def from_mapping(cls: type[_T], mapping: Any, path: str) -> _T:
    """Build ``cls`` from a mapping of human values.

    Parameters
    ----------
    cls : type
        A parameter dataclass whose fields carry ``metadata["unit"]``.
    mapping : dict
        Field name -> value (strings with units are accepted).
    path : str
        Where the mapping came from, prefixed to field names in errors.
    """
    if isinstance(mapping, cls):
        return mapping
    if not isinstance(mapping, dict):
        raise ConfigError(path, mapping, f"a mapping of {cls.__name__} fields")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in mapping.items():
        if key not in fields:
            raise ConfigError(f"{path}.{key}", value, f"not a {cls.__name__} field; known: {sorted(fields)}")
        kwargs[key] = _read(fields[key], value, f"{path}.{key}")
    try:
        return cls(**kwargs)
    except ConfigError as err:
        raise ConfigError(f"{path}.{err.field}", err.value, err.expected) from None
    except (TypeError, ValueError) as err:
        # a check in the class tripped on a value no reader converted (a "raw" field)
        raw = [k for k in kwargs if fields[k].metadata.get("unit") == "raw"]
        if len(raw) == 1:
            raise ConfigError(f"{path}.{raw[0]}", mapping[raw[0]], f"a valid value ({err})") from None
        raise ConfigError(
            path, {k: mapping[k] for k in raw} or mapping, f"valid {cls.__name__} fields ({err})"
        ) from None


def check_fields(obj: Any, path: str = "") -> None:
    """Validate a constructed parameter object field by field (used in ``__post_init__``).

    Values that are already in SI form pass through the same readers as
    human values, so a negative latency is rejected however it was given.
    """
    for fld in dataclasses.fields(obj):
        value = getattr(obj, fld.name)
        if isinstance(value, (Distribution, Provenance)):
            continue
        name = f"{path}{fld.name}"
        object.__setattr__(obj, fld.name, _read(fld, value, name))


def to_mapping(obj: Any) -> dict[str, Any]:
    """Flat ``{field: value}`` of a parameter object, values as plain text or numbers."""
    out = {}
    for fld in dataclasses.fields(obj):
        value = getattr(obj, fld.name)
        if isinstance(value, Provenance):
            continue
        if isinstance(getattr(value, "provenance", None), Provenance):  # nested (a broker's disk)
            value = f"{type(value).__name__}({', '.join(f'{k}={v}' for k, v in to_mapping(value).items())})"
        elif isinstance(value, tuple):
            value = ";".join(map(str, value))
        elif isinstance(value, Distribution):
            value = str(value)
        out[fld.name] = value
    return out
