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
``--forwarding sf`` runs placement B SF only. ``--cycles`` picks how the
chain's cycle runs (``compiled``, the default since issue 12's compiled
cycle, or ``optimistic``, the path before it); ``--refine full`` measures
the whole 19-point refine grid as §4 says, ``upward`` measures it from the
bottom until the first sustainable point (``stop_at_first_success``: the
same limit, error and bottleneck, each probe at its full-search seed); the
runs' limits, bottlenecks and probe rows are checked against the first.
Prints wall time and the CPU time of this process (a pool's workers are not
counted: compare the serial runs' CPU).

Measured on the shared 2-core machine, 25 Nov 2026, load 8-19 (wall times
are 4-10x the CPU times; the CPU time is about the wall time of an idle
machine), placement B SF, 21 probes of 1.5 s with 0.5 s warm-up:

* before (optimistic solver, dense windows in conservative rounds), serial
  full grid: 453.9 s wall, 68.2 s CPU; limit 58,823.5 msg/s ± 2.9 %
  (0.85 ms), bottleneck relay:n1 (100 %);
* compiled cycle (first version: one heap of copies in flight), serial
  full grid: 12.5 s CPU (108.8 s wall under the load), the same limit,
  error and bottleneck; with 2 workers the same result and probe table;
  ``upward``: 16 probes, 8.1 s CPU serial, the same limit, error,
  bottleneck and probe rows. Placement B PF: full 11.4 s CPU, upward
  9.2 s CPU, limit 58,823.5 msg/s ± 2.9 %, bottleneck relay:n1.
* compiled cycle as committed (per-member queues, statistics tallied in
  the loop), at load 16-19: full grid serial 11.1 s CPU (280.5 s wall),
  2 workers 255.7 s wall, upward serial 16 probes 8.9 s CPU (161.5 s wall);
  all with limit 58,823.5 msg/s ± 2.9 %, bottleneck relay:n1 (100 %) and
  the serial full grid's probe rows.

On an idle 2-core machine the serial CPU times stand for the serial wall
times (about 11 s full, 9 s upward), so 2 workers should bring the full
grid to about 6 s and ``upward`` to about 5 s; not shown here, the machine
was never idle. Per probe (one process, CPU): 0.36 s at the limit (0.85 ms),
0.71 s at twice its load (0.5 ms: the drained backlog), of which the
compiled loop 0.13-0.21 s, the brokers, downlinks and subscribers about
0.1 s, the network build 0.03-0.06 s.

    python benchmarks/saturation_benchmark.py [--workers 2] [--duration 1.5] [--warmup 0.5] [--forwarding sf pf]
        [--cycles compiled optimistic] [--refine full upward] [--modes serial workers]
"""

from __future__ import annotations

import argparse
import resource
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
    ap.add_argument(
        "--cycles",
        nargs="+",
        choices=["compiled", "optimistic"],
        default=["compiled"],
        help="how the chain's cycle runs (optimistic: the path before the compiled loop)",
    )
    ap.add_argument("--modes", nargs="+", choices=["serial", "workers"], default=["serial", "workers"])
    ap.add_argument(
        "--refine",
        nargs="+",
        choices=["full", "upward"],
        default=["full", "upward"],
        help="measure the whole refine grid, or from below until the first sustainable point",
    )
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
        modes = {"serial": None, "workers": LocalExecutor(args.workers)}
        runs = [(c, r, m) for c in args.cycles for r in args.refine for m in args.modes]
        for cycles, refine, mode in runs:
            label = f"{cycles} {refine} {mode if mode == 'serial' else f'{args.workers} workers'}"
            t, cpu = time.perf_counter(), _cpu_s()
            results[label] = s = saturation_search(
                scenario,
                executor=modes[mode],
                batch_options={"cycles": cycles},
                stop_at_first_success=refine == "upward",
                **kw,
            )
            wall, cpu = time.perf_counter() - t, _cpu_s() - cpu
            print(
                f"{path.name:22s} {label:30s} {wall:7.1f} s wall {cpu:7.1f} s CPU  limit "
                f"{s.limit_per_s:10,.1f} msg/s ± {s.error_bound_pct:.1f} %  interval {s.interval_s * 1e3:.4g} ms  "
                f"{len(s.probes)} probes  bottleneck {s.bottleneck} ({s.bottleneck_utilization:.0%})",
                flush=True,
            )
        ok &= _agree(path.name, results)
    return 0 if ok else 1


def _agree(name, results):
    """Limit, error, bottleneck equal across runs; probe rows equal to the first run's at the same intervals."""
    first_label, first = next(iter(results.items()))
    ref = first.probes.set_index("interval_s")
    ok = True
    for label, b in list(results.items())[1:]:
        rows = b.probes.set_index("interval_s")
        same = (
            (first.limit_per_s, first.error_bound_pct, first.bottleneck, first.bottleneck_utilization)
            == (b.limit_per_s, b.error_bound_pct, b.bottleneck, b.bottleneck_utilization)
            and rows.index.isin(ref.index).all()
            and rows.equals(ref.loc[rows.index])
        )
        print(f"{name:22s} {label} agrees with {first_label} (limit, error, bottleneck, probe rows): {same}")
        ok &= same
    return ok


def _cpu_s():
    """CPU seconds of this process (a pool's workers are forkserver children: not counted)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


if __name__ == "__main__":
    raise SystemExit(main())
