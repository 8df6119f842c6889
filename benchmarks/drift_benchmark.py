"""The speed drift's cost in the kernel: a capped broker with Mosquitto's passes at 85 % of its
quota, simulated with a constant speed and with the drift fitted on data/mosquitto-wire
(log-sd 0.067, 3 s); prints wall time per run, ns per message and the ratio,
and the throttled fraction and p99 each gives.

    python benchmarks/drift_benchmark.py [--duration 20] [--repeat 3] [--drivers batch,reference]
"""

from __future__ import annotations

import argparse
import time

from pubsim.calibration.virtual import result_row
from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant


def star(drift):
    broker = BrokerParams(
        ingress_cost_s=Constant(value=9e-6),
        delivery_cost_s=Constant(value=2e-6),
        overflow="backpressure",
        io=IoParams(cycle_cost_s=2.5e-6, cycle_max_per_connection=1),
        cpu_fraction=0.2,
        cpu_period_s=0.01,
        **({"speed_drift_log_sd": 0.067, "speed_drift_time_s": 3.0} if drift else {}),
    )
    pubs = {f"p{i}": PublisherParams(topics=(f"t/{i}",), rate_per_s=3400.0) for i in range(4)}
    subs = {"s": SubscriberParams(subscriptions=("t/#",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=3e-5))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--drivers", default="batch", help="comma-separated: batch, reference (slow)")
    args = ap.parse_args()
    for driver in args.drivers.split(","):
        times = {}
        for drift in (False, True):
            g = star(drift)
            simulate(g, duration_s=0.2, seed=0, driver=driver)  # compile
            best = float("inf")
            for r in range(args.repeat):
                t0 = time.perf_counter()
                res = simulate(g, duration_s=args.duration, warmup_s=0.5, seed=r, driver=driver)
                best = min(best, time.perf_counter() - t0)
            row = result_row(res)
            n = res.summary()["ingress_per_s"] * args.duration
            times[drift] = best
            print(
                f"{driver:9s} drift={drift!s:5s}: {best:.3f} s per run, {1e9 * best / n:.0f} ns per message, "
                f"throttled {row['cap_throttled_period_fraction']:.3f}, p99 {row['latency_p99_s'] * 1e6:.0f} us"
            )
        print(f"{driver:9s} drift / constant time ratio {times[True] / times[False]:.3f}")


if __name__ == "__main__":
    main()
