"""``pubsim measure``, ``pubsim calibrate`` and ``pubsim validate``.

- ``pubsim measure CAMPAIGN.yaml --out DIR``: run a measurement campaign on
  real brokers (installed by ``scripts/install_brokers.sh``), resuming at
  the first unfinished (broker, configuration) pair found in DIR.
- ``pubsim calibrate DIR [--write [PRESET_DIR]] [--no-variability]``: fit one
  profile per broker on the campaign's ``train`` runs (with the variability
  of the per-message costs chosen by simulation unless ``--no-variability``)
  and print it; ``--write`` saves it as ``<broker>.yaml`` in the user preset
  folder (``$PUBSIM_PRESETS``, else ``~/.config/pubsim/presets``), never in
  the installed package, or in PRESET_DIR (the repository's own profiles:
  ``models/presets/calibrated``); loadable by name either way.
- ``pubsim validate DIR [--report OUT]``: simulate every measured
  configuration with the profiles fitted on the ``train`` runs and print the
  accuracy per broker and configuration, held-out ones marked; ``--report``
  writes the tables as CSV and the figures as PNG.
"""

from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..models import presets
from .campaign import load_campaign, read_results, run_campaign
from .profile import profile_yaml
from .report import accuracy_table, cdf_figure, saturation_figure
from .runner import RealHarness
from .validate import fit_profiles, validate

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

        harness.on_run = lambda spec, row: bar.console.log(
            f"{spec.broker} {spec.config} {spec.phase} {spec.rate_per_s:,.0f} msg/s -> "
            f"ingress {row['ingress_rate_per_s']:,.0f}/s, delivery ratio {row['delivery_ratio']:.3f}, "
            f"p50 {row['latency_p50_s'] * 1e6:,.0f} us"
        )
        run_campaign(campaign, args.out, harness, progress=step, metadata=harness.metadata())
    console.print(f"results in {args.out}: runs.csv, saturation.csv, latency.parquet, meta.json")
    return 0


def _fitted(args):

    runs, sat, lat, meta = read_results(args.results)
    return runs, sat, lat, meta, fit_profiles(runs, meta, variability=args.variability)


def _calibrate(args, console):

    *_, profiles = _fitted(args)
    target = None if args.write is None else (presets.user_dir() if args.write == "" else Path(args.write))
    for kind, profile in profiles.items():
        text = profile_yaml(profile)
        console.print(text, markup=False, highlight=False)
        if target is not None:
            target.mkdir(parents=True, exist_ok=True)
            (target / f"{kind}.yaml").write_text(text)
            console.print(f"wrote {target / f'{kind}.yaml'}")
    return 0


def _table(df, title):
    table = Table(title=title)
    for col in df.columns:
        table.add_column(str(col), justify="right", no_wrap=True)
    for _, row in df.iterrows():
        table.add_row(*[f"{v:.3g}" if isinstance(v, float) else str(v) for v in row])
    return table


def _validate(args, console):

    runs, sat, lat, meta, profiles = _fitted(args)
    with _progress(console) as bar:
        task = bar.add_task("validating", total=len(sat))
        v = validate(
            runs,
            sat,
            lat,
            profiles,
            progress=lambda d, t, label: bar.update(task, completed=d, total=t, description=label),
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
        "ks_distance": "KS",
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
    c = sub.add_parser("calibrate", help="fit broker profiles from a campaign's results")
    c.add_argument("results", help="campaign result directory")
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
    v = sub.add_parser("validate", help="compare simulation with a campaign's measurements")
    v.add_argument("results", help="campaign result directory")
    v.add_argument("--report", help="directory for accuracy tables and figures")
    _variability_flag(v)
    v.set_defaults(func=_validate)
