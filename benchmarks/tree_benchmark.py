"""Speed of the fast path and the reference driver on the ILDM 5-node chain.

Placement B of SYSTEMS.md §3 (experiments/ildm/placement_b_{pf,sf}.yaml:
5 broker+relay pairs in a chain, every node with 2 publishers and 2
subscribers of each of 5 topics, plus the latency topic), under Publication
and Subscription Flooding. Copies flow both ways between nodes, so relays and
bridge links form a cycle of stations that the fast path advances by
conservative lookahead (one bridge latency + relay cost per round). Prints
published messages per second of wall time for both drivers, measured in the
same run, and their ratio; also the per-hop bridge latency, since the fast
path's cost on such cycles grows with simulated time / lookahead.

    python benchmarks/tree_benchmark.py [--duration 5] [--reference-duration 1] [--bridge-latency 5ms]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from pubsim.scenario import parse_scenario

HERE = Path(__file__).resolve().parent.parent / "experiments" / "ildm"


def scenario(fwd, bridge_latency):
    data = yaml.safe_load((HERE / f"placement_b_{fwd}.yaml").read_text())
    if bridge_latency:
        data["topology"]["bridge"]["latency_s"] = bridge_latency
    return parse_scenario(data, HERE)


def measure(sc, duration, driver):
    t0 = time.perf_counter()
    r = sc.simulate(duration_s=duration, warmup_s=duration * 0.1, driver=driver, record="stream")
    wall = time.perf_counter() - t0
    published = int(r.sink._series["published"].sum())
    s = r.summary()
    return {
        "driver": driver,
        "published": published,
        "wall_s": wall,
        "msgs_per_wall_s": published / wall,
        "latency_mean_ms": s["latency_mean_s"] * 1e3,
        "delivery_ratio": s["delivery_ratio"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="simulated s per fast-path run")
    ap.add_argument("--reference-duration", type=float, default=1.0, help="simulated s per reference run")
    ap.add_argument("--bridge-latency", default=None, help="override the scenarios' bridge latency, e.g. 1ms")
    args = ap.parse_args()
    scenario("sf", args.bridge_latency).simulate(
        duration_s=0.2, warmup_s=0.0
    )  # numba kernels compiled outside the timing
    for fwd in ("pf", "sf"):
        sc = scenario(fwd, args.bridge_latency)
        lat = sc.topology.edges["n0", "n1"]["params"].latency_s
        fast = measure(sc, args.duration, "batch")
        ref = measure(sc, args.reference_duration, "reference")
        for row in (fast, ref):
            print(
                f"placement B {fwd.upper()} bridge {lat * 1e3:g} ms  {row['driver']:>9}: "
                f"{row['published']:>7,} msgs in {row['wall_s']:6.2f} s = {row['msgs_per_wall_s']:>9,.0f} msg/s "
                f"(latency mean {row['latency_mean_ms']:.3f} ms, delivery ratio {row['delivery_ratio']:.3f})"
            )
        print(
            f"placement B {fwd.upper()}: fast path / reference = "
            f"{fast['msgs_per_wall_s'] / ref['msgs_per_wall_s']:.1f}x"
        )


if __name__ == "__main__":
    main()
