"""Speed of priority channels (event-driven queues) against the FIFO fast path.

One load, two runs: 3 Poisson publishers (priorities 0, 1, 2; 1000-byte
messages) -> one broker (exponential service, mean 20 us) -> fan-out 4 over
links of 1 MB/s (1 ms per message) loaded to 90 %, with a 100-message
transmit queue. The only difference is the links' ``scheduling``: ``fifo``
runs by arithmetic in the numba kernels; ``priority`` runs every link
through the event-driven :class:`pubsim.sim.disciplines.QueueDiscipline`. Prints
published messages per second of wall time for both and their ratio (one
run each; no assertion: the machine may be shared).

    python benchmarks/priority_benchmark.py [--messages 200000] [--overflow drop_newest]
"""

from __future__ import annotations

import argparse
import time

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant, Exponential

LOAD, TX_S, FANOUT = 0.9, 1e-3, 4


def star(scheduling, overflow):
    rate = LOAD / TX_S / 3
    pubs = {
        f"p{k}": PublisherParams(topics=(f"b/{k}",), rate_per_s=rate, priority=k, size_bytes=Constant(value=1000))
        for k in range(3)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("b/#",)) for i in range(FANOUT)}
    down = LinkParams(latency_s=1e-4, bandwidth_Bps=1e6, queue_messages=100, scheduling=scheduling, overflow=overflow)
    links = {**{p: LinkParams() for p in pubs}, **{s: down for s in subs}}
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=20e-6))
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=links, protocol="none")


def measure(scheduling, overflow, messages):
    duration = messages * TX_S / LOAD
    g = star(scheduling, overflow)
    t0 = time.perf_counter()
    r = simulate(g, duration_s=duration, warmup_s=duration * 0.05, seed=1, record="stream")
    wall = time.perf_counter() - t0
    s = r.summary()
    published = int(r.sink._series["published"].sum())
    return {
        "scheduling": scheduling,
        "overflow": overflow,
        "published": published,
        "wall_s": wall,
        "msgs_per_wall_s": published / wall,
        "latency_mean_ms": s["latency_mean_s"] * 1e3,
        "loss_rate": s["loss_rate"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000, help="published messages per run")
    ap.add_argument("--overflow", default="drop_newest", help="links' overflow policy (not backpressure)")
    args = ap.parse_args()
    simulate(star("fifo", args.overflow), duration_s=0.2, seed=0)  # compile numba kernels outside the timing
    rows = [measure(s, args.overflow, args.messages) for s in ("fifo", "priority")]
    for r in rows:
        print(
            f"{r['scheduling']:>8} links ({r['overflow']}): {r['published']:,} published in "
            f"{r['wall_s']:.2f} s wall = {r['msgs_per_wall_s']:,.0f} msg/s; "
            f"mean latency {r['latency_mean_ms']:.3f} ms, loss {r['loss_rate']:.4%}"
        )
    ratio = rows[0]["msgs_per_wall_s"] / rows[1]["msgs_per_wall_s"]
    print(f"FIFO fast path / priority channels: {ratio:.1f}x (deliveries per message: {FANOUT})")


if __name__ == "__main__":
    main()
