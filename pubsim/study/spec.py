"""Study files: a base scenario and the fields to vary.

Layout (every field checked, errors one line naming the field)::

    name: brokers-vs-load
    base: ../quickstart.yaml        # or scenario: {an inline scenario mapping}
    replications: 3                 # per point (overrides the scenario's)
    seed: 7                         # default: the scenario's seed
    set:                            # optional: fixed overrides for every point
      run.duration: 3s
    vary:                           # grid x zip x sample (any of the three)
      grid: {topology.broker.preset: [mosquitto, rabbitmq-mqtt]}
      zip: {topology.publishers[0].count: [10, 20], topology.subscribers[0].count: [30, 60]}
      sample: {method: lhs, n: 8, seed: 3, ranges: {topology.link.latency_s: [1ms, 20ms]}}

Field paths (:mod:`pubsim.study.fieldpath`) index the raw scenario mapping;
each point's mapping is checked by :func:`pubsim.scenario.parse_scenario`, so
every scenario field can be varied and a bad value gives the scenario's own
error, prefixed with the point.

Seeds and common random numbers: every point is run with the study seed,
and replication ``r`` of every point draws from
``StreamFactory(seed, r)`` (:mod:`pubsim.sim.rng`), i.e. from the children
``spawn_key=(r, component, purpose)`` of the one root
``SeedSequence(seed)`` of the study. Points therefore share common random
numbers: the same component draws the same stream in replication ``r`` of
every point, which makes differences between points less noisy than with
independent streams (Law 2015, §11.2), and two points with the same
configuration give identical results.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from ..budget import check as check_budget
from ..scenario import parse_scenario, parse_yaml, read_replications, read_seed, read_yaml
from ..sim.errors import ConfigError, short_repr
from .fieldpath import apply_overrides, parse_path
from .sampling import combine, grid_points, sample_points, zip_points

__all__ = ["Point", "Study", "load_study", "parse_study", "canonical_hash"]

_KEYS = {"name", "description", "base", "scenario", "replications", "seed", "set", "vary"}
_VARY = {"grid", "zip", "sample"}
_RESERVED = {"seed", "replications"}  # set by the study itself


def canonical_hash(obj) -> str:
    """SHA-256 (hex) of ``obj`` as canonical JSON (sorted keys)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Point:
    """One configuration of a study.

    ``overrides`` maps varied field paths to their values as given;
    ``config_hash`` is the SHA-256 of the point's full scenario mapping
    (seed included) and of the parameters it resolved to (the presets it
    names, as they are now), so a changed base, study or preset is noticed
    on resume.
    """

    point_id: str
    overrides: dict
    index: int = 0
    config_hash: str = ""

    def label(self) -> str:
        """``path=value, ...`` (values over 60 characters quoted short)."""
        return ", ".join(f"{p}={_short(v)}" for p, v in self.overrides.items()) or "base"


def _short(value, limit=60):
    """Text as it is, other values as their repr; either cut to about ``limit`` characters."""
    if isinstance(value, str) and len(value) <= limit:
        return value
    return short_repr(value, limit)


@dataclass(frozen=True, kw_only=True)
class Study:
    """A parsed, checked study (see the module docstring)."""

    name: str
    description: str
    points: tuple
    replications: int
    seed: int
    varied: tuple
    base: dict = field(repr=False)
    base_dir: str = "."
    fixed: dict = field(default_factory=dict)
    base_hash: str = ""
    config_hash: str = ""
    text: str = field(default="", repr=False)
    path: str = ""

    def columns(self, point) -> dict:
        """``{path: value}`` of ``point`` for the summary table: values as given,
        except that a path whose values mix text and numbers gets text for all
        (one type per column)."""
        return {path: str(v) if path in self._mixed else v for path, v in point.overrides.items()}

    @cached_property
    def _mixed(self):
        return {path for path in self.varied if len({isinstance(p.overrides[path], str) for p in self.points}) > 1}

    def raw(self, point) -> dict:
        """The raw scenario mapping of ``point`` (base + set + overrides, the study seed)."""
        raw = apply_overrides(self.base, {**self.fixed, **point.overrides})
        raw["seed"] = self.seed
        return raw


def _base(data, study_dir):
    """(raw scenario mapping, its directory) from ``base`` or ``scenario``."""
    if ("base" in data) == ("scenario" in data):
        raise ConfigError("base", data.get("base"), "either base (a scenario file) or scenario (a mapping)")
    if "scenario" in data:
        if not isinstance(data["scenario"], dict):
            raise ConfigError("scenario", data["scenario"], "a scenario mapping")
        return data["scenario"], Path(study_dir)
    if not isinstance(data["base"], str):
        raise ConfigError("base", data["base"], "the path of a scenario file")
    path = Path(study_dir) / data["base"]
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:  # strerror only: the error's own text repeats the (possibly huge) path
        raise ConfigError("base", data["base"], f"a readable scenario file ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise ConfigError("base", data["base"], f"a UTF-8 scenario file ({err.reason} at byte {err.start})") from None
    raw = parse_yaml(path, text)
    if not isinstance(raw, dict):
        raise ConfigError("base", data["base"], "a scenario file with a mapping at the top level")
    return raw, path.parent


def _vary(vary, seed):
    """({path: field name}, list of {path: value}) of the vary blocks."""
    if vary is None:
        return {}, [{}]
    if not isinstance(vary, dict):
        raise ConfigError("vary", vary, "a mapping with grid, zip and/or sample")
    unknown = sorted(set(vary) - _VARY)
    if unknown:
        raise ConfigError(f"vary.{unknown[0]}", vary[unknown[0]], f"one of {sorted(_VARY)}")
    makers = {
        "grid": lambda s: grid_points(s),
        "zip": lambda s: zip_points(s),
        "sample": lambda s: sample_points(s, seed),
    }
    fields, blocks = {}, []
    for block in ("grid", "zip", "sample"):
        if block not in vary:
            continue
        points = makers[block](vary[block])
        for path in points[0]:
            where = f"vary.{block}.ranges.{path}" if block == "sample" else f"vary.{block}.{path}"
            if path in fields:
                raise ConfigError(where, path, f"a path varied only once (also in {fields[path]})")
            fields[path] = where
        blocks.append(points)
    return fields, combine(*blocks)


def _fixed(spec):
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ConfigError("set", spec, "a mapping of field paths to values")
    for path in spec:
        parse_path(path, f"set.{path}")
    return dict(spec)


def _check_point(study, point, fields, budget=None):
    """Parse the point's scenario (and with ``budget``, estimate its cost,
    :func:`pubsim.budget.check`, with the study's replications); errors prefixed with the point."""
    try:
        apply_overrides(study.base, {**study.fixed, **point.overrides}, lambda p: fields.get(p, f"set.{p}"))
        raw = study.raw(point)
        scenario = parse_scenario(raw, study.base_dir, budget)
        if budget is not None:
            check_budget(scenario, budget, replications=study.replications)
    except ConfigError as err:
        if err.field.startswith(("vary.", "set.")):
            raise
        where = f"point {point.index} ({point.label()})" if point.overrides else "base scenario"
        raise ConfigError(f"{where}: {err.field}", err.value, err.expected) from None
    return canonical_hash({"scenario": raw, "resolved": _resolved(scenario)})


def _resolved(scenario):
    """The parameters a scenario's topology resolved to, as text: what a preset named in it holds
    (a refitted profile, a user preset that now shadows a built-in one) changes a point's hash."""
    g = scenario.topology
    nodes = sorted((str(n), repr(d)) for n, d in g.nodes(data=True))
    edges = sorted((str(u), str(v), repr(d)) for u, v, d in g.edges(data=True))
    return repr((nodes, edges, g.graph))


def parse_study(data, study_dir=".", *, text="", path="", default_name="study", budget=None):
    """Build a checked :class:`Study` from a loaded study mapping.

    With ``budget`` (:class:`pubsim.budget.Budget`) every point must fit it
    (``pubsim study run`` passes one); without, only the client limit of the
    environment applies (checked before client groups expand).
    """
    if not isinstance(data, dict):
        raise ConfigError("study", type(data).__name__, "a YAML mapping at the top level")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(unknown[0], data[unknown[0]], f"one of {sorted(_KEYS)}")
    base, base_dir = _base(data, study_dir)
    seed = read_seed(data, base.get("seed", 0) if isinstance(base.get("seed", 0), int) else 0)
    reps = read_replications(data, base.get("replications", 1) if isinstance(base.get("replications", 1), int) else 1)
    fixed = _fixed(data.get("set"))
    fields, overrides = _vary(data.get("vary"), seed)
    for key, where in list(fields.items()) + [(p, f"set.{p}") for p in fixed]:
        if parse_path(key, where)[0] in _RESERVED:
            raise ConfigError(
                where,
                key,
                "a scenario field other than seed and replications (set the study's seed and replications instead)",
            )
    both = sorted(set(fixed) & set(fields))
    if both:
        raise ConfigError(f"set.{both[0]}", both[0], f"a path not also varied (in {fields[both[0]]})")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ConfigError("name", name, "a non-empty string")
    study = Study(
        name=name,
        description=str(data.get("description", "")),
        points=(),
        replications=reps,
        seed=seed,
        varied=tuple(fields),
        base=base,
        base_dir=str(base_dir),
        fixed=fixed,
        base_hash=canonical_hash(base),
        text=text,
        path=str(path),
    )
    points = []
    for k, ov in enumerate(overrides):
        point = Point(f"p{k:04d}-{canonical_hash(ov)[:8]}", ov, k)
        points.append(Point(point.point_id, ov, k, _check_point(study, point, fields, budget)))
    config = canonical_hash({"points": [(p.point_id, p.config_hash) for p in points], "seed": seed})
    return replace(study, points=tuple(points), config_hash=config)


def load_study(path, budget=None):
    """Read and check a study file (safe YAML loader); with ``budget``, every point must fit it."""
    path = Path(path)
    text, data = read_yaml(path)
    return parse_study(data, path.parent, text=text, path=path, default_name=path.stem, budget=budget)
