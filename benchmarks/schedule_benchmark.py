"""Speed of reading a schedule publisher (a replayed trace, a calibration twin's run).

``PublisherParams(arrival="schedule", ...)`` checks every send time and size.
Numbers are checked as whole arrays (:func:`pubsim.sim.units.parse_durations_s`,
:func:`pubsim.sim.units.parse_sizes_bytes`); the item-by-item reader they fall
back to for text is timed beside them on the same lists, in the same run.

    python benchmarks/schedule_benchmark.py [--entries 1000000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pubsim import PublisherParams
from pubsim.sim.units import parse_duration_s, parse_size_bytes


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    n = args.entries
    rng = np.random.default_rng(0)
    times = np.cumsum(rng.exponential(1e-4, n))
    sizes = rng.integers(16, 4096, n)
    topics = ("t",) * n

    def arrays():
        PublisherParams(
            topics=("t",), arrival="schedule", schedule_time_s=times, schedule_size_bytes=sizes, schedule_topic=topics
        )

    def items():
        [parse_duration_s(v, f"schedule_time_s[{i}]") for i, v in enumerate(times.tolist())]
        [parse_size_bytes(v, f"schedule_size_bytes[{i}]") for i, v in enumerate(sizes.tolist())]

    fast = _timed(arrays)
    slow = _timed(items)
    print(f"{n:,} entries: PublisherParams {fast:.3f} s ({n / fast:,.0f} entries/s)")
    print(f"item by item (times and sizes only) {slow:.3f} s ({n / slow:,.0f} entries/s): {slow / fast:.0f} x slower")


if __name__ == "__main__":
    main()
