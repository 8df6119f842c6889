"""Does being throttled raise Mosquitto's CPU per message, or are costlier runs the throttled ones?

Runs one configuration of a campaign file at the given rates under two CPU caps, one that the
quota throttles near and one it never reaches, alternating the order per round, and prints each
run's CPU per message, CPU over its quota, throttled-period fraction, p99, reads and passes per
message. calibration/README.md, "Throttled below the limit: the broker's speed drifts", has the
result (the cost varies as much where nothing is throttled).

    .venv/bin/python experiments/calibration/cap_cost_ab.py experiments/calibration/mosquitto-wire.yaml \
        p64-f4 4500,5000 0.2,0.35 4

Needs Mosquitto (scripts/install_brokers.sh), cgroup CPU control (root) and perf for the counts.
"""

import dataclasses
import sys

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.runner import RealHarness


def main(path, config, rates, caps, rounds):
    camp = load_campaign(path)
    base = {c.name: c for c in camp.configurations}[config]
    for rnd in range(rounds):
        for cap in caps if rnd % 2 == 0 else caps[::-1]:
            cfg = dataclasses.replace(base, cpu_cap_fraction=cap)
            with RealHarness(camp) as harness:
                for rate in rates:
                    row, _ = harness(camp.run_spec("mosquitto", cfg, rate, "light"))
                    cpu = row["demand_s_per_ingress"]
                    print(
                        f"round {rnd} cap {cap} {rate:.0f}/s: cpu/msg {cpu * 1e6:.1f} us, "
                        f"CPU/quota {cpu * row['ingress_rate_per_s'] / cap:.3f}, "
                        f"throttled {row['cap_throttled_period_fraction']:.3f}, p99 {row['latency_p99_s'] * 1e6:.0f} us, "
                        f"reads/msg {row.get('broker_reads_per_ingress', float('nan')):.2f}, "
                        f"passes/msg {row.get('broker_passes_per_ingress', float('nan')):.3f}",
                        flush=True,
                    )


if __name__ == "__main__":
    floats = lambda text: [float(x) for x in text.split(",")]  # noqa: E731
    main(sys.argv[1], sys.argv[2], floats(sys.argv[3]), floats(sys.argv[4]), int(sys.argv[5]))
