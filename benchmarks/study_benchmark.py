"""Wall time of a study on each executor, and the overhead of the study layer.

Runs the example study (experiments/studies/load_sweep.yaml, 8 points x 2
replications) serially, on a local process pool and on a Dask local cluster,
each into a fresh directory, checks that the three give identical summary
tables, and prints tasks per second of wall time. Also prints the time of
the same tasks run directly with ``Scenario.simulate`` (no tables, no files),
so the cost of the study layer (tables, Parquet writes) shows. On a machine
shared with other jobs the figures are noisy; compare executors in one run.

    python benchmarks/study_benchmark.py [--workers 2] [--study FILE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from pubsim.scenario import parse_scenario
from pubsim.study import load_study, run_study

ROOT = Path(__file__).resolve().parents[1]


def _direct(study):
    """Seconds to simulate every task in process, without the study layer."""
    t = time.perf_counter()
    for point in study.points:
        scenario = parse_scenario(study.raw(point), study.base_dir)
        for r in range(study.replications):
            scenario.simulate(r).summary()
    return time.perf_counter() - t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--study", default=str(ROOT / "experiments" / "studies" / "load_sweep.yaml"))
    args = parser.parse_args(argv)
    study = load_study(args.study)
    n = len(study.points) * study.replications
    _direct(study)  # compile the kernels once, so the first executor is not charged for it
    print(f"{study.name}: {len(study.points)} points x {study.replications} replications = {n} tasks")
    print(f"  direct simulate (no study layer): {_direct(study):6.2f} s")
    tables = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, kw in (
            ("serial", {"executor": "serial"}),
            (f"process pool ({args.workers})", {"executor": "local", "workers": args.workers}),
            (f"Dask local ({args.workers})", {"dask_address": "local", "workers": args.workers}),
        ):
            t = time.perf_counter()
            tables[label] = run_study(study, Path(tmp) / label.split()[0], progress=False, **kw)
            wall = time.perf_counter() - t
            print(f"  {label:<28}{wall:6.2f} s  {n / wall:6.2f} tasks/s")
    first = next(iter(tables.values()))
    for df in tables.values():
        pd.testing.assert_frame_equal(first, df, check_exact=True)
    print("  summary tables identical on every executor")


if __name__ == "__main__":
    main()
