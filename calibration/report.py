"""Figures and tables of a validation: measured against simulated.

Functions return matplotlib figures; saving them is the caller's choice.
"""

from __future__ import annotations

import numpy as np

from ..analysis.run_figures import plt
from .validate import TARGETS

__all__ = ["accuracy_table", "cdf_figure", "saturation_figure"]


def accuracy_table(per_pair, per_run):
    """One row per (broker, config): saturation error, median latency errors (and, where the runs
    recorded both stamp estimates, against their interval: ``p50_bracket_error_pct``), KS, CPU per message
    error and, where counted and simulated, event-loop passes per message (medians over the
    runs below saturation), shortfall error."""
    below = per_run[per_run["below_saturation"]]
    above = per_run[~per_run["below_saturation"]]
    agg = {}
    if len(below):
        agg = below.groupby(["broker", "config"]).agg(
            p50_error_pct=("p50_error_pct", "median"),
            p90_error_pct=("p90_error_pct", "median"),
            p99_error_pct=("p99_error_pct", "median"),
            **_brackets(below),
            ks_distance=("ks_distance", "median"),
            **({"cpu_error_pct": ("demand_error_pct", "median")} if "demand_error_pct" in below else {}),
            **_passes(below),
            **_throttled(below),
            runs_below=("run", "size"),
        )
    table = per_pair.set_index(["broker", "config"])
    if len(agg):
        table = table.join(agg)
    if len(above):
        table = table.join(
            above.groupby(["broker", "config"]).agg(
                shortfall_error_pp=("shortfall_error_pp", "median"), runs_above=("run", "size")
            )
        )
    table = table.reset_index()
    for key, limit in TARGETS.items():
        if key in table:
            table[f"meets_{key}"] = table[key].abs() <= limit
    return table


def _brackets(below):
    """Median p50 / p99 errors against the interval of the two stamp estimates, where recorded."""
    cols = [f"{q}_bracket_error_pct" for q in ("p50", "p99") if f"{q}_bracket_error_pct" in below]
    return {c: (c, "median") for c in cols}


def _pair(below, name, column, how):
    """``{name}_measured`` / ``{name}_simulated``: ``how`` of ``measured_{column}`` and
    ``simulated_{column}`` per pair, where the runs record both (else nothing)."""
    if f"measured_{column}" not in below:
        return {}
    return {f"{name}_{side}": (f"{side}_{column}", how) for side in ("measured", "simulated")}


def _passes(below):
    """Median measured and simulated event-loop passes per message, where both are known."""
    return _pair(below, "passes", "passes_per_ingress", "median")


def _throttled(below):
    """Mean measured and simulated fractions of throttled quota periods, where both are known."""
    return _pair(below, "throttled", "throttled_fraction", "mean")


def cdf_figure(latency, per_run, simulated, *, broker, config, runs=None):
    """Measured vs simulated latency CDFs (log time axis) of one pair's runs below saturation.

    ``simulated`` maps run number -> simulated latency sample (s).
    """
    fig, ax = plt.subplots(figsize=(6, 4))
    sel = per_run[(per_run.broker == broker) & (per_run.config == config) & per_run.below_saturation]
    if runs is not None:
        sel = sel[sel.run.isin(runs)]
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(len(sel), 1)))
    for color, (_, r) in zip(colors, sel.iterrows()):
        meas = np.sort(
            latency[(latency.broker == broker) & (latency.config == config) & (latency.run == r["run"])][
                "latency_s"
            ].to_numpy(dtype=float)
        )
        sim = np.sort(np.asarray(simulated.get(r["run"], []), dtype=float))
        label = f"{r['rate_per_s']:,.0f} msg/s"
        if meas.size:
            ax.step(meas, np.arange(1, meas.size + 1) / meas.size, color=color, label=f"measured {label}")
        if sim.size:
            ax.step(sim, np.arange(1, sim.size + 1) / sim.size, color=color, ls="--", label=f"simulated {label}")
    ax.set_xscale("log")
    ax.set_xlabel("latency (s)")
    ax.set_ylabel("fraction of deliveries")
    ax.set_title(f"{broker}, {config}: measured (solid) vs simulated (dashed)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def saturation_figure(per_run, *, broker, config):
    """Egress against offered load, measured and simulated, for one pair.

    ``per_run``: :attr:`pubsim.calibration.validate.Validation.per_run`.
    """
    fig, ax = plt.subplots(figsize=(6, 4))
    m = per_run[(per_run.broker == broker) & (per_run.config == config)].sort_values("rate_per_s")
    ax.plot(m.rate_per_s, m.measured_egress_per_s, "o", label="measured")
    ax.plot(m.rate_per_s, m.simulated_egress_per_s, "x--", label="simulated")
    ax.set_xlabel("offered load (msg/s)")
    ax.set_ylabel("egress (deliveries/s)")
    ax.set_title(f"{broker}, {config}")
    ax.legend()
    fig.tight_layout()
    return fig
