"""Speed of the closed loop (request/reply) in the batch driver and the reference driver.

The fast path runs these networks in one compiled event loop
(:mod:`pubsim.sim.closed_kernel`); the batch driver's conservative rounds
(``closed_loop="rounds"``, what runs closed loops outside the compiled
class) cost one Python round per round-trip lookahead. Prints requests
(published messages) per second of wall time for a few windows: the fast
path over ``--duration`` simulated seconds, the rounds over
``--rounds-duration`` and the reference driver (SimPy, one event per hop)
over ``--reference-duration``, in the same run, with each run's CPU time;
peak RSS of the script at the end.

    python benchmarks/patterns_benchmark.py [--duration 10] [--rounds-duration 1] [--reference-duration 0.05]
"""

from __future__ import annotations

import argparse
import resource
import time

from pubsim.models.mechanisms.patterns.reqrep import request_reply
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Exponential

CASES = ((1, 1), (1, 16), (4, 16), (16, 64))  # (clients, window)


def graph(clients, window):
    """A server (exponential, mean 10 us) with ``clients`` closed-loop clients of window ``window`` over 1 ms links."""
    return request_reply(
        server=BrokerParams(ingress_cost_s=Exponential(mean_value=1e-5)),
        link=LinkParams(latency_s=1e-3),
        clients={
            f"c{i}": PublisherParams(topics=("x",), arrival="closed_loop", window_requests=window)
            for i in range(clients)
        },
    )


def measure(clients, window, duration_s, driver):
    """One timed run (``driver``: batch, rounds or reference); prints its row, returns requests/s of wall time."""
    g = graph(clients, window)
    options = {"closed_loop": "rounds"} if driver == "rounds" else None
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(
        g, duration_s=duration_s, seed=1, driver="reference" if driver == "reference" else "batch",
        batch_options=options, record="stream",
    )  # fmt: skip
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = r.summary()["published"]
    print(
        f"{driver:>9} {clients:3d} clients x W={window:3d}: {n:9,.0f} requests in {duration_s:g} s simulated, "
        f"{wall:6.2f} s wall ({cpu:6.2f} s CPU), {n / wall:10,.0f} requests/s of wall time"
    )
    return n / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds per fast-path run")
    ap.add_argument("--rounds-duration", type=float, default=1.0, help="simulated seconds per run in rounds")
    ap.add_argument("--reference-duration", type=float, default=0.05, help="simulated seconds per reference run")
    args = ap.parse_args()
    simulate(graph(2, 2), duration_s=0.05, seed=0)  # compile numba kernels outside the timing
    for clients, window in CASES:
        fast = measure(clients, window, args.duration, "batch")
        rounds = measure(clients, window, args.rounds_duration, "rounds")
        ref = measure(clients, window, args.reference_duration, "reference")
        print(f"{'':>9} fast path / rounds: {fast / rounds:,.1f}x; fast path / reference driver: {fast / ref:,.1f}x")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
