"""Distributions of service times, sizes and delays, as frozen parameter objects.

Each distribution knows its mean, squared coefficient of variation (``scv``)
and lower bound, and samples with an explicit :class:`numpy.random.Generator`.
Values are in the unit of the field that holds them (seconds for times, bytes
for sizes). :func:`parse_distribution` reads the forms accepted at the edges:
a plain value (``2ms``), ``exp(1ms)``, ``uniform(1ms, 3ms)``,
``lognormal(1ms, 0.5)`` (mean, cv), ``gamma(1ms, 0.5)`` (mean, cv),
``const(2ms)``, ``shifted(10us, exp(1ms))``, or a mapping
``{dist: exponential, mean: 1ms}``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ConfigError

Unit = Callable[[Any, str], float]
"""``unit(value, field) -> float``: one value converted to SI (e.g. :func:`pubsim.sim.units.parse_duration_s`)."""

__all__ = [
    "Distribution",
    "Constant",
    "Exponential",
    "Uniform",
    "LogNormal",
    "Gamma",
    "Empirical",
    "Shifted",
    "Sporadic",
    "parse_distribution",
]


class Distribution:
    """Base of all distributions; subclasses are frozen dataclasses."""

    @property
    def is_constant(self) -> bool:
        """Every draw is the same value (no random numbers needed)."""
        return False

    @property
    def mean(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def scv(self) -> float:
        """Squared coefficient of variation, Var/mean^2."""
        raise NotImplementedError

    @property
    def min_value(self) -> float:
        """Smallest value the distribution can take."""
        return 0.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` values."""
        raise NotImplementedError


def _check_nonneg(name: str, value: object) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ConfigError(name, value, "a finite number >= 0")


@dataclass(frozen=True, kw_only=True)
class Constant(Distribution):
    """Always ``value``."""

    value: float
    is_constant = True

    def __post_init__(self) -> None:
        _check_nonneg("value", self.value)

    @property
    def mean(self) -> float:
        return float(self.value)

    @property
    def scv(self) -> float:
        return 0.0

    @property
    def min_value(self) -> float:
        return float(self.value)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, float(self.value))

    def __str__(self) -> str:
        return f"const({self.value!r})"


@dataclass(frozen=True, kw_only=True)
class Exponential(Distribution):
    """Exponential with the given mean (rate = 1/mean)."""

    mean_value: float

    def __post_init__(self) -> None:
        _check_nonneg("mean", self.mean_value)

    @property
    def mean(self) -> float:
        return float(self.mean_value)

    @property
    def scv(self) -> float:
        return 1.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.exponential(self.mean_value, n)

    def __str__(self) -> str:
        return f"exp({self.mean_value!r})"


@dataclass(frozen=True, kw_only=True)
class Uniform(Distribution):
    """Uniform on [low, high)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        _check_nonneg("low", self.low)
        _check_nonneg("high", self.high)
        if self.high < self.low:
            raise ConfigError("high", self.high, f"a value >= low ({self.low!r})")

    @property
    def mean(self) -> float:
        return 0.5 * (self.low + self.high)

    @property
    def scv(self) -> float:
        m = self.mean
        return 0.0 if m == 0 else (self.high - self.low) ** 2 / 12.0 / m**2

    @property
    def min_value(self) -> float:
        return float(self.low)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, n)

    def __str__(self) -> str:
        return f"uniform({self.low!r}, {self.high!r})"


@dataclass(frozen=True, kw_only=True)
class _MeanCV(Distribution):
    """A two-parameter family given by its mean and coefficient of variation."""

    mean_value: float
    cv: float

    def __post_init__(self) -> None:
        _check_nonneg("mean", self.mean_value)
        _check_nonneg("cv", self.cv)

    @property
    def mean(self) -> float:
        return float(self.mean_value)

    @property
    def scv(self) -> float:
        return float(self.cv) ** 2

    def __str__(self) -> str:
        return f"{type(self).__name__.lower()}({self.mean_value!r}, cv={self.cv!r})"


@dataclass(frozen=True, kw_only=True)
class LogNormal(_MeanCV):
    """Log-normal given by its mean and coefficient of variation ``cv``."""

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        sigma2 = math.log1p(self.cv**2)
        mu = math.log(self.mean_value) - sigma2 / 2 if self.mean_value > 0 else -math.inf
        return rng.lognormal(mu, math.sqrt(sigma2), n)


@dataclass(frozen=True, kw_only=True)
class Gamma(_MeanCV):
    """Gamma given by its mean and coefficient of variation ``cv`` (> 0)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.cv > 0:
            raise ConfigError("cv", self.cv, "a number > 0")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        shape = 1.0 / self.cv**2
        return rng.gamma(shape, self.mean_value / shape, n)


@dataclass(frozen=True, kw_only=True)
class Empirical(Distribution):
    """Resampling of observed values (with replacement, equal weights)."""

    values: tuple = field(repr=False)

    def __post_init__(self) -> None:
        arr = np.asarray(self.values, dtype=float)
        if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ConfigError("values", f"<{arr.size} values>", "a non-empty list of finite numbers >= 0")
        object.__setattr__(self, "values", tuple(arr.tolist()))

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def scv(self) -> float:
        m = self.mean
        return 0.0 if m == 0 else float(np.var(self.values)) / m**2

    @property
    def min_value(self) -> float:
        return float(min(self.values))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        arr = np.asarray(self.values)
        return arr[rng.integers(0, arr.size, n)]

    def __str__(self) -> str:
        return f"empirical(n={len(self.values)}, mean={self.mean!r})"


@dataclass(frozen=True, kw_only=True)
class Shifted(Distribution):
    """``offset`` plus a draw of ``base`` (a floor plus a variable part)."""

    offset: float
    base: Distribution

    def __post_init__(self) -> None:
        _check_nonneg("offset", self.offset)

    @property
    def is_constant(self) -> bool:
        return self.base.is_constant

    @property
    def mean(self) -> float:
        return self.offset + self.base.mean

    @property
    def scv(self) -> float:
        m = self.mean
        return 0.0 if m == 0 else self.base.scv * self.base.mean**2 / m**2

    @property
    def min_value(self) -> float:
        return self.offset + self.base.min_value

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.offset + self.base.sample(rng, n)

    def __str__(self) -> str:
        return f"shifted({self.offset!r}, {self.base})"


@dataclass(frozen=True, kw_only=True)
class Sporadic(Distribution):
    """A draw of ``base``, plus a draw of ``extra`` with ``probability``.

    A delay that is usually ``base`` and now and then longer: for example a
    woken process that must wait for the next scheduler tick (``extra``
    uniform on one tick) once in a while. Each block of draws takes the
    base draws, then the uniform choices, then the extra draws.
    """

    base: Distribution
    probability: float
    extra: Distribution

    def __post_init__(self) -> None:
        p = self.probability
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ConfigError("probability", p, "a probability in [0, 1]")

    @property
    def is_constant(self) -> bool:
        return self.base.is_constant and (self.probability == 0.0 or self.extra.is_constant and self.extra.mean == 0)

    @property
    def mean(self) -> float:
        return self.base.mean + self.probability * self.extra.mean

    @property
    def scv(self) -> float:
        m = self.mean
        if m == 0:
            return 0.0
        p, e = self.probability, self.extra
        var_extra = p * (e.scv * e.mean**2 + e.mean**2) - (p * e.mean) ** 2
        return (self.base.scv * self.base.mean**2 + var_extra) / m**2

    @property
    def min_value(self) -> float:
        return self.base.min_value

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        out = self.base.sample(rng, n)
        hit = rng.random(n) < self.probability
        return out + np.where(hit, self.extra.sample(rng, n), 0.0)

    def __str__(self) -> str:
        return f"sporadic({self.base}, {self.probability!r}, {self.extra})"


_CALL = re.compile(r"^\s*([a-zA-Z_]+)\s*\((.*)\)\s*$")
_ALIASES = {
    "const": "constant",
    "constant": "constant",
    "det": "constant",
    "deterministic": "constant",
    "exp": "exponential",
    "exponential": "exponential",
    "uniform": "uniform",
    "lognormal": "lognormal",
    "gamma": "gamma",
    "shifted": "shifted",
    "empirical": "empirical",
}


def _split_args(text: str) -> list[str]:
    """Split ``a, b(c, d), e`` at top-level commas."""
    parts: list[str] = []
    depth, cur = 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _args_to_mapping(kind: str, args: list[str]) -> dict[str, Any]:
    names = {
        "constant": ["value"],
        "exponential": ["mean"],
        "uniform": ["low", "high"],
        "lognormal": ["mean", "cv"],
        "gamma": ["mean", "cv"],
        "shifted": ["offset", "base"],
        "empirical": [],
    }[kind]
    out: dict[str, Any] = {}
    for i, arg in enumerate(args):
        if "=" in arg and "(" not in arg.split("=", 1)[0]:
            key, val = arg.split("=", 1)
            out[key.strip()] = val.strip()
        elif i < len(names):
            out[names[i]] = arg
        else:
            raise ConfigError("distribution", f"{kind}({', '.join(args)})", "fewer arguments")
    return out


def _build(kind: str, spec: dict[str, Any], unit: Unit, field_name: str) -> Distribution:
    def val(key: str) -> float:
        if key not in spec:
            raise ConfigError(f"{field_name}.{key}", None, f"a value (required by {kind})")
        return unit(spec[key], f"{field_name}.{key}")

    def num(key: str) -> float:
        try:
            return float(spec[key])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{field_name}.{key}", spec.get(key), "a number") from None

    try:
        if kind == "constant":
            return Constant(value=val("value"))
        if kind == "exponential":
            return Exponential(mean_value=val("mean"))
        if kind == "uniform":
            return Uniform(low=val("low"), high=val("high"))
        if kind == "lognormal":
            return LogNormal(mean_value=val("mean"), cv=num("cv"))
        if kind == "gamma":
            return Gamma(mean_value=val("mean"), cv=num("cv"))
        if kind == "shifted":
            return Shifted(offset=val("offset"), base=parse_distribution(spec.get("base"), unit, f"{field_name}.base"))
        if kind == "empirical":
            return Empirical(values=tuple(unit(v, f"{field_name}.values") for v in spec.get("values", ())))
    except ConfigError as err:
        if err.field.startswith(field_name):
            raise
        raise ConfigError(f"{field_name}.{err.field}", err.value, err.expected) from None
    raise ConfigError(field_name, kind, f"one of {sorted(set(_ALIASES.values()))}")


def parse_distribution(spec: Any, unit: Unit, field_name: str = "distribution") -> Distribution:
    """Read a distribution from a number, string or mapping.

    Parameters
    ----------
    spec : Distribution, number, str or dict
        See the module docstring for the accepted forms.
    unit : callable
        ``unit(value, field) -> float`` converting one value to SI, for example
        :func:`pubsim.sim.units.parse_duration_s`.
    field_name : str
        Name used in error messages.

    Returns
    -------
    Distribution
    """
    if isinstance(spec, Distribution):
        return spec
    if isinstance(spec, dict):
        spec = dict(spec)
        kind = _ALIASES.get(str(spec.pop("dist", spec.pop("kind", ""))).lower())
        if kind is None:
            raise ConfigError(f"{field_name}.dist", spec, f"one of {sorted(set(_ALIASES.values()))}")
        return _build(kind, spec, unit, field_name)
    if isinstance(spec, str):
        match = _CALL.match(spec)
        if match:
            kind = _ALIASES.get(match.group(1).lower())
            if kind is None:
                raise ConfigError(field_name, spec, f"a distribution, one of {sorted(set(_ALIASES.values()))}")
            return _build(kind, _args_to_mapping(kind, _split_args(match.group(2))), unit, field_name)
    return Constant(value=unit(spec, field_name))
