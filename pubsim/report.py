"""A report a person reads, from a study's stored results.

:func:`build_report` gives self-contained Markdown (figures embedded as
base64 PNG data URIs) and :func:`render_html` one HTML file, from what a
study run stored (:mod:`pubsim.study`): the manifest (what was run, code
revision, package versions), the summary rows per (point, replication), the
latency quantiles, the station records and the parameters with their
provenance. Sections: what was run; every point with confidence intervals
over replications; the saturation knee of each configuration with its model band (the
calibrated profile's held-out validation errors, :mod:`pubsim.bands`) and
extrapolation warnings; throughput
and loss against offered load; latency CDFs; broker utilization; the
provenance of every model used, placeholders flagged. The library returns
strings; ``pubsim report`` writes the files.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import study
from .analysis import figures as F
from .analysis import knees
from .analysis.ci import with_ci
from .analysis.draw import topology_figure
from .analysis.run_figures import plt
from .analysis.trace_study import load_trace_results
from .bands import real_range
from .scenario import parse_scenario
from .sim.errors import ConfigError
from .study import load_study

__all__ = [
    "StudyResults",
    "load_results",
    "report_blocks",
    "to_markdown",
    "to_html",
    "build_report",
    "render_html",
    "encode_figures",
    "study_blocks",
    "trace_section",
    "varied_columns",
    "load_columns",
]

_CONFIDENCE = 0.95


@dataclass
class StudyResults:
    """The frames of one study (see :mod:`pubsim.study` for their columns)."""

    manifest: dict
    summary: pd.DataFrame
    latency: pd.DataFrame | None = None
    stations: pd.DataFrame | None = None
    series: pd.DataFrame | None = None
    parameters: pd.DataFrame | None = None
    notes: list = field(default_factory=list)


def _optional(loader, out_dir, notes, what):
    try:
        return loader(out_dir)
    except (FileNotFoundError, OSError, ValueError) as err:
        notes.append(f"No {what} stored ({type(err).__name__}: {err}); that section is left out.")
        return None


def load_results(out_dir):
    """Read a study directory with the :mod:`pubsim.study` loaders."""

    out_dir = Path(out_dir)
    manifest = json.loads((out_dir / "manifest.json").read_text())
    notes = []
    return StudyResults(
        manifest=manifest,
        summary=study.load_summary(out_dir),
        latency=_optional(study.load_latency, out_dir, notes, "latency quantiles"),
        stations=_optional(study.load_stations, out_dir, notes, "station records"),
        series=_optional(study.load_series, out_dir, notes, "throughput series"),
        parameters=_optional(study.load_parameters, out_dir, notes, "parameters"),
        notes=notes,
    )


# --- which columns are varied, which are loads ---------------------------------------------


def varied_columns(summary):
    """Columns naming a varied scenario field (``df.attrs["varied"]`` set by
    :func:`pubsim.study.load_summary`, else every dotted path such as
    ``topology.broker.preset``), in stored order."""
    varied = summary.attrs.get("varied")
    if varied:
        return [c for c in varied if c in summary.columns]
    return [c for c in summary.columns if "." in c or "[" in c]


def load_columns(summary):
    """Varied columns that set a load (a rate or an interval) rather than a configuration."""
    return [c for c in varied_columns(summary) if re.search(r"(rate|interval|count)[^.]*$", c)]


def _short(path):
    return re.sub(r"\[\d+\]", "", path.split(".")[-1]) if "." in path else path


def _point_labels(summary, cols):
    first = summary.drop_duplicates("point_id").set_index("point_id")
    if not cols:
        return {pid: f"point {pid}" for pid in first.index}
    return {pid: ", ".join(f"{_short(c)}={row[c]}" for c in cols) for pid, row in first.iterrows()}


# --- blocks ------------------------------------------------------------------------------------


def _fmt(value, kind="g"):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind == "ms":
        return f"{value * 1e3:.3g} ms"
    if kind == "pct":
        return f"{100 * value:.2f} %"
    if kind == "rate":
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pm(mean, hw, kind="g"):
    return (
        _fmt(mean, kind)
        if not (isinstance(hw, float) and math.isfinite(hw))
        else f"{_fmt(mean, kind)} ± {_fmt(hw, kind)}"
    )


def _what_was_run(res):
    m = res.manifest
    points = m.get("points", [])
    reps = res.summary.groupby("point_id")["replication"].nunique()
    rows = [
        ("study", m.get("study", m.get("name", "-"))),
        ("description", m.get("description", "")),
        ("points", len(points) if isinstance(points, list) else points),
        ("replications per point", ", ".join(map(str, sorted(set(reps))))),
        ("runs stored", len(res.summary)),
    ]
    rows += [
        (k, v)
        for k, v in m.items()
        if k not in {"study", "name", "description", "points", "versions", "packages", "study_text"}
        and not isinstance(v, (dict, list))
    ]
    blocks = [("h2", "What was run"), ("table", pd.DataFrame(rows, columns=["item", "value"]))]
    if m.get("study_text"):
        blocks += [("p", f"Study file `{m.get('study_file', '')}`:"), ("code", m["study_text"])]
    versions = m.get("versions", m.get("packages"))
    if isinstance(versions, dict) and versions:
        blocks += [
            ("p", "Package versions:"),
            ("table", pd.DataFrame(sorted(versions.items()), columns=["package", "version"])),
        ]
    return blocks


def _points_table(res, cols):
    s = res.summary
    t = with_ci(
        s,
        ["point_id"],
        [
            "offered_per_s",
            "egress_per_s",
            "sustainability",
            "delivery_ratio",
            "latency_p50_s",
            "latency_p99_s",
            "loss_rate",
        ],
        _CONFIDENCE,
    )
    first = s.drop_duplicates("point_id").set_index("point_id")[cols]
    rows = []
    for _, r in t.iterrows():
        row = {"point": r["point_id"], **{_short(c): first.loc[r["point_id"], c] for c in cols}}
        row.update(
            {
                "reps": int(r["offered_per_s_n"]),
                "offered msg/s": _pm(r["offered_per_s_mean"], r["offered_per_s_hw"], "rate"),
                "egress msg/s": _pm(r["egress_per_s_mean"], r["egress_per_s_hw"], "rate"),
                "sustainability": _pm(r["sustainability_mean"], r["sustainability_hw"]),
                "delivery ratio": _pm(r["delivery_ratio_mean"], r["delivery_ratio_hw"]),
                "p50": _pm(r["latency_p50_s_mean"], r["latency_p50_s_hw"], "ms"),
                "p99": _pm(r["latency_p99_s_mean"], r["latency_p99_s_hw"], "ms"),
                "loss": _pm(r["loss_rate_mean"], r["loss_rate_hw"], "pct"),
            }
        )
        rows.append(row)
    return [
        ("h2", "Every point"),
        (
            "p",
            f"Means over replications ± half-width of the {100 * _CONFIDENCE:.0f} % Student-t "
            "confidence interval. Sustainability = egress / (ingress x sp-ratio) in the "
            "measurement window (SYSTEMS.md §4); delivery ratio = egress / (offered x sp-ratio).",
        ),
        ("table", pd.DataFrame(rows)),
    ]


def _knees(res, config):
    k = knees(res.summary, config, confidence=_CONFIDENCE)
    rows = []
    for _, r in k.iterrows():
        where = (
            "beyond the sweep (every point sustainable)"
            if math.isnan(r["first_unsustainable_per_s"])
            else "below the sweep (no point sustainable)"
            if math.isnan(r["last_sustainable_per_s"])
            else f"{_fmt(r['last_sustainable_per_s'], 'rate')} - {_fmt(r['first_unsustainable_per_s'], 'rate')}"
        )
        rows.append(
            {
                **{_short(c): r[c] for c in config},
                "knee between (offered msg/s)": where,
                "sustainability below": _pm(r["sustainability_below"], r["sustainability_below_hw"]),
                "sustainability above": _pm(r["sustainability_above"], r["sustainability_above_hw"]),
                "saturated egress / sp (msg/s)": _pm(r["saturated_egress_per_s"], r["saturated_egress_hw"], "rate"),
                "reps": r["replications"],
            }
        )
    text = (
        "The knee of each configuration lies between its last offered load whose mean sustainability "
        "(and delivery ratio) stays >= 0.99 and the next load, where it drops below; the saturated "
        "egress (per published message) at that next load estimates the capacity. Finer "
        "resolution: `pubsim.analysis.saturation_search` (the interval search of SYSTEMS.md §4)."
    )
    return k, [("h2", "Saturation per configuration, in detail"), ("p", text), ("table", pd.DataFrame(rows))]


def _nearest_point(res, config_row, config, load):
    """The point of this configuration whose mean offered load is nearest ``load``."""
    mine = res.summary
    for c in config:
        mine = mine[mine[c] == config_row[c]]
    pts = mine.groupby("point_id")["offered_per_s"].mean()
    return (pts - load).abs().idxmin() if len(pts) else None


def _config_rows(res, config_row, config):
    mine = res.summary
    for c in config:
        mine = mine[mine[c] == config_row[c]]
    return mine


def _pct_band(low, high):
    return f"{low:+.0f} %" if round(low) == round(high) else f"{low:+.0f} .. {high:+.0f} %"


def _real_knee(lo, hi, low, high):
    """Where the real broker's knee lies if the model errs by ``low`` .. ``high`` % (sim = real x (1 + e))."""
    if low <= -100:
        return ""
    if math.isfinite(lo) and math.isfinite(hi):
        a, b = (_fmt(x, "rate") for x in real_range((lo + hi) / 2, low, high))
        return f": real knee ≈ {a}" if a == b else f": real knee ≈ {a} .. {b}"
    if math.isfinite(lo):
        return f": real knee > {_fmt(real_range(lo, low, high)[0], 'rate')}"
    if math.isfinite(hi):
        return f": real knee < {_fmt(real_range(hi, low, high)[1], 'rate')}"
    return ""


def _model_cells(res, config_row, config):
    """The model columns of one knee row (from the runs' ``model_*`` summary fields), and its
    extrapolation warning (or "")."""
    if "model_validation" not in res.summary:
        gone = "not recorded (results of an older pubsim)"
        return {"model band (held-out saturation error)": gone}, ""
    first = _config_rows(res, config_row, config).iloc[0]
    low, high = first["model_saturation_error_low_pct"], first["model_saturation_error_high_pct"]
    if math.isfinite(low) and math.isfinite(high):
        lo, hi = config_row["last_sustainable_per_s"], config_row["first_unsustainable_per_s"]
        band = _pct_band(low, high) + _real_knee(lo, hi, low, high)
    else:
        band = str(first["model_band"]) or "no validation"
    lat = "-"
    if all(math.isfinite(first[f"model_{q}_error_{e}_pct"]) for q in ("p50", "p99") for e in ("low", "high")):
        lat = (
            f"{_pct_band(first['model_p50_error_low_pct'], first['model_p50_error_high_pct'])} / "
            f"{_pct_band(first['model_p99_error_low_pct'], first['model_p99_error_high_pct'])}"
        )
    extra = str(first["model_extrapolation"] or "")
    where = (
        "inside"
        if not extra
        else "**outside**: " + ", ".join(dict.fromkeys(re.findall(r"(\w+) \S+ outside the fitted", extra)))
    )
    cells = {
        "model band (held-out saturation error)": band,
        "model latency band (p50 / p99)": lat,
        "fitted range": where if str(first["model_validation"]) not in ("none", "no brokers") else "-",
    }
    return cells, extra


_BAND_TEXT = (
    "**Model band.** Each calibrated broker profile was simulated against measurements of the real broker, "
    "some on configurations held out of its fit; the band is the range of its errors there, "
    "(simulated - measured) / measured, for the saturation limit (and for p50 / p99 latency). If the model "
    "errs here as it did there, the real broker's knee lies in the 'real knee' range (knee / (1 + error)). "
    "This is model error, separate from the ± above (the sweep's resolution and the replications' "
    "confidence interval), and more replications do not shrink it. Held-out sets are small (their size is "
    "in each profile's provenance.accuracy: `pubsim presets --long NAME`), so the band is indicative; a configuration outside the profile's fitted "
    "range (listed below) extrapolates and may err more. Profiles without validation (placeholders, "
    "estimates) have no band."
)


def _answer(res, config, k):
    """The first section: per configuration, the knee (with its band), the loss past it,
    the latency at 80 % of it."""
    per_point = with_ci(
        res.summary, ["point_id"], ["offered_per_s", "loss_rate", "latency_p50_s", "latency_p99_s"], _CONFIDENCE
    ).set_index("point_id")
    rows, warnings = [], []
    for _, r in k.iterrows():
        lo, hi = r["last_sustainable_per_s"], r["first_unsustainable_per_s"]
        row = {_short(c): r[c] for c in config}
        if math.isfinite(lo) and math.isfinite(hi):
            row["knee (offered msg/s)"] = f"{_fmt((lo + hi) / 2, 'rate')} ± {_fmt((hi - lo) / 2, 'rate')}"
        elif math.isfinite(lo):
            row["knee (offered msg/s)"] = f"> {_fmt(lo, 'rate')} (every load sustainable)"
        else:
            row["knee (offered msg/s)"] = f"< {_fmt(hi, 'rate')} (no load sustainable)"
        past = _nearest_point(res, r, config, hi) if math.isfinite(hi) else None
        row["loss past the knee"] = (
            _pm(per_point.loc[past, "loss_rate_mean"], per_point.loc[past, "loss_rate_hw"], "pct")
            + f" at {_fmt(per_point.loc[past, 'offered_per_s_mean'], 'rate')}/s"
            if past is not None
            else "-"
        )
        knee = (lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi) else lo
        at80 = _nearest_point(res, r, config, 0.8 * knee) if math.isfinite(knee) else None
        if at80 is not None:
            q = per_point.loc[at80]
            row["latency near 80 % of the knee (p50 / p99)"] = (
                f"{_pm(q['latency_p50_s_mean'], q['latency_p50_s_hw'], 'ms')} / "
                f"{_pm(q['latency_p99_s_mean'], q['latency_p99_s_hw'], 'ms')} "
                f"at {_fmt(q['offered_per_s_mean'], 'rate')}/s"
            )
        else:
            row["latency near 80 % of the knee (p50 / p99)"] = "-"
        cells, extra = _model_cells(res, r, config)
        row.update(cells)
        if extra:
            warnings.append(f"{', '.join(f'{_short(c)}={r[c]}' for c in config) or 'the study'}: {extra}.")
        rows.append(row)
    text = (
        "The knee is where a configuration stops being sustainable (the 0.99 rule: egress / (ingress x "
        "sp-ratio) and egress / (offered x sp-ratio) at least 0.99 in the measurement window). Its ± is "
        "the resolution of this sweep: the knee lies between the last sustainable load and the next one."
    )
    blocks = [("h2", "The answer"), ("p", text), ("table", pd.DataFrame(rows)), ("p", _BAND_TEXT)]
    if warnings:
        blocks.append(
            (
                "p",
                "**Extrapolation warnings** (the run leaves the range of configurations the profile was "
                "fitted on; parameter, its value here, the fitted range):",
            )
        )
        blocks += [("p", w) for w in warnings]
    return blocks


def _topology(res):
    """A drawing of the study's first point (the others vary the fields listed), if its study file
    can still be read; otherwise a note saying why."""
    path = res.manifest.get("study_file")
    if not path:
        return [("h2", "Topology"), ("p", "Not drawn: the manifest names no study file.")]
    try:
        study = load_study(path)
        point = study.points[0]
        scenario = parse_scenario(study.raw(point), study.base_dir)
    except (ConfigError, OSError) as err:
        return [("h2", "Topology"), ("p", f"Not drawn: the study file `{path}` could not be read ({err}).")]
    varied = ", ".join(f"`{v}`" for v in study.varied) or "nothing"
    return [
        ("h2", "Topology"),
        (
            "p",
            f"Point {point.point_id} of the study; the points vary {varied}. Clients are grouped per "
            "broker; edges carry the link bandwidth and latency.",
        ),
        ("figure", topology_figure(scenario.topology, title=scenario.name), "topology"),
    ]


def _figures(res, config, labels, k):
    blocks = [
        ("h2", "Throughput and loss against offered load"),
        ("figure", F.load_curves(res.summary, config, knees=k), "throughput and loss vs offered load"),
    ]
    if res.latency is not None and len(res.latency):
        blocks.append(("h2", "Latency distributions"))
        blocks.append(
            (
                "p",
                "End-to-end latency CDFs of the messages published in the window (latency axis logarithmic when the latencies span a wide range); "
                "shaded: confidence band of each quantile over replications.",
            )
        )
        groups = (
            res.summary.drop_duplicates("point_id").groupby(config, sort=True)
            if config
            else [("all points", res.summary.drop_duplicates("point_id"))]
        )
        for key, grp in groups:
            sub = {pid: labels[pid] for pid in grp["point_id"]}
            name = ", ".join(map(str, key if isinstance(key, tuple) else (key,)))
            blocks.append(("h3", name))
            blocks.append(("figure", F.latency_cdfs(res.latency, sub), f"latency CDF {name}"))
    if res.series is not None and len(res.series) and len(k):
        chosen = {}
        for _, r in k.iterrows():
            mine = res.summary
            for c in config:
                mine = mine[mine[c] == r[c]]
            pts = mine.groupby("point_id")["offered_per_s"].mean()
            for c in ("last_sustainable_per_s", "first_unsustainable_per_s"):
                if math.isfinite(r[c]):
                    pid = (pts - r[c]).abs().idxmin()
                    chosen[pid] = labels[pid]
        if chosen:
            blocks.append(("h2", "Throughput over time at each knee"))
            blocks.append(
                (
                    "p",
                    "Published (dotted) and delivered (solid) messages per second of the first "
                    "replication, at the last sustainable and the first unsustainable load of each "
                    "configuration.",
                )
            )
            first = res.summary.drop_duplicates("point_id").set_index("point_id")
            groups = (
                first.loc[list(chosen)].groupby(config, sort=True) if config else [("all", first.loc[list(chosen)])]
            )
            for key, grp in groups:
                name = ", ".join(map(str, key if isinstance(key, tuple) else (key,)))
                blocks.append(("h3", name))
                blocks.append(
                    (
                        "figure",
                        F.series_over_time(res.series, {pid: chosen[pid] for pid in grp.index}),
                        f"throughput over time {name}",
                    )
                )
    if res.stations is not None and len(res.stations) and (res.stations["role"] == "broker").any():
        blocks.append(("h2", "Broker utilization and queue"))
        blocks.append(("figure", F.station_load(res.stations, res.summary, config), "broker utilization"))
    return blocks


def _provenance(res):
    p = res.parameters
    if p is None or not len(p):
        return [("h2", "Provenance of the models"), ("p", "No parameters were stored.")]
    rows = []
    p = p.assign(_params=p["parameters"].astype(str))
    for (kind, prov, ph, params), grp in p.groupby(["kind", "provenance", "placeholder", "_params"], sort=True):
        names = list(dict.fromkeys(grp["component"]))
        rows.append(
            {
                "component": ", ".join(names[:4]) + (f" ... ({len(names)} in all)" if len(names) > 4 else ""),
                "kind": kind,
                "status": "**PLACEHOLDER**" if bool(ph) else "ok",
                "provenance": prov,
                "parameters": params,
                "points": grp["point_id"].nunique() if "point_id" in grp else "-",
            }
        )
    rows.sort(key=lambda r: (r["status"] == "ok", r["kind"], r["component"]))
    n_ph = sum(r["status"] != "ok" for r in rows)
    warn = (
        f"**{n_ph} model(s) rest on placeholder values** (a stated assumption or a value from another "
        "system, not a measurement or a calibrated fit): treat their numbers as illustrative."
        if n_ph
        else "No component is flagged as a placeholder (rows reading 'assumption' are stated "
        "assumptions, shown for review)."
    )
    return [
        ("h2", "Provenance of the models"),
        (
            "p",
            "One row per component (or group of components sharing the same values): its parameters and "
            "where they come from (measured here, a named publication, or a stated assumption). "
            "Placeholders first. " + warn,
        ),
        ("table", pd.DataFrame(rows)),
    ]


def trace_section(out_dir):
    """Blocks of the trace-driven section from ``out_dir/trace`` (written by
    ``python -m pubsim.analysis.trace_study``), or a note saying why it is absent."""

    frames, info = load_trace_results(Path(out_dir) / "trace")
    head = [("h2", "Trace-driven load: a CampusIoT device scaled up to a city")]
    if frames is None:
        note = info or (
            "Not run: no `trace/` results in this directory (`bash scripts/study.sh` runs it when "
            "`../shared/traces` is present)."
        )
        return head + [("p", note)]
    s = frames["summary"]
    text = (
        f"Trace `{info.get('trace_file', '?')}` ({info.get('summary', '')}), resampled per 15-minute interval "
        "of the day (SYSTEMS.md §5) into 100 gateways of N devices each, replayed through each broker "
        "profile to one application subscriber (fan-out 1); the first second (a start-up burst of the "
        "resampler) is cut off."
    )
    t = with_ci(
        s,
        ["broker", "devices"],
        ["offered_per_s", "sustainability", "latency_p50_s", "latency_p99_s", "loss_rate"],
        _CONFIDENCE,
    )
    rows = [
        {
            "broker": r["broker"],
            "devices": f"{r['devices']:,}",
            "reps": int(r["offered_per_s_n"]),
            "offered msg/s": _pm(r["offered_per_s_mean"], r["offered_per_s_hw"], "rate"),
            "sustainability": _pm(r["sustainability_mean"], r["sustainability_hw"]),
            "p50": _pm(r["latency_p50_s_mean"], r["latency_p50_s_hw"], "ms"),
            "p99": _pm(r["latency_p99_s_mean"], r["latency_p99_s_hw"], "ms"),
            "loss": _pm(r["loss_rate_mean"], r["loss_rate_hw"], "pct"),
        }
        for _, r in t.iterrows()
    ]
    if "model_band" in s:  # each profile's held-out band (pubsim.bands), once per broker
        band = s.drop_duplicates("broker").set_index("broker")["model_band"]
        for row in rows:
            row["model band (held-out errors)"] = band.get(row["broker"], "-")
    k = knees(s, ["broker"], confidence=_CONFIDENCE)
    blocks = head + [
        ("p", text),
        ("table", pd.DataFrame(rows)),
        ("figure", F.load_curves(s, ["broker"], knees=k), "trace-driven throughput and loss"),
    ]
    if frames.get("latency") is not None and len(frames["latency"]):
        labels = {
            pid: f"{b}, {d:,} devices"
            for pid, b, d in s[["point_id", "broker", "devices"]].drop_duplicates().itertuples(index=False)
        }
        blocks.append(("figure", F.latency_cdfs(frames["latency"], labels), "trace-driven latency CDFs"))
    return blocks


def report_blocks(res: StudyResults, *, title=None, extra=()):
    """The report as a list of blocks: ``("h1"|"h2"|"h3"|"p"|"code", text)``,
    ``("table", DataFrame)``, ``("figure", Figure, alt text)``; ``extra``
    blocks go before the provenance section."""
    cols = varied_columns(res.summary)
    loads = load_columns(res.summary)
    config = [c for c in cols if c not in loads and not c.startswith("run.")]  # run settings: not a configuration
    labels = _point_labels(res.summary, [c for c in cols if not c.startswith("run.")] or cols)
    name = res.manifest.get("study", res.manifest.get("name", "study"))
    blocks = [("h1", title or f"Study report: {name}")]
    blocks += [("p", n) for n in res.notes]
    k, kb = _knees(res, config)
    blocks += _answer(res, config, k)
    blocks += _topology(res)
    blocks += _figures(res, config, labels, k)
    blocks += _points_table(res, cols)
    blocks += kb
    blocks += list(extra)
    blocks += _provenance(res)
    blocks += _what_was_run(res)
    return blocks


# --- rendering ---------------------------------------------------------------------------------


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _md_cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(df):
    head = "| " + " | ".join(map(_md_cell, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    body = ["| " + " | ".join(_md_cell(_fmt(v)) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def encode_figures(blocks):
    """Figures become ``("png", base64 text, alt)`` blocks (and are closed),
    so that both renderers can share one encoding."""
    return [("png", _png(b[1]), b[2]) if b[0] == "figure" else b for b in blocks]


def to_markdown(blocks, image_dir=None):
    """Markdown of the report.

    Parameters
    ----------
    blocks : list
        From :func:`report_blocks` (figures as Figure or encoded ``png`` blocks).
    image_dir : pathlib.Path, optional
        Folder for the figures as PNG files, referenced by relative paths
        (``<image_dir name>/figure-01.png``): the form code hosts render. The
        Markdown file belongs in ``image_dir``'s parent. Without it, figures
        are embedded as ``data:`` URIs (one self-contained file).
    """
    out = []
    figure = 0
    for b in encode_figures(blocks):
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + b[1])
        elif kind == "p":
            out.append(b[1])
        elif kind == "code":
            out.append("```yaml\n" + b[1].rstrip("\n") + "\n```")
        elif kind == "table":
            out.append(_md_table(b[1]))
        elif kind == "png" and image_dir is not None:
            figure += 1
            name = f"figure-{figure:02d}.png"
            Path(image_dir).mkdir(parents=True, exist_ok=True)
            (Path(image_dir) / name).write_bytes(base64.b64decode(b[1]))
            out.append(f"![{b[2]}]({Path(image_dir).name}/{name})")
        elif kind == "png":
            out.append(f"![{b[2]}](data:image/png;base64,{b[1]})")
    return "\n\n".join(out) + "\n"


def _inline_html(text):
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


_CSS = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;line-height:1.4}"
    "table{border-collapse:collapse;margin:1em 0;font-size:90%}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}img{max-width:100%}"
)


def to_html(blocks, title="pubsim report"):
    """One HTML file: figures embedded as base64 PNG, no external references."""
    out = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>"
    ]
    for b in encode_figures(blocks):
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{_inline_html(b[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{_inline_html(b[1])}</p>")
        elif kind == "code":
            out.append(f"<pre><code>{html.escape(b[1])}</code></pre>")
        elif kind == "table":
            cells = b[1].map(lambda v: _inline_html(_fmt(v)))
            out.append(cells.to_html(index=False, escape=False, border=0))
        elif kind == "png":
            out.append(f"<p><img alt='{html.escape(b[2])}' src='data:image/png;base64,{b[1]}'></p>")
    out.append("</body></html>")
    return "\n".join(out)


def study_blocks(out_dir, **kwargs):
    """Blocks of the study in ``out_dir``, with its trace-driven section."""
    kwargs.setdefault("extra", trace_section(out_dir))
    return report_blocks(load_results(out_dir), **kwargs)


def build_report(out_dir, **kwargs) -> str:
    """Self-contained Markdown report of the study stored in ``out_dir``."""
    return to_markdown(study_blocks(out_dir, **kwargs))


def render_html(out_dir, **kwargs) -> str:
    """One self-contained HTML file of the study stored in ``out_dir``."""
    blocks = study_blocks(out_dir, **kwargs)
    return to_html(blocks, title=blocks[0][1])


# --- command line (``pubsim report``) ------------------------------------------------------------


def report_command(args, console):
    """``pubsim report DIR [--md FILE] [--html FILE]``: write the report files."""

    out_dir = Path(args.dir)
    if not (out_dir / "manifest.json").is_file():
        raise ConfigError(
            "report DIR",
            str(out_dir),
            "a study directory with manifest.json (written by pubsim study run ... --out DIR)",
        )
    md_path, html_path = args.md, args.html
    if md_path is None and html_path is None:
        md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    blocks = encode_figures(study_blocks(out_dir))
    images = md_path and Path(md_path).with_name(Path(md_path).stem + "-figures")
    for path, text in (
        (md_path, md_path and to_markdown(blocks, image_dir=images)),
        (html_path, html_path and to_html(blocks, title=blocks[0][1])),
    ):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text, encoding="utf-8")
            console.print(f"wrote {path}")
    return 0


def add_commands(subparsers):
    """Register ``pubsim report`` on the ``pubsim`` parser."""
    p = subparsers.add_parser("report", help="write a study's report (Markdown and/or one HTML file)")
    p.add_argument("dir", help="study results directory (pubsim study run ... --out DIR)")
    p.add_argument("--md", help="Markdown file to write (figures as PNG files in FILE-figures/ beside it)")
    p.add_argument("--html", help="HTML file to write (self-contained: figures embedded)")
    p.set_defaults(func=report_command)
