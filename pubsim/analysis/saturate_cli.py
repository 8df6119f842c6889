"""``pubsim saturate SCENARIO``: the interval search of SYSTEMS.md §4 on the simulator.

Re-rates the publishers matched by ``--rerate`` (glob patterns of names;
default all), judges each probe with the rate-weighted sp-ratio, and prints
the limit with its search error and the bottleneck station
(:func:`pubsim.analysis.saturation_search`), then the model error band of
the brokers' calibrated profiles and the real limit it implies, with
extrapolation warnings (:mod:`pubsim.bands`). The probes run side by side
with ``--workers N`` (local process pool) or ``--dask ADDR`` (the refine grid
at once, the doubling phase in speculative brackets of one interval per
worker), with the same results as serial. The costliest probe (re-rated publishers at the
first interval) is checked against the budget (:mod:`pubsim.budget`) first.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.table import Table

from ..bands import accuracy_table, real_range, summary_fields
from ..budget import add_arguments as add_budget_arguments
from ..budget import check as check_budget
from ..budget import from_args as budget_from_args
from ..scenario import parse_scenario, read_yaml
from ..sim.errors import ConfigError
from ..sim.units import parse_duration_s
from ..study.executors import make_executor
from .saturation import Saturation, rerated_publishers, saturation_search

__all__ = ["add_commands", "saturation_table"]


def add_commands(sub) -> None:
    """Register ``saturate`` on the ``pubsim`` subcommand parser ``sub``."""
    p = sub.add_parser("saturate", help="find a scenario's limit by the interval search of SYSTEMS.md §4")
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument(
        "--rerate",
        nargs="+",
        action="extend",
        metavar="PATTERN",
        help="re-rate only publishers whose names match these glob patterns (default: all)",
    )
    p.add_argument("--start", default="1ms", help="first (smallest) publish interval per publisher (default 1ms)")
    p.add_argument("--duration", default="2s", help="simulated length of each probe (default 2s)")
    p.add_argument("--warmup", default="0.5s", help="warm-up of each probe, not measured (default 0.5s)")
    p.add_argument("--steps", type=int, default=20, help="steps dividing [x/2, x] (default 20: 5%% resolution)")
    p.add_argument("--seed", type=int, help="seed (default: the scenario's)")
    p.add_argument("--workers", type=int, help="run the probes on a local pool of N processes")
    p.add_argument(
        "--executor", choices=["serial", "local"], help="where probes run (default serial, local with --workers)"
    )
    p.add_argument("--dask", metavar="ADDR", help="run the probes on Dask: a scheduler address or 'local'")
    add_budget_arguments(p)
    p.set_defaults(func=_saturate)


def saturation_table(name: str, s: Saturation) -> Table:
    """The headline of a search as a small rich table."""
    t = Table(title=f"saturation of {name}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    bound = "" if s.limit_reached else " (lower bound: limit above the search range)"
    t.add_row("limit (re-rated publishers)", f"{s.limit_per_s:,.1f} msg/s ± {s.error_bound_pct:.1f} %{bound}")
    t.add_row(
        "limit (all offered)", f"{s.limit_total_per_s:,.1f} msg/s (others kept at {s.other_rate_per_s:,.1f} msg/s)"
    )
    t.add_row("sustainable interval", f"{s.interval_s * 1e3:.4g} ms per publisher x {s.publishers} publishers")
    if s.bottleneck is not None:
        t.add_row(
            "bottleneck",
            f"{s.bottleneck} (utilization {s.bottleneck_utilization:.1%} at {s.bottleneck_interval_s * 1e3:.4g} ms)",
        )
    else:
        t.add_row("bottleneck", "none found (no unsustainable probe above the limit)")
    t.add_row("probes run", str(len(s.probes)))
    if s.saturated_everywhere:
        t.add_row("note", "no probe was sustainable: the limit lies below the search range")
    return t


def model_lines(table, limit_per_s, *, lower_bound=False):
    """``(text, style)`` lines on the model error of a limit: the brokers' held-out band, the real
    limit it implies (:func:`pubsim.bands.real_range`) and the extrapolation warnings."""
    if table.empty:
        return []
    f = summary_fields(table)
    lines = [(f"model band: {f['model_band']}", None)]
    real = real_range(limit_per_s, f["model_saturation_error_low_pct"], f["model_saturation_error_high_pct"])
    if real is not None:
        span = f"> {real[0]:,.0f}" if lower_bound else f"{real[0]:,.0f} .. {real[1]:,.0f}"
        lines.append(
            (
                f"real limit if the model errs as on held-out data: {span} msg/s "
                "(model error, apart from the search error above)",
                None,
            )
        )
    if f["model_extrapolation"]:
        lines.append(
            (f"warning: outside the profile's fitted range (extrapolation): {f['model_extrapolation']}", "yellow")
        )
    return lines


def _saturate(args, console) -> int:
    start_s = parse_duration_s(args.start, "--start")
    duration_s = parse_duration_s(args.duration, "--duration")
    warmup_s = parse_duration_s(args.warmup, "--warmup")
    if not start_s > 0:
        raise ConfigError("--start", args.start, "a positive interval such as 1ms")
    if not duration_s > warmup_s:
        raise ConfigError("--duration", args.duration, f"longer than the warm-up ({args.warmup})")
    if args.steps < 1:
        raise ConfigError("--steps", args.steps, "an integer >= 1")
    executor = make_executor(args.executor or ("local" if args.workers else "serial"), args.dask, args.workers)
    _, data = read_yaml(args.scenario)
    budget = budget_from_args(args)
    scenario = parse_scenario(data, base_dir=Path(args.scenario).parent, budget=budget)
    # the costliest probe: the re-rated publishers at the first (smallest) interval
    fastest = dict.fromkeys(rerated_publishers(scenario.topology, args.rerate), 1.0 / start_s)
    check_budget(scenario, budget, duration_s=duration_s, replications=1, rates=fastest)
    seed = scenario.seed if args.seed is None else args.seed
    console.print(f"interval search on {scenario.name}: probes of {duration_s:g} s on {executor.description}")
    t0 = time.perf_counter()
    s = saturation_search(
        scenario,
        rerate=args.rerate,
        start_interval_s=start_s,
        duration_s=duration_s,
        warmup_s=warmup_s,
        seed=seed,
        steps=args.steps,
        driver=scenario.run.get("driver", "batch"),
        executor=executor,
        progress=lambda rec: console.print(
            f"  {rec['interval_s'] * 1e3:9.4g} ms  sustainability "
            f"{rec['sustainability_weighted']:.3f}  delivery {rec['delivery_ratio_weighted']:.3f}"
        ),
    )
    console.print(saturation_table(scenario.name, s))
    for line, style in model_lines(accuracy_table(scenario.topology), s.limit_per_s, lower_bound=not s.limit_reached):
        console.print(line, style=style, markup=False, highlight=False)
    console.print(f"{time.perf_counter() - t0:.1f} s wall time")
    return 0
