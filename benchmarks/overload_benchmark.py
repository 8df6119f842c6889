"""Past the limit: what a campaign measured, the socket buffer fitted on its training split, and
the simulator against the measurements at 1.25 / 2 / 3 x each configuration's measured limit
(calibration/README.md, "Past the limit").

Prints, per configuration, the runs past the limit (offered / limit, ingress, egress within the
window, the broker's CPU, p50, the publishers' largest lag, drops); the fitted
:class:`pubsim.models.params.overload.OverloadParams`; and measured vs simulated egress,
ingress and p50 latency without and with the mechanism.

    python benchmarks/overload_benchmark.py calibration/data/mosquitto-extended [--split holdout]
"""

from __future__ import annotations

import argparse

import pandas as pd

from pubsim.calibration.campaign import read_results
from pubsim.calibration.overload import SocketBufferCalibrator, compare_past_limit, past_limit_runs
from pubsim.calibration.validate import fit_profiles

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)


def measured_table(runs, saturation):
    """Every run offered more than its configuration's measured limit, normalised by the limit."""
    m = runs.merge(saturation[["broker", "config", "limit_rate_per_s"]], on=["broker", "config"])
    m = m[m["offered_per_s"] > m["limit_rate_per_s"] * 1.1].copy()
    lim = m["limit_rate_per_s"]
    return pd.DataFrame(
        {
            "config": m["config"],
            "split": m["split"],
            "offered/limit": m["offered_per_s"] / lim,
            "ingress/limit": m["ingress_rate_per_s"] / lim,
            "egress/limit": m["egress_received_per_s"] / m["fanout"] / lim,
            "cpu_cores": m["broker_utilization"],
            "cpu_us_per_msg": 1e6 * m["demand_s_per_ingress"],
            "p50_s": m["latency_p50_s"],
            "p99_s": m["latency_p99_s"],
            "lag_s": m["publisher_lag_max_s"],
            "dropped": m.get("broker_dropped"),
        }
    ).sort_values(["config", "offered/limit"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", help="a finished campaign directory (runs.csv, saturation.csv, ...)")
    ap.add_argument("--split", default="holdout", help="the split compared (the fit uses 'train')")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    runs, saturation, _, meta = read_results(args.campaign)
    print("== measured past the limit (rates over the measured limit; egress = copies / fan-out) ==")
    print(measured_table(runs, saturation).round(3).to_string(index=False))

    train = runs[runs["split"] == "train"]
    cal = SocketBufferCalibrator().fit(train)
    overload = cal.overload_params(reference=f"{args.campaign}/runs.csv (split=train)", date=meta.get("date", ""))
    print(f"\n== socket buffer fitted on the training split: {cal.params_} ==")
    used = cal.blocked(train).assign(residual_messages=cal.residuals_)
    print(used[["config", "offered_per_s", "publisher_lag_max_s", "latency_p50_s", "residual_messages"]].round(3))

    profiles = fit_profiles(runs, meta)
    for kind, profile in profiles.items():
        rows = past_limit_runs(runs[(runs["broker"] == kind) & (runs["split"] == args.split)], saturation)
        table = compare_past_limit(rows, profile, overload, seed=args.seed)
        print(f"\n== {kind}, split {args.split}: measured vs simulated at 1.25 / 2 / 3 x the measured limit ==")
        print(table.drop(columns=["split"]).round(3).to_string(index=False))
        for what in ("egress", "ingress", "p50"):
            for tag in ("plain", "overload"):
                err = table[f"{what}_error_{tag}_pct"]
                print(f"{what} error {tag}: median {err.median():+.1f} %, range {err.min():+.1f} .. {err.max():+.1f} %")


if __name__ == "__main__":
    main()
