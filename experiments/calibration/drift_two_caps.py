"""Is Mosquitto's speed drift relative to its work or an absolute excess per quota period?

Runs one configuration of a campaign file near its limit under two CPU caps, interleaved per
round, writes one JSON line per run, then fits the drift (pubsim.calibration.drift) on each cap's
runs. A relative drift has the same log-sd at both caps; an absolute excess per period would
show half the log-sd at twice the cap. calibration/README.md, "Throttled below the limit: the
broker's speed drifts", has the result (relative).

    .venv/bin/python experiments/calibration/drift_two_caps.py experiments/calibration/mosquitto-wire.yaml \
        p64-f1 '0.2@11000,12000,13000,14000;0.4@22000,24000,26000,27500' 4 runs.jsonl

Needs Mosquitto (scripts/install_brokers.sh) and cgroup CPU control (root).
"""

import dataclasses
import json
import sys

import pandas as pd

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.drift import SpeedDriftCalibrator
from pubsim.calibration.runner import RealHarness

FIELDS = ("ingress_rate_per_s", "demand_s_per_ingress", "delivery_ratio", "cap_throttled_period_fraction")


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
                    print(rec, flush=True)


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
