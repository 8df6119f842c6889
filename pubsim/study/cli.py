"""``pubsim study run`` and ``pubsim study summary``.

``pubsim study run STUDY.yaml --out DIR [--executor local|serial]
[--dask ADDR|local] [--workers N] [--force-new] [--max-messages N] [--max-memory SIZE]
[--max-clients N]`` checks every point against the budget (:mod:`pubsim.budget`), then runs every unfinished
(point, replication) of a study and writes the layout of
:mod:`pubsim.study.store`; run again with the same DIR, it resumes.
``pubsim study summary DIR [--csv FILE]`` prints the mean and 95 %
confidence half-width over replications of the headline figures per point
(and writes every summary row to FILE).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.table import Table

from ..budget import add_arguments as add_budget_arguments
from ..budget import from_args as budget_from_args
from ..sim.errors import ConfigError
from . import load_study, run_study
from .stats import summary_with_ci
from .store import load_summary, read_manifest

__all__ = ["add_commands"]

_HEADLINE = [
    ("offered_per_s", "{:,.0f}"),
    ("egress_per_s", "{:,.0f}"),
    ("sustainability", "{:.4f}"),
    ("latency_p50_s", "ms"),
    ("latency_p99_s", "ms"),
    ("loss_rate", "{:.3%}"),
]


def _fmt(value, spec):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value * 1e3:.3f} ms" if spec == "ms" else spec.format(value)


def run_command(args, console):

    study = load_study(args.study, budget=budget_from_args(args))  # every point checked against the budget
    overrides = {k: v for k, v in (("driver", args.driver), ("record", args.record)) if v}
    df = run_study(
        study,
        args.out,
        executor=args.executor,
        dask_address=args.dask,
        workers=args.workers,
        progress="rich",
        force_new=args.force_new,
        run_overrides=overrides,
        console=console,
    )
    console.print(summary_table(df, list(study.varied), study.name))
    console.print(f"results written to {args.out}")
    return 0


def summary_table(df, varied, title):
    """A rich table: one row per point, mean ± half-width of the headline figures."""

    by = ["point_id", *varied]
    ci = summary_with_ci(df, by=by, value_cols=[k for k, _ in _HEADLINE if k in df.columns])
    table = Table(title=f"{title}: mean ± 95% CI over replications")
    for col in (*by, "n"):
        table.add_column(col, overflow="fold")
    for key, _ in _HEADLINE:
        table.add_column(key, justify="right")
    specs = dict(_HEADLINE)
    for key, grp in ci.groupby(by, sort=True, dropna=False):
        cells = {
            r.metric: f"{_fmt(r.mean, specs[r.metric])} ± {_fmt(r.half_width, specs[r.metric])}"
            for r in grp.itertuples()
        }
        table.add_row(*[str(k) for k in key], str(grp["n"].max()), *[cells.get(k, "-") for k, _ in _HEADLINE])
    return table


def summary_command(args, console):

    manifest = read_manifest(args.dir)
    if manifest is None:
        raise ConfigError(args.dir, "no manifest.json", "a study output directory (pubsim study run --out)")
    df = load_summary(args.dir)
    if df.empty:
        raise ConfigError(args.dir, "no finished replication", "a study directory with results")
    console.print(summary_table(df, list(manifest.get("varied", [])), manifest.get("name", "study")))
    done, total = len(df), len(manifest.get("points", [])) * int(manifest.get("replications", 1))
    console.print(f"{done} of {total} (point, replication) tasks finished")
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.csv, index=False)
        console.print(f"summary rows written to {args.csv}")
    return 0


def _workers(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return n


def add_commands(subparsers):
    """Add ``study run`` and ``study summary`` to an argparse subparsers object."""
    study = subparsers.add_parser("study", help="run batch studies (sweeps) and summarise them")
    ssub = study.add_subparsers(dest="study_command", required=True)
    run = ssub.add_parser("run", help="run (or resume) a study file")
    run.add_argument("study", help="study YAML file")
    run.add_argument("--out", required=True, help="output directory (resumed when it holds this study)")
    run.add_argument(
        "--executor", choices=["local", "serial"], default="local", help="local process pool (default) or in process"
    )
    run.add_argument("--dask", metavar="ADDR", help="run on Dask: tcp://host:8786 or 'local' (a local cluster)")
    run.add_argument("--workers", type=_workers, help="worker processes (default: CPU count)")
    run.add_argument("--force-new", action="store_true", help="delete results of a different study in --out")
    run.add_argument("--driver", choices=["batch", "reference"], help="override every point's driver")
    run.add_argument("--record", choices=["full", "stream"], help="override every point's record mode")
    add_budget_arguments(run)
    run.set_defaults(func=run_command)
    summ = ssub.add_parser("summary", help="print a study's summary table")
    summ.add_argument("dir", help="study output directory")
    summ.add_argument("--csv", metavar="FILE", help="write every summary row to FILE")
    summ.set_defaults(func=summary_command)
    return study
