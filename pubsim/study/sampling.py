"""Points of a study: grid (Cartesian product), zip (lists varied
together) and samples (random or Latin hypercube) over ranges.

The blocks combine as a product, grid x zip x samples, in that nesting
order (the last grid path varies fastest). Sampled values are SI numbers:
range ends may be unit strings (``1ms``, ``2k/s``, ``1KiB``, ``100Mbit/s``,
read by :mod:`pubsim.sim.units`), and a range whose two ends are integers gives
integers.

Latin hypercube sampling (McKay, Beckman & Conover 1979) uses
:class:`scipy.stats.qmc.LatinHypercube` with an explicit seed: each of the
``n`` equal strata of every dimension holds exactly one sample.
"""

from __future__ import annotations

import itertools
import math
import numbers

import numpy as np
from scipy.stats import qmc

from ..scenario import MAX_SEED
from ..sim import units
from ..sim.errors import ConfigError
from .fieldpath import parse_path

__all__ = ["grid_points", "zip_points", "sample_points", "unit_samples", "combine", "MAX_POINTS"]

#: Most points of a study (each is parsed and run): counted before any list of them is built.
MAX_POINTS = 100_000

_PARSERS = (units.parse_duration_s, units.parse_size_bytes, units.parse_rate_Bps, units.parse_rate_per_s)


def _mapping(spec, field, what):
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(field, spec, f"a non-empty mapping of {what}")
    for path in spec:
        parse_path(path, f"{field}.{path}")
    return spec


def _values(values, field):
    if not isinstance(values, list) or not values:
        raise ConfigError(field, values, "a non-empty list of values")
    return values


def grid_points(spec, field="vary.grid"):
    """Every combination of the listed values: a list of ``{path: value}``."""
    spec = _mapping(spec, field, "field paths to lists of values")
    lists = [_values(v, f"{field}.{p}") for p, v in spec.items()]
    _check_points(field, [len(v) for v in lists])
    return [dict(zip(spec, combo)) for combo in itertools.product(*lists)]


def _check_points(field, sizes):
    """Refuse a product of ``sizes`` points beyond :data:`MAX_POINTS` before building it."""
    total = math.prod(sizes)
    if total > MAX_POINTS:
        raise ConfigError(field, total, f"at most {MAX_POINTS:,} points in a study (split it into several studies)")


def zip_points(spec, field="vary.zip"):
    """The k-th values of every list together: a list of ``{path: value}``."""
    spec = _mapping(spec, field, "field paths to equal-length lists")
    lists = [_values(v, f"{field}.{p}") for p, v in spec.items()]
    n = len(lists[0])
    for path, values in zip(spec, lists):
        if len(values) != n:
            raise ConfigError(
                f"{field}.{path}", values, f"a list as long as the other zip lists ({n} values, not {len(values)})"
            )
    return [dict(zip(spec, row)) for row in zip(*lists)]


def _is_number(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and np.isfinite(x)


def _range_ends(path, ends, field):
    """(lo, hi, integer) of one range; unit strings parsed to SI numbers."""
    if not isinstance(ends, list) or len(ends) != 2:
        raise ConfigError(field, ends, "[lo, hi]")
    if all(_is_number(e) for e in ends):
        lo, hi = ends
    elif all(isinstance(e, (str, numbers.Real)) and not isinstance(e, bool) for e in ends):
        for parse in _PARSERS:
            try:
                lo, hi = (parse(e, field) for e in ends)
                break
            except ConfigError:
                continue
        else:
            raise ConfigError(field, ends, "[lo, hi], numbers or quantities of one kind (1ms, 2k/s, 1KiB)")
    else:
        raise ConfigError(field, ends, "[lo, hi], numbers or quantities such as 1ms")
    if not lo <= hi:
        raise ConfigError(field, ends, "[lo, hi] with lo <= hi")
    integer = all(isinstance(x, numbers.Integral) for x in (lo, hi))
    return lo, hi, integer


def unit_samples(method, n, dims, seed, field="vary.sample.method"):
    """``n`` x ``dims`` points in [0, 1), random or Latin hypercube."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    if method == "random":
        return rng.random((n, dims))
    if method == "lhs":
        try:
            sampler = qmc.LatinHypercube(d=dims, rng=rng)
        except TypeError:  # scipy < 1.15 names it seed
            sampler = qmc.LatinHypercube(d=dims, seed=rng)
        return sampler.random(n)
    raise ConfigError(field, method, "one of ['lhs', 'random']")


def sample_points(spec, default_seed, field="vary.sample"):
    """``n`` sampled points over ``ranges``: a list of ``{path: value}``."""
    if not isinstance(spec, dict):
        raise ConfigError(field, spec, "a mapping with method, n, seed and ranges")
    unknown = sorted(set(spec) - {"method", "n", "seed", "ranges"})
    if unknown:
        raise ConfigError(f"{field}.{unknown[0]}", spec[unknown[0]], "one of ['method', 'n', 'ranges', 'seed']")
    method = spec.get("method", "lhs")
    if not isinstance(method, str) or method not in ("lhs", "random"):
        raise ConfigError(f"{field}.method", method, "one of ['lhs', 'random']")
    n, seed = spec.get("n"), spec.get("seed", default_seed)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"{field}.n", n, "an integer >= 1")
    _check_points(f"{field}.n", [n])
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0 or seed > MAX_SEED:
        raise ConfigError(f"{field}.seed", seed, "an integer in [0, 2**128 - 1]")
    ranges = _mapping(spec.get("ranges"), f"{field}.ranges", "field paths to [lo, hi]")
    ends = [_range_ends(p, v, f"{field}.ranges.{p}") for p, v in ranges.items()]
    u = unit_samples(method, n, len(ends), seed, f"{field}.method")
    points = []
    for row in u:
        point = {}
        for path, (lo, hi, integer), x in zip(ranges, ends, row):
            point[path] = min(int(np.floor(lo + x * (hi - lo + 1))), hi) if integer else float(lo + x * (hi - lo))
        points.append(point)
    return points


def combine(*blocks):
    """Product of blocks (lists of ``{path: value}``), merged in order."""
    _check_points("vary", [len(b) for b in blocks])
    out = [{}]
    for block in blocks:
        out = [{**a, **b} for a in out for b in block]
    return out
