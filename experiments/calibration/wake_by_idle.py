"""What does a wake-up cost the broker itself, by how long it idled? (issue 18, wake-up curve)

``--wake-curve`` (calibration/README.md, "A wake-up costs more the longer the broker idled")
takes the shape of a wake-up's cost by idle time from a Python reader's wake-up *latency* on the
broker's core (``idle_exit.wake_idle_s``) and assumes the broker's *CPU* follows it. This
measures the broker's side directly: one configuration of a campaign file, uncapped (no quota
stalls) on its core, at light rates, each run's CPU per message and wake-ups per message from
/proc; before the rates, the machine's reader curve. It fits ``CPU per message = busy + wake-ups
x full x share(idle)`` with the machine's shape (two numbers) and prints, per run, the CPU
beyond the fitted busy cost per wake-up by the mean idle before a wake-up
(:func:`pubsim.calibration.fit.wake_idle_of`) next to what the shape gives: where the two
columns agree the assumed shape holds.

    .venv/bin/python experiments/calibration/wake_by_idle.py experiments/calibration/mosquitto-readers.yaml \
        mosquitto p64-f16 20,50,100,200,350,500,700,1000 [--repeats 2] [--out runs.csv]

Needs the broker (scripts/install_brokers.sh) and root (core pinning).
"""

import argparse
import dataclasses

import numpy as np
import pandas as pd

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.fit import wake_idle_of
from pubsim.calibration.harness.machine import idle_exit_curve
from pubsim.calibration.runner import RealHarness


def measure(path, kind, config, rates, repeats):
    """The machine's reader curve and one row per run (uncapped, rates alternating in order)."""
    camp = load_campaign(path)
    cfg = {c.name: c for c in camp.configurations}[config]
    curve = idle_exit_curve()
    rows = []
    with RealHarness(camp) as harness:
        for rep in range(repeats):
            for rate in rates if rep % 2 == 0 else rates[::-1]:  # alternate the order against drift
                spec = dataclasses.replace(camp.run_spec(kind, cfg, rate, "light"), cpu_cap_fraction=None)
                row, _ = harness(spec)
                rows.append({**row, "rate_per_s": rate})
                print(f"{rate:7.0f}/s  {row['demand_s_per_ingress'] * 1e6:8.1f} us/msg", flush=True)
    return curve, pd.DataFrame(rows)


def compare(curve, runs):
    """Fit ``demand = busy + wakes x full x share(idle)`` with the machine's shape, and print each
    run's CPU beyond the fitted busy cost per wake-up next to what the shape gives."""
    idle_s, wake_s = np.array(curve["idle_s"]), np.maximum.accumulate(curve["wake_idle_s"])
    share = wake_s / wake_s[-1]
    print("machine shape: " + ", ".join(f"{i * 1e3:.3g} ms {s:.2f}" for i, s in zip(idle_s, share)))
    wakes = runs["wakeups_per_ingress"].clip(upper=1.0).to_numpy()
    idle = wake_idle_of(runs, wakes)
    at = np.interp(idle, (0.0, *idle_s), (0.0, *share))
    y = runs["demand_s_per_ingress"].to_numpy()
    (busy, full), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(y), wakes * at]), y, rcond=None)
    out = runs.assign(
        idle_ms=idle * 1e3,
        cpu_us=y * 1e6,
        extra_us=(y - busy) / wakes * 1e6,
        shape_us=full * at * 1e6,
    )
    print(f"fitted busy {busy * 1e6:.1f} us, full wake-up {full * 1e6:.1f} us")
    cols = ["rate_per_s", "wakeups_per_ingress", "idle_ms", "cpu_us", "extra_us", "shape_us", "latency_p50_s"]
    print(out[cols].sort_values("idle_ms").round(3).to_string(index=False))


def main(path, kind, config, rates, repeats, out):
    curve, runs = measure(path, kind, config, rates, repeats)
    if out:
        runs.to_csv(out, index=False)
    compare(curve, runs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign")
    ap.add_argument("broker")
    ap.add_argument("config")
    ap.add_argument("rates", help="comma-separated rates, msg/s")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", help="also write the runs' rows (CSV)")
    a = ap.parse_args()
    main(a.campaign, a.broker, a.config, [float(r) for r in a.rates.split(",")], a.repeats, a.out)
