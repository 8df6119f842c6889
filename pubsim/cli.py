"""The ``pubsim`` command.

Commands: ``run`` (below); ``measure``, ``calibrate`` and ``validate``
(:mod:`pubsim.calibration.cli`); ``trace inspect`` and ``trace convert``
(:mod:`pubsim.models.loads.cli`); ``study run`` and ``study summary``
(:mod:`pubsim.study.cli`); ``paper run`` (:mod:`pubsim.calibration.papers.cli`); ``presets`` (:mod:`pubsim.models.presets.cli`).

``pubsim run SCENARIO.yaml [--out DIR]`` runs every replication of a
scenario with a progress bar, prints the summary, the model error band of
each broker (its calibrated profile's held-out validation errors, with a
warning when the run leaves the profile's fitted range: :mod:`pubsim.bands`),
the parameters with their provenance and the busiest stations, and writes to DIR: per replication
``rep-NNN/`` with ``deliveries.parquet``, ``drops.parquet`` (with
``record: full``), ``stations.csv``, ``traffic.csv`` (client vs inter-broker
traffic, :mod:`pubsim.models.mechanisms.ildm.traffic`; also printed with two or more brokers),
``throughput.csv``, ``parameters.csv``,
``latency_cdf.png``, ``throughput.png``, ``pattern-<kind>.csv`` for the
scenario's pattern reports (entries of a kind stacked, ``report`` = their
index in ``patterns``) and, last, ``summary.json``; and
``summary.csv`` with one row per replication, and ``scenario.json``: the
hash of the resolved scenario (the file's mapping, every component's
parameters as built, the command-line overrides). A finished replication
(its ``summary.json`` present and readable) is not run again, so an
interrupted study resumes where it stopped; results of another version of
the scenario are refused (``--force-new`` deletes them and starts over), so
a rerun never shows stale numbers. A run expected to cost more than the budget
(:mod:`pubsim.budget`: messages, memory up front, clients; ``--max-messages``,
``--max-memory``, ``--max-clients`` or ``PUBSIM_MAX_*``) is refused before it
starts. Bad input (scenario or command line) prints
one line, ``pubsim: error: ...``, and exits with status 2; a file that cannot
be written prints one line and exits with status 1.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import interrupts
from ._version import __version__
from .analysis import run_figures as figures
from .analysis.draw import topology_figure
from .analysis.saturate_cli import add_commands as saturate_commands
from .budget import add_arguments as add_budget_arguments
from .budget import check as check_budget
from .budget import from_args as budget_from_args
from .calibration.cli import add_commands as calibration_commands
from .calibration.papers.cli import add_commands as paper_commands
from .models.assembly.features import add_commands as feature_commands
from .models.assembly.table import parameter_table
from .models.loads.cli import add_commands as trace_commands
from .models.mechanisms.patterns.reports import report
from .models.presets.cli import add_commands as preset_commands
from .report import add_commands as report_commands
from .scenario import load_scenario, parse_scenario, read_yaml
from .sim.errors import ConfigError
from .study.cli import add_commands as study_commands
from .study.spec import canonical_hash

__all__ = ["main"]

_HEADLINE = [
    ("published", "{:,.0f}"),
    ("ingress_per_s", "{:,.0f}"),
    ("egress_per_s", "{:,.0f}"),
    ("sp_ratio", "{:.2f}"),
    ("sustainability", "{:.4f}"),
    ("latency_mean_s", "ms"),
    ("latency_p50_s", "ms"),
    ("latency_p90_s", "ms"),
    ("latency_p99_s", "ms"),
    ("latency_max_s", "ms"),
    ("loss_rate", "{:.4%}"),
    ("duplicates", "{:,.0f}"),
    ("not_owed", "{:,.0f}"),
    ("retained_deliveries", "{:,.0f}"),
]


def _fmt(value, spec):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if spec == "ms":
        return f"{value * 1e3:.3f} ms"
    return spec.format(value)


def _summary_table(name, summaries):
    table = Table(title=f"{name}: summary over the measurement window")
    table.add_column("metric")
    for i in range(len(summaries)):
        table.add_column(f"rep {i}", justify="right")
    if len(summaries) > 1:
        table.add_column("mean ± 95% CI", justify="right")
    keys = _HEADLINE + [(k, "{:.4%}") for k in summaries[0] if k.startswith("loss_rate_")]
    for key, spec in keys:
        row = [key] + [_fmt(s.get(key), spec) for s in summaries]
        if len(summaries) > 1:
            vals = np.array([s.get(key, math.nan) for s in summaries], dtype=float)
            half = 1.96 * vals.std(ddof=1) / math.sqrt(len(vals))
            row.append(f"{_fmt(vals.mean(), spec)} ± {_fmt(half, spec)}")
        table.add_row(*row)
    return table


def _band(low, high):
    return "-" if not (math.isfinite(low) and math.isfinite(high)) else f"{low:+.0f} .. {high:+.0f} %"


def _model_table(result):
    """Per broker (brokers sharing a profile and its warnings grouped): the held-out error band
    of its model, and the warnings of a run outside the profile's fitted range."""
    acc = result.accuracy()
    table = Table(title="model accuracy: error of each broker's profile on held-out measurements (sim - meas) / meas")
    for col in ("brokers", "validation", "saturation", "p50", "p99"):
        table.add_column(col, overflow="fold")
    warnings = []
    keys = ["validation", "band", "extrapolation"]
    for _, grp in acc.groupby(keys, sort=False):
        r = grp.iloc[0]
        names = list(grp["broker"])
        shown = ", ".join(names[:3]) + (f", ... ({len(names)} in all)" if len(names) > 3 else "")
        table.add_row(
            shown,
            f"held-out, {r['holdout_configurations']} configurations"
            if r["validation"] == "held-out"
            else r["validation"]
            if r["validation"] != "none"
            else r["band"],
            *(_band(r[f"{m}_error_low_pct"], r[f"{m}_error_high_pct"]) for m in ("saturation", "p50", "p99")),
            style="bold red" if r["validation"] == "none" else None,
        )
        if r["extrapolation"]:
            warnings.append(
                f"warning: {shown}: outside the profile's fitted range (extrapolation): {r['extrapolation']}"
            )
    return table, warnings


def _parameter_table(result):
    """Components grouped by kind and provenance; placeholders in red."""
    table = Table(title="parameters and provenance")
    for col in ("kind", "components", "provenance"):
        table.add_column(col, overflow="fold")
    params = result.parameters()
    for (kind, prov, placeholder), grp in params.groupby(["kind", "provenance", "placeholder"], sort=False):
        names = list(grp["component"])
        shown = ", ".join(names[:3]) + (f", ... ({len(names)} in all)" if len(names) > 3 else "")
        table.add_row(kind, shown, prov, style="bold red" if placeholder else None)
    return table


def _station_table(result, top=8):
    st = result.stations().sort_values("utilization", ascending=False).head(top)
    table = Table(title=f"busiest stations (top {top})")
    for col in ("station", "utilization", "mean waiting", "drops"):
        table.add_column(col, justify="right" if col != "station" else "left")
    for row in st.itertuples():
        drops = sum(getattr(row, c) for c in st.columns if c.startswith("drops_"))
        table.add_row(row.station, f"{row.utilization:.3f}", f"{row.mean_waiting:.2f}", f"{drops:,}")
    return table


def _topic_table(result, most=12):
    """Latency and loss per topic over the window (full records, at most ``most`` topics), or None."""
    if not hasattr(result.sink, "deliveries") or not 1 < len(result.network.names["topic"]) <= most:
        return None
    w0, w1 = result.window
    d = result.deliveries()
    d = d[(d["publish_time_s"] >= w0) & (d["publish_time_s"] < w1)]
    x = result.drops()
    lost = (
        x[(x["publish_time_s"] >= w0) & (x["publish_time_s"] < w1)]
        .groupby("topic", observed=True)["lost_deliveries"]
        .sum()
    )
    table = Table(title="per topic (window)")
    for col in ("topic", "delivered", "latency mean", "latency p99", "lost"):
        table.add_column(col, justify="left" if col == "topic" else "right")
    for topic, lat in d.groupby("topic", observed=True)["latency_s"]:
        table.add_row(
            str(topic),
            f"{len(lat):,}",
            _fmt(lat.mean(), "ms"),
            _fmt(lat.quantile(0.99), "ms"),
            f"{int(lost.get(topic, 0)):,}",
        )
    return table


def _traffic_table(result):
    """Per node: client vs inter-broker messages, data and control (None with one broker)."""
    t = result.traffic()
    nodes = t[t.scope == "node"]
    if nodes.element.nunique() < 2:
        return None
    wide = (
        nodes.groupby(["element", "traffic", "plane", "direction"])["messages"]
        .sum()
        .unstack(["traffic", "plane", "direction"], fill_value=0)
    )
    table = Table(title="traffic per node (data in window; control incl. subscription setup)")
    cols = [
        ("client", "data", "in"),
        ("client", "data", "out"),
        ("inter_broker", "data", "in"),
        ("inter_broker", "data", "out"),
        ("inter_broker", "control", "in"),
        ("inter_broker", "control", "out"),
    ]
    table.add_column("node")
    for c in cols:
        table.add_column(" ".join(c).replace("inter_broker", "inter-broker"), justify="right")
    for node, row in wide.iterrows():
        table.add_row(str(node), *(f"{int(row.get(c, 0)):,}" for c in cols))
    return table


def _host_table(result):
    """CPU % per host and process, card utilization per direction (None without hosts)."""
    h = result.hosts()
    if h.empty:
        return None
    wide = h.pivot_table(index=["host", "process"], columns="measure", values="value", sort=False)
    table = Table(title="hosts (window): CPU % of one core and of the host, card utilization %")
    for col in ("host", "process", "CPU % core", "CPU % host", "card tx %", "card rx %"):
        table.add_column(col, justify="left" if col in ("host", "process") else "right")
    keys = ("cpu_pct_of_core", "cpu_pct_of_host", "card_tx_pct", "card_rx_pct")
    for (host, process), row in wide.iterrows():
        cells = [f"{row[k]:.1f}" if k in row and row[k] == row[k] else "" for k in keys]
        table.add_row(str(host), str(process), *cells)
    return table


def _write(result, rep_dir):

    rep_dir.mkdir(parents=True, exist_ok=True)
    if hasattr(result.sink, "deliveries"):
        result.deliveries().to_parquet(rep_dir / "deliveries.parquet")
        result.drops().to_parquet(rep_dir / "drops.parquet")
    result.stations().to_csv(rep_dir / "stations.csv", index=False)
    result.traffic().to_csv(rep_dir / "traffic.csv", index=False)
    result.throughput_series().to_csv(rep_dir / "throughput.csv", index=False)
    result.parameters().assign(parameters=lambda d: d.parameters.map(json.dumps, na_action="ignore")).to_csv(
        rep_dir / "parameters.csv", index=False
    )
    for name, fig in (
        ("latency_cdf.png", figures.latency_cdf({"simulated": result.latency_ecdf()})),
        ("throughput.png", figures.throughput(result.throughput_series(), result.window)),
    ):
        fig.savefig(rep_dir / name, dpi=110)
    # summary.json marks the replication finished: write it whole or not at all
    tmp = rep_dir / "summary.json.tmp"
    tmp.write_text(json.dumps(result.summary(), indent=2))
    os.replace(tmp, rep_dir / "summary.json")


def _finished(rep_dir):
    """The summary of a finished replication in ``rep_dir``, or None."""
    try:
        summary = json.loads((rep_dir / "summary.json").read_text())
    except (OSError, ValueError):  # absent, or cut short by a crash: run it again
        return None
    return summary if isinstance(summary, dict) else None


def _pattern_reports(scenario, result, rep, console):
    """Print the scenario's pattern reports for one replication; return ``[(kind, frame)]``."""

    out = []
    for entry in scenario.patterns:
        frame = report(result, scenario.topology, entry, seed=scenario.seed, replication=rep)
        table = Table(title=f"{entry['kind']} (replication {rep})")
        for col in frame.columns:
            table.add_column(str(col), overflow="fold")
        for row in frame.itertuples(index=False):
            table.add_row(*[f"{v:.6g}" if isinstance(v, float) else str(v) for v in row])
        console.print(table)
        out.append((entry["kind"], frame))
    return out


_STAMP = "scenario.json"


def _scenario_hash(data, scenario, overrides):
    """SHA-256 of the resolved scenario: the file's mapping, every component's
    parameters as built (presets and GraphML files resolved) and the overrides."""
    return canonical_hash({"scenario": data, "parameters": parameter_table(scenario.topology), "overrides": overrides})


def _claim_out(out, config_hash, source, force_new):
    """Make ``out`` this scenario's folder: refuse results of another version of it
    (or of an unknown one), unless ``force_new``, which deletes them first."""
    stamp = out / _STAMP
    ours = [p for p in (*out.glob("rep-*"), out / "summary.csv", stamp) if p.exists()] if out.is_dir() else []
    if ours:
        try:
            old = json.loads(stamp.read_text()).get("config_hash")
        except (OSError, ValueError, AttributeError):
            old = None
        if old != config_hash:
            if not force_new:
                was = f"scenario hash {old[:12]}" if isinstance(old, str) else "results of an unknown scenario"
                raise ConfigError(
                    "--out",
                    str(out),
                    f"a folder for this scenario (hash {config_hash[:12]}); it holds "
                    f"{was}: use another --out, or --force-new to delete them",
                )
            for p in ours:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (_STAMP + ".tmp")
    tmp.write_text(json.dumps({"config_hash": config_hash, "scenario": str(source)}, indent=2))
    os.replace(tmp, stamp)


def _draw(args, console):
    """``pubsim draw SCENARIO [--out FILE]``: the topology as a figure (PNG, SVG or PDF by suffix)."""
    scenario = load_scenario(args.scenario)
    out = Path(args.out or f"{Path(args.scenario).stem}-topology.png")
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ConfigError("--out", str(out), "a file ending in .png, .svg or .pdf")
    topology_figure(scenario.topology, title=scenario.name).savefig(out, dpi=110)
    console.print(f"topology of {scenario.name} drawn in {out}")
    return 0


def _run(args, console):
    _, data = read_yaml(args.scenario)
    budget = budget_from_args(args)
    scenario = parse_scenario(data, base_dir=Path(args.scenario).parent, budget=budget)
    check_budget(scenario, budget)  # refuse up front what would eat the memory or run for days
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise ConfigError("--out", args.out, "a directory (or a path where one can be made)")
    overrides = {k: v for k, v in (("driver", args.driver), ("record", args.record)) if v}
    if args.out:
        _claim_out(Path(args.out), _scenario_hash(data, scenario, overrides), args.scenario, args.force_new)
    summaries, last = [], None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        for rep in range(scenario.replications):
            rep_dir = Path(args.out) / f"rep-{rep:03d}" if args.out else None
            done = _finished(rep_dir) if rep_dir else None
            if done is not None:
                summaries.append(done)
                console.print(f"replication {rep}: already done in {rep_dir}, skipped")
                continue
            task = progress.add_task(f"replication {rep}", total=scenario.run["duration_s"])
            result = scenario.simulate(
                rep, progress=lambda done, total, t=task: progress.update(t, completed=done), **overrides
            )
            progress.update(task, completed=scenario.run["duration_s"])
            summaries.append(result.summary())
            last = result
            reports = _pattern_reports(scenario, result, rep, console)
            if rep_dir:
                _write(result, rep_dir)
                for kind in dict.fromkeys(k for k, _ in reports):  # one file per kind, entries stacked
                    frames = [f.assign(report=i) for i, (k, f) in enumerate(reports) if k == kind]
                    pd.concat(frames, ignore_index=True).to_csv(rep_dir / f"pattern-{kind}.csv", index=False)
    console.print(_summary_table(scenario.name, summaries))
    if last is not None and len(last.accuracy()):
        table, warnings = _model_table(last)
        console.print(table)
        for line in warnings:
            console.print(line, style="yellow", markup=False, highlight=False)
    if last is not None:
        console.print(_parameter_table(last))
        console.print(_station_table(last))
        topics = _topic_table(last)
        if topics is not None:
            console.print(topics)
        traffic = _traffic_table(last)
        if traffic is not None:
            console.print(traffic)
        hosts = _host_table(last)
        if hosts is not None:
            console.print(hosts)
    if args.out:
        pd.DataFrame(summaries).assign(replication=range(len(summaries))).to_csv(
            Path(args.out) / "summary.csv", index=False
        )
        console.print(f"results written to {args.out}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Command-line mistakes are bad input too: one line on stderr, status 2."""

    def error(self, message):
        self.exit(2, f"pubsim: error: {message} (see '{self.prog} --help')\n")


def build_parser():
    parser = _Parser(prog="pubsim", description="Simulate publish/subscribe middleware networks.")
    parser.add_argument("--version", action="version", version=f"pubsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario file")
    run.add_argument("scenario", help="scenario YAML file")
    run.add_argument("--out", help="directory for records, figures and summaries")
    run.add_argument("--driver", choices=["batch", "reference"], help="override the scenario's driver")
    run.add_argument("--record", choices=["full", "stream"], help="override the scenario's record mode")
    run.add_argument(
        "--force-new",
        action="store_true",
        help="delete results of another version of the scenario in --out and start over",
    )
    add_budget_arguments(run)
    run.set_defaults(func=_run)
    draw = sub.add_parser("draw", help="draw a scenario's topology (brokers, grouped clients, link rates)")
    draw.add_argument("scenario", help="scenario YAML file")
    draw.add_argument("--out", help="figure file (.png, .svg, .pdf; default SCENARIO-topology.png)")
    draw.set_defaults(func=_draw)

    calibration_commands(sub)

    trace_commands(sub)

    study_commands(sub)

    report_commands(sub)

    preset_commands(sub)
    feature_commands(sub)
    saturate_commands(sub)
    paper_commands(sub)
    return parser


def _drop_quietly(err):
    """Free what the interrupted frames held, without noise.

    A writer abandoned mid-write (pyarrow's ParquetWriter) would otherwise
    print "Exception ignored in __del__" with a traceback as the interpreter
    exits, after the one-line "interrupted" message. Finished files are
    unaffected: results are written atomically (temporary file, then rename).
    """
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        err.__traceback__ = None
        err.__context__ = None
        gc.collect()
    finally:
        sys.unraisablehook = hook


def _run_command(func, args, console):
    """``func(args, console)``: its exit status, one-line errors, 130 after a Ctrl-C (also one a
    finalizer swallowed, :mod:`pubsim.interrupts`)."""
    try:
        with interrupts.catching():
            status = func(args, console)
            interrupts.raise_if_swallowed()
            return status
    except ConfigError as err:
        print(f"pubsim: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if func is not _run:
            raise
        print(f"pubsim: error: {err}", file=sys.stderr)  # results cannot be written (disk full, permissions)
        return 1
    except KeyboardInterrupt as err:
        _drop_quietly(err)
        print("pubsim: interrupted; finished work is kept and resumed on the next run", file=sys.stderr)
        return 130


def main(argv=None):
    args = build_parser().parse_args(argv)
    # a pipe or a file gets wide tables rather than words cut to fit 80 columns
    console = Console() if sys.stdout.isatty() else Console(width=200)
    return _run_command(args.func, args, console)


if __name__ == "__main__":
    sys.exit(main())
