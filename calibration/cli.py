"""``pubsim measure``, ``pubsim calibrate`` and ``pubsim validate``.

- ``pubsim measure CAMPAIGN.yaml --out DIR``: run a measurement campaign on
  real brokers (installed by ``scripts/install_brokers.sh``), resuming at
  the first unfinished (broker, configuration) pair found in DIR.
- ``pubsim calibrate TABLE.csv|TABLE.yaml [--write [PRESET_DIR]]``: fit every
  CPU term an evidence table identifies (:mod:`pubsim.calibration.evidence`,
  :mod:`pubsim.calibration.evidence_fit`), print them with bootstrap
  intervals and identifiability, and with ``--write`` save one broker
  profile per kind recording its evidence.
- ``pubsim calibrate DIR [--write [PRESET_DIR]] [--no-variability]
  [--export-evidence FILE]``: fit one
  profile per broker on the campaign's ``train`` runs (with the variability
  of the per-message costs chosen by simulation unless ``--no-variability``)
  and print it; ``--write`` saves it as ``<broker>.yaml`` in the user preset
  folder (``$PUBSIM_PRESETS``, else ``~/.config/pubsim/presets``), never in
  the installed package, or in PRESET_DIR (the repository's own profiles:
  ``models/presets/calibrated``); loadable by name either way.
- ``pubsim accuracy DIR [--validation FILE] [--write PRESET_DIR]``: print
  each broker's validation errors per split (saturation, p50, p99) and the
  range of its training configurations, from the campaign's runs and its
  validation table (``DIR/validation-accuracy.csv``, the ``accuracy.csv``
  of ``pubsim validate --report``); ``--write`` records them as the
  ``provenance.accuracy`` of the profiles in PRESET_DIR
  (:mod:`pubsim.calibration.accuracy`). ``pubsim calibrate DIR`` records
  them too when that table is present.
- ``pubsim validate DIR [--report OUT]``: simulate every measured
  configuration with the profiles fitted on the ``train`` runs and print the
  accuracy per broker and configuration, held-out ones marked; ``--report``
  writes the tables as CSV and the figures as PNG.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..models import presets
from ..sim.errors import ConfigError
from .accuracy import VALIDATION_FILE, campaign_accuracy, record_accuracy, with_accuracy
from .campaign import load_campaign, pool_results, read_results, run_campaign
from .evidence import evidence_from_results, is_evidence_file, read_evidence, write_evidence
from .evidence_fit import TERMS, EvidenceCalibrator, demand_rows, evidence_profile
from .fit import CONNECTION_FORMS
from .iofit import fit_io_profiles
from .pacing import pacing_from_runs, run_pacing_from_runs
from .profile import profile_yaml
from .report import accuracy_table, cdf_figure, saturation_figure
from .runner import RealHarness
from .stalls import TickStallCalibrator
from .validate import fit_profiles, pair_machine, validate

__all__ = ["add_commands"]


def _progress(console):
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def _measure(args, console):

    campaign = load_campaign(args.campaign)
    with RealHarness(campaign, workdir=Path(args.out) / "work") as harness, _progress(console) as bar:
        task = bar.add_task(f"campaign {campaign.name}", total=len(campaign.pairs()))

        def step(done, total, label):
            bar.update(task, completed=done, description=f"{campaign.name}: {label}")

        harness.on_run = lambda spec, row: bar.console.log(_run_line(spec, row))
        run_campaign(campaign, args.out, harness, progress=step, metadata=harness.metadata())
    console.print(f"results in {args.out}: runs.csv, saturation.csv, latency.parquet, meta.json")
    return 0


def _run_line(spec, row):
    """One measured run as the progress log shows it (a blocked run: why)."""
    head = f"{spec.broker} {spec.config} {spec.phase} {spec.rate_per_s:,.0f} msg/s -> "
    if "run_error" in row:
        return head + row["run_error"]
    return (
        head + f"ingress {row['ingress_rate_per_s']:,.0f}/s, delivery ratio {row['delivery_ratio']:.3f}, "
        f"p50 {row['latency_p50_s'] * 1e6:,.0f} us"
    )


def _pacing(args, runs):
    """The load generator's measured pacing, unless ``--no-pacing`` or the campaign did not record
    it (None: the twin's publishers send on time): each run's own (:func:`run_pacing_from_runs`,
    ``--pacing-from runs``, the default) or the one-publisher model of the training split
    (:func:`pacing_from_runs`) for every run."""
    if not args.pacing:
        return None
    one = pacing_from_runs(runs[runs["split"] == "train"], source="the campaign's training runs")
    if args.pacing_from == "one-publisher":
        return one
    return run_pacing_from_runs(runs, fallback=one, source="the campaign's runs")


def _fitted(args, results=None, stalls=None, pacing=None):
    """``(runs, saturation, latency, meta, profiles)``; ``results`` as :func:`read_results` gave them, or read."""
    runs, sat, lat, meta = read_results(args.results) if results is None else results
    form = None if args.connection_form == "none" else args.connection_form
    profiles = fit_profiles(
        runs,
        meta,
        variability=args.variability,
        connection_form=form,
        stalls=stalls,
        jitter_on=args.jitter_on,
        idle_exit_on=args.idle_exit,
        pacing=pacing,
        length_bytes=args.length_bytes,
        speed_drift=args.speed_drift,
        reader_wakes=args.reader_wakes,
        copies_in_turn=args.copies_in_turn,
        wake_curve=args.wake_curve or args.wake_work,
        wake_work=args.wake_work,
        heap_trim=args.heap_trim,
        knee_wakeups=args.knee_wakeups,
        knee_anchor=args.knee_anchor,
        cpu_tick_s=args.cpu_tick,
    )
    if args.io_cycles:  # the named brokers with the I/O-cycle structure (pubsim.calibration.iofit)
        profiles.update(fit_io_profiles(runs, meta, kinds=args.io_cycles.split(","), cpu_tick_s=args.cpu_tick))
    return runs, sat, lat, meta, profiles


def _tick_stalls(runs, latency):
    """Scheduler-tick stalls fitted on the training split's lightly loaded runs (:mod:`.stalls`)."""
    train = runs[runs["split"] == "train"]
    cal = TickStallCalibrator().fit(train, latency)
    p = cal.params_
    return cal.stalls(
        f"{p['n_runs']} training runs below half the cap: {p['late_fraction']:.3%} of messages "
        f"late by more than {cal.late_s * 1e3:g} ms"
    )


def _target(args):
    return None if args.write is None else (presets.user_dir() if args.write == "" else Path(args.write))


def _save(profiles, target, console, *, show=True):
    for kind, profile in profiles.items():
        text = profile_yaml(profile)
        if show:
            console.print(text, markup=False, highlight=False)
        if target is not None:
            target.mkdir(parents=True, exist_ok=True)
            (target / f"{kind}.yaml").write_text(text)
            console.print(f"wrote {target / f'{kind}.yaml'}")


def _value(x, unit):
    if unit == "s":
        return f"{x * 1e6:.4g} us"
    if unit == "s/B":
        return f"{x * 1e9:.4g} ns/B"
    return f"{x:.4g} {unit}"


def _terms_table(kind, cal):
    p = cal.params_
    table = Table(title=f"{kind}: CPU demand per ingress message, from {p['n_rows']} evidence rows")
    for col in ("term", "value", f"{cal.level:.0%} interval", "meaning"):
        table.add_column(col, no_wrap=col != "meaning")
    for name, unit, meaning in TERMS:
        t = p[name]
        if t["identifiable"]:
            ci = f"{_value(t['low'], unit)} .. {_value(t['high'], unit)}" if t["low"] == t["low"] else "-"
            table.add_row(name, _value(t["value"], unit), ci, t["reason"] or meaning)
        else:
            table.add_row(name, "-", "-", t["reason"])
    return table


def _fit_lines(cal):
    p = cal.params_
    ranges = ", ".join(f"{k} {lo:g}..{hi:g}" for k, (lo, hi) in p["ranges"].items())
    lines = [
        f"subscription term: {p['subscription_form']} form kept ({p['subscription_choice']})",
        f"residuals: rms {p['rms_relative_error']:.2%}, max {p['max_relative_error']:.2%} (relative, fitted rows)",
        f"fitted ranges: {ranges}",
    ]
    if p["unused"]:
        lines.append("rows without a demand (not fitted): " + ", ".join(f"{n} {k}" for k, n in p["unused"].items()))
    return lines


def _calibrate_table(args, console):
    table = read_evidence(args.results)
    profiles = {}
    for kind, rows in table.groupby("broker", sort=True):
        if demand_rows(rows).empty:
            kinds = ", ".join(f"{n} {k}" for k, n in rows.observation.value_counts().items())
            console.print(f"{kind}: no limit, cpu or saturated throughput rows ({kinds}): nothing to fit")
            continue
        cal = EvidenceCalibrator(n_boot=args.bootstrap, seed=args.seed).fit(rows.reset_index(drop=True))
        console.print(_terms_table(kind, cal))
        for line in _fit_lines(cal):
            console.print(line, markup=False, highlight=False)
        date = datetime.date.today().isoformat()
        profiles[kind] = evidence_profile(kind, rows, cal, source=Path(args.results).name, date=date)
    _save(profiles, _target(args), console, show=False)
    return 0


def _pooled(args, what, console):
    """Several result directories (``pubsim {what} A B ...``): read as one (:func:`pool_results`); None for one."""
    if len(args.results) == 1:
        args.results = args.results[0]
        return None
    for path in args.results:
        if is_evidence_file(path):
            raise ConfigError("results", str(path), f"campaign result directories only when {what} pools several")
    pooled = pool_results(args.results)
    for r in pooled[3]["machine_differences"]:
        console.print(
            f"warning: {_machine_line(r, Path(args.results[0]).resolve().name)}", markup=False, highlight=False
        )
    return pooled


def _machine_line(r, first):
    """One line of a machine difference (:func:`pubsim.calibration.harness.machine.compare_machines`)."""
    if r["figure"] == "kernel":
        return f"{r['campaign']} ran on kernel {r['value']}, {first} on {r['reference']}: pooling mixes machines"
    return (
        f"{r['campaign']}'s {r['figure']} is {r['ratio']:.2f} x {first}'s ({r['value']:.3g} against "
        f"{r['reference']:.3g}): pooling mixes machines (calibration/README.md, 'The machine drifts')"
    )


def _calibrate(args, console):

    pooled = _pooled(args, "calibrate", console)
    if pooled is None and is_evidence_file(args.results):
        return _calibrate_table(args, console)
    if args.export_evidence and pooled is not None:
        raise ConfigError("--export-evidence", args.export_evidence, "one result directory, not several")
    if args.export_evidence:
        runs, sat, _, meta = read_results(args.results)
        table = evidence_from_results(runs, sat, meta, reference=str(args.results))
        write_evidence(table, args.export_evidence)
        console.print(f"wrote {args.export_evidence} ({len(table)} observations)")
    results = read_results(args.results) if pooled is None else pooled
    *_, profiles = _fitted(args, results, pacing=_pacing(args, results[0]))
    if pooled is None and (Path(args.results) / VALIDATION_FILE).is_file():  # the campaign's validation
        blocks = campaign_accuracy(args.results)
        profiles = {k: with_accuracy(p, blocks[k]) if k in blocks else p for k, p in profiles.items()}
    _save(profiles, _target(args), console)
    return 0


def _band(stats):
    if stats is None:
        return "-"
    return f"{stats['low']:+.0f} .. {stats['high']:+.0f} % (median |e| {stats['median_abs']:.0f} %, n={stats['n']})"


def _accuracy(args, console):
    """``pubsim accuracy DIR [--validation FILE] [--write PRESET_DIR]``."""
    blocks = campaign_accuracy(args.results, args.validation)
    table = Table(title=f"accuracy per broker from {args.validation or Path(args.results) / VALIDATION_FILE}")
    for col in ("broker", "split", "configs", "saturation error", "p50 error", "p99 error"):
        table.add_column(col, no_wrap=col in ("broker", "split", "configs"))
    for kind, acc in blocks.items():
        for split in ("train", "holdout"):
            if split in acc:
                e = acc[split]
                table.add_row(
                    kind,
                    split,
                    str(e["configurations"]),
                    *(_band(e.get(m)) for m in ("saturation_error_pct", "p50_error_pct", "p99_error_pct")),
                )
    console.print(table)
    for kind, acc in blocks.items():
        ranges = ", ".join(f"{k} {lo:g}..{hi:g}" for k, (lo, hi) in acc["fitted_range"].items())
        console.print(f"{kind} fitted on: {ranges}", markup=False, highlight=False)
    if args.write:
        written = record_accuracy(args.results, Path(args.write), args.validation)
        for kind, path in written.items():
            console.print(f"wrote the accuracy of {kind} into {path}")
        missing = sorted(set(blocks) - set(written))
        if missing:
            console.print(f"no profile file in {args.write} for: {', '.join(missing)} (not written)")
    return 0


def _table(df, title):
    table = Table(title=title)
    for col in df.columns:
        table.add_column(str(col), justify="right", no_wrap=True)
    for _, row in df.iterrows():
        table.add_row(*[f"{v:.3g}" if isinstance(v, float) else str(v) for v in row])
    return table


def _validate(args, console):

    pooled = _pooled(args, "validate", console)
    results = read_results(args.results) if pooled is None else pooled
    stalls = _tick_stalls(results[0], results[2]) if args.tick_stalls else None
    pacing = _pacing(args, results[0])
    runs, sat, lat, meta, profiles = _fitted(args, results, stalls, pacing)
    if stalls is not None:
        console.print(f"tick stalls: {stalls.rate_per_s:.3g} per s per client link ({stalls.source})")
    if pacing is not None:
        console.print(f"pacing: {pacing.describe()}")
    with _progress(console) as bar:
        task = bar.add_task("validating", total=len(sat))
        v = validate(
            runs,
            sat,
            lat,
            profiles,
            progress=lambda d, t, label: bar.update(task, completed=d, total=t, description=label),
            stalls=stalls,
            pacing=pacing,
            machine=pair_machine(meta) if args.idle_exit else None,
        )
    acc = accuracy_table(v.per_pair, v.per_run)
    cols = {
        "broker": "broker",
        "config": "config",
        "split": "split",
        "measured_limit_per_s": "limit meas/s",
        "simulated_limit_per_s": "limit sim/s",
        "saturation_error_pct": "sat err %",
        "p50_error_pct": "p50 err %",
        "p90_error_pct": "p90 err %",
        "p99_error_pct": "p99 err %",
        "p50_bracket_error_pct": "p50 br. %",
        "p99_bracket_error_pct": "p99 br. %",
        "ks_distance": "KS",
        "cpu_error_pct": "cpu err %",
        "passes_measured": "passes meas",
        "passes_simulated": "passes sim",
        "throttled_measured": "thr. meas",
        "throttled_simulated": "thr. sim",
        "shortfall_error_pp": "short. pp",
    }
    shown = acc[[c for c in cols if c in acc]].rename(columns=cols)
    console.print(_table(shown, f"simulated vs measured ({meta.get('campaign')}); errors = (sim - meas) / meas"))
    if args.report:
        out = Path(args.report)
        out.mkdir(parents=True, exist_ok=True)
        acc.to_csv(out / "accuracy.csv", index=False)
        v.per_run.to_csv(out / "per_run.csv", index=False)
        for (kind, config), sims in v.simulated_latency.items():
            cdf_figure(lat, v.per_run, sims, broker=kind, config=config).savefig(out / f"cdf-{kind}-{config}.png")
            saturation_figure(v.per_run, broker=kind, config=config).savefig(out / f"saturation-{kind}-{config}.png")
            # optional heavy dependency: matplotlib, only when figures are drawn
            import matplotlib.pyplot as plt

            plt.close("all")
        console.print(f"report in {out}")
    return 0


def _variability_flag(parser):
    parser.add_argument(
        "--io-cycles",
        metavar="BROKERS",
        default="",
        help="comma-separated broker kinds fitted with the I/O-cycle structure instead of the plain "
        "worker (e.g. nats,zmq-proxy; pubsim.calibration.iofit)",
    )
    parser.add_argument(
        "--connection-form",
        choices=(*CONNECTION_FORMS, "auto", "none"),
        default="auto",
        help="form of the per-connection cost, fitted where the training configurations identify it "
        "(pubsim.calibration.fit.CONNECTION_FORMS); auto (default): per_pass for a broker that reads one "
        "packet per connection per pass (Mosquitto), per_message for the others; none: not fitted",
    )
    parser.add_argument(
        "--jitter-on",
        choices=("every_packet", "idle_receiver", "auto"),
        default="auto",
        help="the fitted loopback link's jitter: on every message, or only on a message that finds "
        "its receiver idle (LinkParams.jitter_on); auto (default): per broker, the mode whose simulated "
        "training runs have the smaller latency errors (pubsim.calibration.jitter)",
    )
    parser.add_argument(
        "--no-pacing",
        dest="pacing",
        action="store_false",
        help="let the twin's publishers send on time instead of with the lateness and back-to-back gaps "
        "the campaign measured (runs.csv pacing_* fields; pubsim.calibration.pacing)",
    )
    parser.add_argument(
        "--pacing-from",
        choices=("runs", "one-publisher"),
        default="runs",
        help="the twin of each run replays that run's own measured lateness (runs: its publishers' "
        "turns on the shared client core included; the default), or every twin draws from the "
        "training split's one-publisher runs and shares one modelled client core (one-publisher)",
    )
    parser.add_argument(
        "--no-idle-exit",
        dest="idle_exit",
        action="store_false",
        help="leave the brokers' idle exit out even where the campaign measured one (meta.json idle_exit; "
        "pubsim.models.params.idle), and fit the link on the demand instead of the simulated path",
    )
    parser.add_argument(
        "--no-length-bytes",
        dest="length_bytes",
        action="store_false",
        help="leave out the cost per MQTT remaining-length byte (BrokerParams.length_byte_cost_s) even for "
        "a broker that reads them byte by byte and a campaign whose payloads identify it",
    )
    parser.add_argument(
        "--no-speed-drift",
        dest="speed_drift",
        action="store_false",
        help="keep each broker's speed constant instead of fitting its slow drift to the throttled-period "
        "fractions of its capped training runs (BrokerParams.speed_drift_log_sd; pubsim.calibration.drift)",
    )
    parser.add_argument(
        "--reader-wakes",
        action="store_true",
        help="fit what a copy that wakes its sleeping reader costs more and simulate it (BrokerParams.reader_wake; "
        "needs the subscribers' counted sleeps, subscriber_sleeps_per_copy); off by default: its rule counts "
        "sleeps from arrival gaps and misses the bursts of a throttled broker (calibration/README.md)",
    )
    parser.add_argument(
        "--wake-curve",
        action="store_true",
        help="price each wake-up by how long the broker idled before it, in the shape of the reader wake-ups "
        "the campaign measured on its machine (meta.json idle_exit wake_idle_s; BrokerParams.wake_curve, "
        "pubsim.calibration.wakecurve); off by default: it helps some campaigns and hurts others "
        "(calibration/README.md)",
    )
    parser.add_argument(
        "--wake-work",
        action="store_true",
        help="with --wake-curve (implied), a full wake-up also adds a fitted share of the message's own work, "
        "on its path (WakeCurveParams.work_share)",
    )
    parser.add_argument(
        "--no-heap-trim",
        dest="heap_trim",
        action="store_false",
        help="leave out the pages a broker faults in again after its allocator trimmed its heap (default: "
        "Mosquitto's cost per page is fitted where a training payload faults pages; BrokerParams.heap_trim, "
        "pubsim.calibration.heapfit)",
    )
    parser.add_argument(
        "--copies-at-end",
        dest="copies_in_turn",
        action="store_false",
        help="send every copy of a message when the broker's service of it ends, also for a broker that writes "
        "each copy as it routes it (Mosquitto; default: those copies leave one after the other, "
        "BrokerParams.copies_in_turn)",
    )
    parser.add_argument(
        "--knee-wakeups",
        action="store_true",
        help="take the measured wake-ups of the runs nearest each limit out of their busy costs, for "
        "brokers that still sleep between bursts at their limit (pubsim.calibration.fit.KneeDemandCalibrator)",
    )
    parser.add_argument(
        "--knee-anchor",
        choices=("runs", "bracket"),
        default="runs",
        help="busy costs from the measured CPU of the runs nearest each limit (runs, default), or, where such "
        "a run spent its whole CPU quota, from the quota over the middle of the limit's bracket (bracket: "
        "pubsim.calibration.fit.KneeDemandCalibrator)",
    )
    parser.add_argument(
        "--cpu-tick",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="check each capped broker's CPU quota at scheduler ticks of this length, as Linux charges a busy "
        "task's runtime (e.g. 0.004 for CONFIG_HZ=250): a broker working without a break runs past its quota "
        "and repays it from the next periods (BrokerParams.cpu_tick_s); 0 (default): checked at every instant",
    )
    parser.add_argument(
        "--no-variability",
        dest="variability",
        action="store_false",
        help="keep per-message costs constant (skip the simulated fit of their variability)",
    )


def add_commands(sub):
    """Add the calibration commands to the ``pubsim`` sub-parsers; each sets ``func``."""
    m = sub.add_parser("measure", help="measure real brokers (a campaign file)")
    m.add_argument("campaign", help="campaign YAML file, e.g. experiments/calibration/campaign.yaml")
    m.add_argument("--out", required=True, help="result directory (resumes if it exists)")
    m.set_defaults(func=_measure)
    c = sub.add_parser("calibrate", help="fit broker profiles from a campaign's results or an evidence table")
    c.add_argument(
        "results",
        nargs="+",
        help="campaign result directory, or an evidence table (.csv, .yaml: see docs/evidence.md); several "
        "result directories are pooled (pubsim.calibration.campaign.pool_results)",
    )
    c.add_argument(
        "--export-evidence", metavar="FILE", help="also write a result directory as an evidence table (.csv or .yaml)"
    )
    c.add_argument("--bootstrap", type=int, default=300, help="bootstrap resamples for an evidence table (default 300)")
    c.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    c.add_argument(
        "--write",
        nargs="?",
        const="",
        metavar="DIR",
        help="save as DIR/<broker>.yaml (default: the user preset folder, $PUBSIM_PRESETS or "
        "~/.config/pubsim/presets; the repository's own: models/presets/calibrated)",
    )
    _variability_flag(c)
    c.set_defaults(func=_calibrate)
    a = sub.add_parser("accuracy", help="record a campaign's validation errors and fitted ranges in its profiles")
    a.add_argument("results", help="campaign result directory (runs.csv, saturation.csv, validation-accuracy.csv)")
    a.add_argument("--validation", metavar="FILE", help=f"validation table (default RESULTS/{VALIDATION_FILE})")
    a.add_argument(
        "--write",
        metavar="DIR",
        help="rewrite DIR/<broker>.yaml with each broker's accuracy (e.g. models/presets/calibrated)",
    )
    a.set_defaults(func=_accuracy)
    v = sub.add_parser("validate", help="compare simulation with a campaign's measurements")
    v.add_argument(
        "results",
        nargs="+",
        help="campaign result directory; several are pooled: fitted and validated together, the runs of each "
        "after the first under configuration names suffixed @<directory name>",
    )
    v.add_argument("--report", help="directory for accuracy tables and figures")
    v.add_argument(
        "--tick-stalls",
        action="store_true",
        help="stall the simulated client links for up to one scheduler tick, at the rate the training "
        "split's lightly loaded runs show (pubsim.calibration.stalls)",
    )
    _variability_flag(v)
    v.set_defaults(func=_validate)
