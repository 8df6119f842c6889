"""Wall time of the §4 interval search, serial and with the refine grid on a process pool.

Runs the full 20-step search (:func:`pubsim.analysis.saturation_search`) on
the ILDM 5-broker chain, placement B with subscription forwarding and with
publication forwarding (experiments/ildm/placement_b_sf.yaml, _pf), re-rating
the 50 ``pub-*`` publishers (the 1 msg/s latency publisher keeps its rate),
serially and with the probes on a local pool of ``--workers`` processes
(the refine grid at once, the doubling phase in speculative brackets of one
interval per worker; one pool for the whole search); prints the wall time of
each and checks that the limits (and the probe tables) agree. On a machine
shared with other jobs the figures are noisy; compare them within one run.
``--forwarding sf`` runs placement B SF only.

    python benchmarks/saturation_benchmark.py [--workers 2] [--duration 1.5] [--warmup 0.5] [--forwarding sf pf]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pubsim.analysis import saturation_search
from pubsim.scenario import parse_scenario, read_yaml
from pubsim.study.executors import LocalExecutor

ROOT = Path(__file__).resolve().parents[1]
ILDM = ROOT / "experiments" / "ildm"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--duration", type=float, default=1.5, help="s per probe")
    ap.add_argument("--warmup", type=float, default=0.5, help="s per probe")
    ap.add_argument("--start", type=float, default=0.5e-3, help="first publish interval, s")
    ap.add_argument("--forwarding", nargs="+", choices=["sf", "pf"], default=["sf", "pf"])
    args = ap.parse_args(argv)
    ok = True
    for path in (ILDM / f"placement_b_{fw}.yaml" for fw in args.forwarding):
        _, data = read_yaml(path)
        scenario = parse_scenario(data, base_dir=path.parent)
        kw = dict(
            rerate="pub-*",
            start_interval_s=args.start,
            duration_s=args.duration,
            warmup_s=args.warmup,
            seed=scenario.seed,
            steps=20,
        )
        results = {}
        for label, executor in (("serial", None), (f"{args.workers} workers", LocalExecutor(args.workers))):
            t = time.perf_counter()
            results[label] = s = saturation_search(scenario, executor=executor, **kw)
            wall = time.perf_counter() - t
            print(
                f"{path.name:22s} {label:10s} {wall:7.1f} s wall  limit {s.limit_per_s:10,.1f} msg/s "
                f"± {s.error_bound_pct:.1f} %  interval {s.interval_s * 1e3:.4g} ms  "
                f"{len(s.probes)} probes  bottleneck {s.bottleneck} ({s.bottleneck_utilization:.0%})"
            )
        a, b = results.values()
        same = a.limit_per_s == b.limit_per_s and a.interval_s == b.interval_s and a.probes.equals(b.probes)
        print(f"{path.name:22s} limits and probe tables agree: {same}")
        ok &= same
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
