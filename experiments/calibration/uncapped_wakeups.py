"""Do NATS and the ZeroMQ proxy need more than their quota at light load, or fill it?

Runs one configuration of a campaign file at a few light rates with the
broker uncapped and under the configuration's cap, alternating, and prints
each run's CPU per message, voluntary context switches per message, CPU in
cores and throttled-period fraction. Uncapped CPU above the cap at a rate
means the quota binds there (the wake-ups cost that much); uncapped CPU
below it means the capped broker filled its quota for another reason.
calibration/README.md, "NATS and the ZeroMQ proxy from wire to wire", has
the result.

    .venv/bin/python experiments/calibration/uncapped_wakeups.py experiments/calibration/brokers-wire.yaml \
        nats,zmq-proxy p64-f1 200,1000,4000,16000

Needs the brokers (scripts/install_brokers.sh) and cgroup CPU control (root).
"""

import dataclasses
import sys

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.runner import RealHarness


def main(path, brokers, config, rates):
    camp = load_campaign(path)
    cfg = {c.name: c for c in camp.configurations}[config]
    print("broker     cap    rate/s  us/msg  switches/msg  cores  throttled  p50_us  p99_us")
    with RealHarness(camp) as harness:
        for broker in brokers:
            for rate in rates:
                for cap in (None, cfg.cap_for(broker)):
                    spec = dataclasses.replace(camp.run_spec(broker, cfg, rate, "light"), cpu_cap_fraction=cap)
                    row, _ = harness(spec)
                    cpu = row["demand_s_per_ingress"]
                    print(
                        f"{broker:10s} {cap or 0:4.2f} {rate:9.0f} {cpu * 1e6:7.1f} {row['wakeups_per_ingress']:13.2f}"
                        f" {cpu * row['ingress_rate_per_s']:6.3f} {row.get('cap_throttled_period_fraction', 0):10.2f}"
                        f" {row['latency_p50_s'] * 1e6:7.0f} {row['latency_p99_s'] * 1e6:7.0f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), sys.argv[3], [float(r) for r in sys.argv[4].split(",")])
