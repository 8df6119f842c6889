"""Seeds 3-5 (SYSTEMS.md §6): settings written as study files, run by :mod:`pubsim.study` and tabulated.

``full.studies`` maps a label to ``file`` (a study file in the folder),
``columns`` (varied path -> column name of the table), ``metrics``
(summary columns kept, mean and 95 % half-width over replications) and
``figure`` (``x``, ``y``, ``hue``, optional ``kind: bars|lines``, ``logy``).
The quick setting may override a study's ``replications`` and ``set``
(merged into the study file's ``set``). Each study runs into
``study_dir/<label>`` with :func:`pubsim.study.run_study`, which skips the
finished (point, replication) tasks. ``full.orderings`` (optional) adds
ordering tests (:mod:`.ordering`), each point kept in the store.
"""

from __future__ import annotations

import pandas as pd

from ...scenario import read_yaml
from ...sim.errors import ConfigError
from ...study import run_study
from ...study.spec import parse_study
from ...study.stats import summary_with_ci
from . import setting as S
from .figures import bars, lines
from .ordering import run_orderings
from .result import Counter, PaperResult

__all__ = ["run_studies"]


def _study(paper, label, item, where):
    path = paper.folder / str(item.get("file", ""))
    if not path.is_file():
        raise ConfigError(f"{where}.file", item.get("file"), "a study file (relative to the folder)")
    text, data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(str(path), type(data).__name__, "a study mapping")
    data = dict(data)
    if "replications" in item:
        data["replications"] = S.count(item, "replications", where)
    if "set" in item:
        if not isinstance(item["set"], dict):
            raise ConfigError(f"{where}.set", item["set"], "a mapping of field path -> value")
        data["set"] = {**(data.get("set") or {}), **item["set"]}
    return parse_study(data, path.parent, text=text, path=path, default_name=label)


def _table(df, columns, metrics):
    by = list(columns)
    ci = summary_with_ci(df, by=by, value_cols=[m for m in metrics if m in df.columns])
    wide = ci.pivot_table(index=by, columns="metric", values=["mean", "half_width"], dropna=False)
    wide.columns = [m if s == "mean" else f"{m}_ci95" for s, m in wide.columns]
    order = [c for m in metrics for c in (m, f"{m}_ci95") if c in wide.columns]
    points = df.sort_values("point_id")[by].drop_duplicates()  # rows in the study's point order, not sorted as text
    wide = wide[order].reindex(pd.MultiIndex.from_frame(points) if len(by) > 1 else pd.Index(points[by[0]]))
    return wide.reset_index().rename(columns=columns)


def _figure(table, fig, label, where):
    for key in ("x", "y", "hue"):
        if fig.get(key) not in table.columns:
            raise ConfigError(f"{where}.figure.{key}", fig.get(key), f"a column of the table ({list(table.columns)})")
    title = f"{label}: {fig['y']} (predicted, 95 % CI)"
    if fig.get("kind", "lines") == "bars":
        return bars(
            table,
            group=fig["x"],
            hue=fig["hue"],
            y=fig["y"],
            title=title,
            ylabel=fig["y"],
            logy=bool(fig.get("logy", False)),
            err=f"{fig['y']}_ci95",
        )
    return lines(
        table,
        x=fig["x"],
        y=fig["y"],
        hue=fig["hue"],
        title=title,
        ylabel=fig["y"],
        xlabel=fig["x"],
        logy=bool(fig.get("logy", False)),
    )


def run_studies(paper, study_dir, store, *, progress=None):
    """Run every study of the folder into ``study_dir/<label>``, and its ordering tests; tabulate them."""
    if study_dir is None:
        raise ConfigError("study_dir", None, "a folder for the studies' results (pubsim paper run --out)")
    where = f"{paper.folder}/paper.yaml:{'quick' if paper.quick else 'full'}"
    res = PaperResult()
    counter = Counter()
    for name, table in run_orderings(paper, store, counter, progress).items():
        res.tables[name] = table
        res.headline.append(f"{name} (arrival order of the published sequence):")
        res.headline.extend("  " + line for line in table.to_string(index=False).splitlines())
    res.ran, res.skipped = counter.ran, counter.skipped
    for label, item in S.mapping(paper.setting, "studies", where).items():
        w = f"{where}.studies.{label}"
        if not isinstance(item, dict):
            raise ConfigError(w, item, "a mapping with file, columns, metrics, figure")
        study = _study(paper, label, item, w)
        columns = S.mapping(item, "columns", w)
        metrics = S.names(item, "metrics", w)
        missing = sorted(set(columns) - set(study.varied))
        if missing:
            raise ConfigError(f"{w}.columns", missing[0], f"a varied field of the study ({list(study.varied)})")
        out = study_dir / label
        before = sum(1 for _ in out.glob("points/*/rep*.summary.parquet")) if out.is_dir() else 0
        df = run_study(study, out, executor="serial", progress=False)
        res.skipped += before
        res.ran += len(df) - before
        if progress:
            progress(label)
        table = _table(df, columns, metrics)
        res.tables[label] = table
        if "figure" in item:
            res.figures[label] = _figure(table, S.mapping(item, "figure", w), label, w)
        res.headline.append(f"{label}:")
        res.headline.extend(
            "  " + line for line in table.to_string(index=False, float_format="{:.4g}".format).splitlines()
        )
    return res
