"""Seed 2 (SYSTEMS.md §3-4): the limit of each ILDM placement and flooding mode, and the latency topic.

Per scenario of the folder (all of ``scenarios``, or those named by
``only``) (placements A-D x PF/SF, generated from
SYSTEMS.md §3 by ``experiments/ildm/generate.py``): the §4 interval search
on the simulator (:func:`pubsim.analysis.saturation_search`; only the
publishers matching ``rerate`` are re-rated, the 1 msg/s latency publisher
keeps its rate), giving the limit (ingress messages per second of all
re-rated publishers), the ingress and egress throughput at it and the
bottleneck; and one run at the scenario's own rates whose latency-topic
deliveries give the latency per node (hops from the latency publisher).
An optional ``set`` (field path -> value, :func:`pubsim.study.fieldpath.apply_overrides`)
changes every scenario alike, e.g. places its brokers on hosts.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...analysis.saturation import saturation_search
from ...run import simulate
from ...scenario import parse_scenario, read_yaml
from ...sim.errors import ConfigError
from ...study.fieldpath import apply_overrides
from . import setting as S
from .figures import bars
from .result import Counter, PaperResult

__all__ = ["run_limits"]


def _scenarios(paper, where):
    spec = S.mapping(paper.setting, "scenarios", where)
    out = {}
    for label, item in spec.items():
        w = f"{where}.scenarios.{label}"
        if not isinstance(item, dict):
            raise ConfigError(w, item, "a mapping with file, placement, mode")
        path = paper.folder / str(item.get("file", ""))
        if not path.is_file():
            raise ConfigError(f"{w}.file", item.get("file"), "a scenario file (relative to the folder)")
        out[str(label)] = {
            "path": path,
            "placement": str(item.get("placement", label)),
            "mode": str(item.get("mode", "")),
        }
    if "only" in paper.setting:
        only = S.names(paper.setting, "only", where, choices=set(out))
        out = {k: v for k, v in out.items() if k in only}
    return out


def _load(path, overrides, where):
    """The scenario at ``path`` with the paper's ``set`` overrides applied."""
    _, raw = read_yaml(path)
    return parse_scenario(apply_overrides(raw, overrides, lambda p: f"{where}.set: {p}"), base_dir=path.parent)


def _limit(scenario, cfg):
    sat = saturation_search(
        scenario,
        start_interval_s=cfg["start_s"],
        duration_s=cfg["probe_s"],
        warmup_s=cfg["warmup_s"],
        seed=cfg["seed"],
        steps=cfg["steps"],
        max_doublings=cfg["max_doublings"],
        rerate=cfg["rerate"],
    )
    rec = sat.record()
    probes = sat.probes
    at = probes[np.isclose(probes["interval_s"], sat.interval_s)] if math.isfinite(sat.interval_s) else probes[:0]
    first = at.iloc[0] if len(at) else None
    rec["ingress_at_limit_per_s"] = float(first["ingress_per_s"]) if first is not None else math.nan
    rec["egress_at_limit_per_s"] = float(first["egress_per_s"]) if first is not None else math.nan
    rec["probes"] = len(probes)
    return rec


def _latency(scenario, cfg):
    r = simulate(
        scenario.topology,
        duration_s=cfg["latency_s"],
        warmup_s=cfg["latency_warmup_s"],
        seed=cfg["seed"],
        record="full",
    )
    d = r.deliveries()
    d = d[d["topic"] == cfg["latency_topic"]]
    rows = []
    for sub, grp in d.groupby("subscriber", sort=True):
        lat = grp["latency_s"].to_numpy()
        rows.append(
            {
                "subscriber": str(sub),
                "hops": int(grp["hops"].median()),
                "deliveries": len(lat),
                "latency_p50_s": float(np.quantile(lat, 0.5)),
                "latency_p99_s": float(np.quantile(lat, 0.99)),
                "latency_mean_s": float(lat.mean()),
            }
        )
    return {"rows": rows}


def _config(paper, where):
    s = paper.setting
    search = S.mapping(s, "search", where)
    lat = S.mapping(s, "latency", where)
    w, lw = f"{where}.search", f"{where}.latency"
    rerate = s.get("rerate")
    if not isinstance(rerate, list) or not all(isinstance(x, str) for x in rerate):
        raise ConfigError(f"{where}.rerate", rerate, "a list of publisher name patterns")
    cfg = {
        "seed": S.count(s, "seed", where, 0),
        "rerate": rerate,
        "start_s": S.duration_s(search, "start", w),
        "probe_s": S.duration_s(search, "probe", w),
        "warmup_s": S.duration_s(search, "warmup", w, positive=False),
        "steps": S.count(search, "steps", w),
        "max_doublings": S.count(search, "max_doublings", w),
        "latency_s": S.duration_s(lat, "duration", lw),
        "latency_warmup_s": S.duration_s(lat, "warmup", lw, positive=False),
        "latency_topic": str(lat.get("topic", "")),
    }
    if not cfg["latency_topic"]:
        raise ConfigError(f"{lw}.topic", None, "the latency topic's name")
    return cfg


def run_limits(paper, store, *, progress=None):
    """Limit search and latency run per scenario (see the module docstring)."""
    where = f"{paper.folder}/paper.yaml:{'quick' if paper.quick else 'full'}"
    cfg = _config(paper, where)
    scenarios = _scenarios(paper, where)
    overrides = paper.setting.get("set", {})
    if not isinstance(overrides, dict):
        raise ConfigError(f"{where}.set", overrides, "a mapping of field path -> value")
    counter = Counter()
    limits, latency = [], []
    for label, sc in scenarios.items():
        scenario = _load(sc["path"], overrides, where)
        key = {"scenario": label, "placement": sc["placement"], "mode": sc["mode"]}
        rec = counter.cached(store, f"limit/{label}", lambda scenario=scenario: _limit(scenario, cfg))
        limits.append({**key, **rec})
        if progress:
            progress(f"limit/{label}")
        lat = store.get(f"latency/{label}")
        if lat is None:
            lat = {"rows": _latency(scenario, cfg)["rows"]}
            store.put(f"latency/{label}", lat)
            counter.ran += 1
        else:
            counter.skipped += 1
        latency.extend({**key, **row} for row in lat["rows"])
        if progress:
            progress(f"latency/{label}")
    lim = pd.DataFrame(limits)
    lat = pd.DataFrame(latency)
    res = PaperResult(tables={"limits": lim, "latency": lat}, ran=counter.ran, skipped=counter.skipped)
    res.figures["limits"] = bars(
        lim,
        group="placement",
        hue="mode",
        y="limit_per_s",
        title="limit per placement and flooding mode (predicted, §4 search; ingress msg/s)",
        ylabel="msg/s",
    )
    if len(lat):
        res.figures["latency"] = bars(
            lat.assign(node=lat["subscriber"]),
            group="scenario",
            hue="node",
            y="latency_p50_s",
            title="latency topic: median latency per node (predicted)",
            ylabel="s",
        )
    res.headline = ["predicted limit per placement (ingress msg/s, ± search error):"] + [
        f"  {r.scenario}: {r.limit_per_s:,.0f} ± {r.error_bound_pct:.1f} %"
        + ("" if r.limit_reached else " (not reached: a bound)")
        + (f", bottleneck {r.bottleneck}" if isinstance(r.bottleneck, str) else "")
        for r in lim.itertuples()
    ]
    return res
