"""Mosquitto's CPU per message and throttled periods under several CPU caps, interleaved.

Runs one configuration of a campaign file at each cap's rates, the caps alternating in order
per round, prints and writes one JSON line per run (CPU per message, CPU over its quota,
throttled-period fraction, p99, reads and passes per message), then fits the speed drift
(pubsim.calibration.drift) on each cap's runs. calibration/README.md, "Throttled below the
limit: the broker's speed drifts", has two uses and their results:

- is the drift relative to the work or an absolute excess per quota period? A relative drift
  has the same log-sd at both caps, an absolute one half at twice the cap (relative):

      .venv/bin/python experiments/calibration/drift_two_caps.py experiments/calibration/mosquitto-wire.yaml \
          p64-f1 '0.2@11000,12000,13000,14000;0.4@22000,24000,26000,27500' 4 runs.jsonl

- does being throttled raise the cost, or are the costlier runs the throttled ones? The same
  rates under a cap that throttles and one never reached (the cost varies as much at both):

      .venv/bin/python experiments/calibration/drift_two_caps.py experiments/calibration/mosquitto-wire.yaml \
          p64-f4 '0.2@4500,5000;0.35@4500,5000' 4 ab.jsonl

Needs Mosquitto (scripts/install_brokers.sh) and cgroup CPU control (root).
"""

import dataclasses
import json
import sys

import pandas as pd

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.drift import SpeedDriftCalibrator
from pubsim.calibration.runner import RealHarness

FIELDS = (
    "ingress_rate_per_s",
    "demand_s_per_ingress",
    "delivery_ratio",
    "cap_throttled_period_fraction",
    "latency_p99_s",
    "broker_reads_per_ingress",
    "broker_passes_per_ingress",
)


def plan(text):
    """``'0.2@r1,r2;0.4@r3'`` -> {0.2: [r1, r2], 0.4: [r3]}."""
    return {float(c): [float(r) for r in rates.split(",")] for c, rates in (p.split("@") for p in text.split(";"))}


def measure(camp, config, caps, rounds, out):
    base = {c.name: c for c in camp.configurations}[config]
    order = list(caps)
    for rnd in range(rounds):
        for cap in order if rnd % 2 == 0 else order[::-1]:
            with RealHarness(camp) as harness:
                for rate in caps[cap]:
                    spec = camp.run_spec("mosquitto", dataclasses.replace(base, cpu_cap_fraction=cap), rate, "light")
                    row, _ = harness(spec)
                    rec = {k: row.get(k) for k in FIELDS}
                    rec.update(
                        rate_per_s=rate,
                        config=f"{config}-cap{cap:g}",
                        cpu_cap_fraction=cap,
                        duration_s=camp.duration_s,
                        round=rnd,
                        sustainable=bool(row["delivery_ratio"] >= 0.99),
                    )
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    print(line(rec), flush=True)


def line(rec):
    """One run, as printed."""
    cpu, nan = rec["demand_s_per_ingress"], float("nan")
    return (
        f"round {rec['round']} cap {rec['cpu_cap_fraction']:g} {rec['rate_per_s']:.0f}/s: cpu/msg {cpu * 1e6:.1f} us, "
        f"CPU/quota {cpu * rec['ingress_rate_per_s'] / rec['cpu_cap_fraction']:.3f}, "
        f"throttled {rec['cap_throttled_period_fraction']:.3f}, p99 {rec['latency_p99_s'] * 1e6:.0f} us, "
        f"reads/msg {rec['broker_reads_per_ingress'] or nan:.2f}, passes/msg {rec['broker_passes_per_ingress'] or nan:.3f}"
    )


def main(path, config, what, rounds, jsonl):
    camp = load_campaign(path)
    with open(jsonl, "a") as out:
        measure(camp, config, plan(what), rounds, out)
    runs = pd.read_json(jsonl, lines=True)
    for cap, rows in runs.groupby("cpu_cap_fraction"):
        fit = SpeedDriftCalibrator().fit(rows)
        print(f"cap {cap:g}: {len(rows)} runs, {fit.params_}, 95 % intervals {fit.intervals_}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
