"""Is Mosquitto's once-a-second ``$SYS`` update what throttles a capped broker below its limit?

Runs configurations of a campaign file near their limits with the harness's
``sys_interval 1`` and with ``$SYS`` off (``sys_interval 0``), alternating the
order per round, and prints each run's CPU per message, CPU over its quota,
throttled-period fraction and latency. calibration/README.md, "Throttled
below the limit: the broker's speed drifts", has the result (it is not).

    .venv/bin/python experiments/calibration/sys_interval_ab.py experiments/calibration/mosquitto-wire.yaml \
        'p64-f4@4000,5000,5333;p256-f2-holdout@9066,9411' 2

Needs Mosquitto (scripts/install_brokers.sh) and cgroup CPU control (root).
"""

import sys

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.runner import RealHarness


def plan(text):
    """``'cfg@r1,r2;cfg2@r3'`` -> [(cfg, [r1, r2]), (cfg2, [r3])]."""
    out = []
    for part in text.split(";"):
        name, rates = part.split("@")
        out.append((name, [float(r) for r in rates.split(",")]))
    return out


def main(path, what, rounds):
    camp = load_campaign(path)
    configs = {c.name: c for c in camp.configurations}
    for rnd in range(rounds):
        for interval in (1, 0) if rnd % 2 == 0 else (0, 1):
            with RealHarness(camp, broker_options={"sys_interval": interval}) as harness:
                for name, rates in plan(what):
                    cap = configs[name].cap_for("mosquitto")
                    for rate in rates:
                        row, _ = harness(camp.run_spec("mosquitto", configs[name], rate, "light"))
                        cpu = row["demand_s_per_ingress"]
                        print(
                            f"round {rnd} sys_interval {interval} {name} {rate:.0f}/s: cpu/msg {cpu * 1e6:.1f} us, "
                            f"CPU/quota {cpu * row['ingress_rate_per_s'] / cap:.3f}, "
                            f"throttled {row['cap_throttled_period_fraction']:.3f}, "
                            f"p50 {row['latency_p50_s'] * 1e6:.0f} us, p99 {row['latency_p99_s'] * 1e6:.0f} us",
                            flush=True,
                        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2)
