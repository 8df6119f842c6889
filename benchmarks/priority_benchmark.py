"""Speed of priority channels (event-driven queues) against the FIFO fast path.

One load, several runs: 3 Poisson publishers (priorities 0, 1, 2; 1000-byte
messages) -> one broker (exponential service, mean 20 us) -> fan-out 4 over
links of 1 MB/s (1 ms per message) loaded to ``--load`` (0.9; 1.2 overloads
them), with a 100-message transmit queue. The runs differ only in the links'
queue:

* ``fifo drop_newest``: FIFO links, drop-tail; runs by arithmetic in the
  numba kernels (:mod:`pubsim.sim.kernels`), the reference speed;
* ``fifo <overflow>``: FIFO links with the chosen policy, when that policy is
  event-driven (``ring``, ``drop_oldest``, ``update``): the event-driven
  queue with one priority level;
* ``priority <overflow>``: priority channels, the event-driven
  :class:`pubsim.sim.disciplines.QueueDiscipline`.

The priority run is repeated with the reference driver (SimPy, one event
per hop: ``driver="reference"``) on ``--reference-messages`` publications, so
both speeds come from the same run of the script.

Each run is a fresh process (so its peak RSS is its own) that compiles or
loads the numba kernels on a short run before the timed one; the RSS peak
before the timed run is printed too (imports and kernels: it depends on the
environment, so compare the growth across environments). Prints published
messages per second of wall time, peak RSS and the ratio of the FIFO fast path
to priority channels (one run each; no assertion: the machine may be shared).

    python benchmarks/priority_benchmark.py [--messages 200000] [--overflow ring] [--load 1.2]
        [--reference-messages 2000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import time
from concurrent.futures import ProcessPoolExecutor

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.disciplines import Overflow
from pubsim.sim.distributions import Constant, Exponential

TX_S, FANOUT = 1e-3, 4


def star(scheduling, overflow, load):
    rate = load / TX_S / 3
    pubs = {
        f"p{k}": PublisherParams(topics=(f"b/{k}",), rate_per_s=rate, priority=k, size_bytes=Constant(value=1000))
        for k in range(3)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("b/#",)) for i in range(FANOUT)}
    down = LinkParams(latency_s=1e-4, bandwidth_Bps=1e6, queue_messages=100, scheduling=scheduling, overflow=overflow)
    links = {**{p: LinkParams() for p in pubs}, **{s: down for s in subs}}
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=20e-6))
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=links, protocol="none")


def measure(scheduling, overflow, load, messages, driver="batch"):
    """One timed run (in a fresh process) with ``driver``; returns its figures."""
    simulate(star(scheduling, overflow, load), duration_s=0.2, seed=0)  # compile/load the kernels first
    duration = messages * TX_S / load
    g = star(scheduling, overflow, load)
    warm_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(g, duration_s=duration, warmup_s=duration * 0.05, seed=1, driver=driver, record="stream")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = r.summary()
    published = int(round((r.throughput_series()["published_per_s"] * r.sink.series_bin_s).sum()))
    return {
        "driver": driver,
        "scheduling": scheduling,
        "overflow": overflow,
        "published": published,
        "wall_s": wall,
        "msgs_per_wall_s": published / wall,
        "cpu_s": cpu,
        "latency_mean_ms": s["latency_mean_s"] * 1e3,
        "loss_rate": s["loss_rate"],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "warm_rss_mib": warm_rss,
    }


def run_fresh(*args):
    """:func:`measure` in a new process, one at a time (the timings do not share the cores)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(measure, *args).result()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000, help="published messages per run")
    ap.add_argument("--overflow", default="drop_newest", help="links' overflow policy (not backpressure)")
    ap.add_argument("--load", type=float, default=0.9, help="offered load of each downlink (1.2: overloaded)")
    ap.add_argument("--reference-messages", type=int, default=2_000, help="published messages of the reference run")
    args = ap.parse_args()
    runs = [("fifo", Overflow.DROP_NEWEST)]
    if args.overflow in Overflow.EVENT_DRIVEN:
        runs.append(("fifo", args.overflow))
    runs.append(("priority", args.overflow))
    rows = [run_fresh(s, o, args.load, args.messages) for s, o in runs]
    ref = run_fresh("priority", args.overflow, args.load, args.reference_messages, "reference")
    print(f"load {args.load:.0%} of each downlink, {FANOUT} deliveries per message")
    for r in rows + [ref]:
        print(
            f"{r['driver']:>9}: {r['scheduling']:>8} links ({r['overflow']}): {r['published']:,} published in "
            f"{r['wall_s']:.2f} s wall = {r['msgs_per_wall_s']:,.0f} msg/s ({r['cpu_s']:.2f} s CPU); "
            f"mean latency {r['latency_mean_ms']:.3f} ms, loss {r['loss_rate']:.4%}, "
            f"peak RSS {r['peak_rss_mib']:,.0f} MiB ({r['warm_rss_mib']:,.0f} MiB before the timed run)"
        )
    ratio = rows[0]["msgs_per_wall_s"] / rows[-1]["msgs_per_wall_s"]
    print(f"FIFO fast path (drop_newest) / priority channels ({args.overflow}): {ratio:.2f}x")
    speedup = rows[-1]["msgs_per_wall_s"] / ref["msgs_per_wall_s"]
    print(f"priority channels ({args.overflow}), fast path / reference driver: {speedup:,.0f}x")


if __name__ == "__main__":
    main()
