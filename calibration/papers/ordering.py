"""Ordering tests: in which order do messages published in a given order arrive (SYSTEMS.md §6, YAMI4).

``full.orderings`` of a ``studies`` folder maps a label to ``base`` (a
scenario file whose publishers send a fixed schedule) and ``grid``: per
dimension, per level label, field-path overrides of the base
(:func:`pubsim.study.fieldpath.apply_overrides`). Every combination of
levels is one case, run once (it is deterministic up to the seed) with full
records; the arrival order is the topics' last path segment (``prio/2`` or
``prio.2`` -> ``2``) of the deliveries sorted by delivery time, over all subscribers.
"""

from __future__ import annotations

import itertools
import re

import pandas as pd

from ...run import simulate
from ...scenario import parse_scenario, read_yaml
from ...sim.errors import ConfigError
from ...study.fieldpath import apply_overrides
from . import setting as S

__all__ = ["run_orderings", "arrival_order"]


def arrival_order(deliveries):
    """The topics' last segments in delivery order, joined by spaces (ties by publish time)."""
    d = deliveries.sort_values(["delivery_time_s", "publish_time_s"], kind="stable")
    return " ".join(re.split(r"[/.]", str(t))[-1] for t in d["topic"])


def _cases(grid, where):
    dims = []
    for dim, levels in grid.items():
        if not isinstance(levels, dict) or not levels:
            raise ConfigError(f"{where}.grid.{dim}", levels, "a mapping of level label -> {field path: value}")
        for label, over in levels.items():
            if not isinstance(over, dict):
                raise ConfigError(f"{where}.grid.{dim}.{label}", over, "a mapping of field path -> value")
        dims.append([(dim, str(label), over) for label, over in levels.items()])
    for combo in itertools.product(*dims):
        overrides = {}
        for _, _, over in combo:
            overrides.update(over)
        yield {dim: label for dim, label, _ in combo}, overrides


def _run_case(raw, base_dir, overrides, where):
    scenario = parse_scenario(apply_overrides(raw, overrides, lambda p: f"{where}: {p}"), base_dir)
    run = scenario.run
    r = simulate(
        scenario.topology,
        duration_s=run["duration_s"],
        warmup_s=0.0,
        seed=scenario.seed,
        record="full",
    )
    d = r.deliveries()
    return {
        "arrival_order": arrival_order(d),
        "delivered": len(d),
        "last_delivery_s": float(d["delivery_time_s"].max()) if len(d) else None,
    }


def run_orderings(paper, store, counter, progress=None):
    """One table per ordering test: the case's levels, the arrival order, deliveries."""
    where = f"{paper.folder}/paper.yaml:{'quick' if paper.quick else 'full'}"
    tables = {}
    for label, item in paper.setting.get("orderings", {}).items():
        w = f"{where}.orderings.{label}"
        if not isinstance(item, dict):
            raise ConfigError(w, item, "a mapping with base and grid")
        path = paper.folder / str(item.get("base", ""))
        if not path.is_file():
            raise ConfigError(f"{w}.base", item.get("base"), "a scenario file (relative to the folder)")
        _, raw = read_yaml(path)
        rows = []
        for levels, overrides in _cases(S.mapping(item, "grid", w), w):
            key = f"order/{label}/" + "/".join(f"{k}={v}" for k, v in levels.items())
            rec = counter.cached(store, key, lambda o=overrides, r=raw, d=path.parent, w=w: _run_case(r, d, o, w))
            rows.append({**levels, **rec})
            if progress:
                progress(key)
        tables[label] = pd.DataFrame(rows)
    return tables
