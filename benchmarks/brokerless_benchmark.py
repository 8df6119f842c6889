"""Speed of brokerless ZeroMQ PUB/SUB on the fast path and the reference driver.

10 publishers x 20 subscribers, direct PUB/SUB (models.mechanisms.brokerless.socket): each
publisher's socket (zmq-pub preset: sender-side fan-out, batching) copies
every message into the pipes of the 20 subscribers (all subscribe to the
prefix "bench/"), loopback links. Prints published messages and delivered
copies per second of wall time for both drivers, and their speed ratio.

    python benchmarks/brokerless_benchmark.py [--messages 300000] [--reference-messages 5000]
"""

from __future__ import annotations

import argparse
import time

from pubsim.models import presets
from pubsim.models import topology as T
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.models.params.zmq import ZmqSocketParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant

N_PUB, N_SUB = 10, 20
RATE_PER_PUB = 10_000.0


def topology():
    sock = from_mapping(ZmqSocketParams, presets.apply("socket", {"preset": "zmq-pub"}), "socket")
    link = from_mapping(LinkParams, presets.apply("link", {"preset": "loopback-zmq-proxy"}), "link")
    pubs = {
        f"p{i}": PublisherParams(topics=(f"bench/{i}",), rate_per_s=RATE_PER_PUB, size_bytes=Constant(value=36))
        for i in range(N_PUB)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("bench/",)) for i in range(N_SUB)}
    return T.brokerless(publishers=pubs, subscribers=subs, socket=sock, link=link)


def measure(graph, messages, driver):
    duration = messages / (N_PUB * RATE_PER_PUB)
    t0 = time.perf_counter()
    r = simulate(graph, duration_s=duration, seed=1, driver=driver, record="stream")
    wall = time.perf_counter() - t0
    s = r.summary()
    return {
        "driver": driver,
        "published": s["published"],
        "delivered": s["delivered"],
        "wall_s": wall,
        "msgs_per_wall_s": s["published"] / wall,
        "copies_per_wall_s": s["delivered"] / wall,
        "latency_mean_us": s["latency_mean_s"] * 1e6,
        "loss_rate": s["loss_rate"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300_000, help="published messages, fast path")
    ap.add_argument("--reference-messages", type=int, default=5_000, help="published messages, reference")
    args = ap.parse_args()
    g = topology()
    simulate(g, duration_s=0.01, seed=0)  # compile numba kernels outside the timing
    rows = [measure(g, args.messages, "batch"), measure(g, args.reference_messages, "reference")]
    print(
        f"brokerless ZeroMQ PUB/SUB, {N_PUB} publishers x {N_SUB} subscribers, "
        f"{N_PUB * RATE_PER_PUB:,.0f} msg/s offered (simulated)"
    )
    print(
        f"{'driver':<10} {'published':>10} {'copies':>11} {'wall s':>8} {'msg/wall s':>12} "
        f"{'copies/wall s':>14} {'mean lat us':>12} {'loss':>7}"
    )
    for r in rows:
        print(
            f"{r['driver']:<10} {r['published']:>10,} {r['delivered']:>11,} {r['wall_s']:>8.2f} "
            f"{r['msgs_per_wall_s']:>12,.0f} {r['copies_per_wall_s']:>14,.0f} {r['latency_mean_us']:>12.1f} "
            f"{r['loss_rate']:>7.2%}"
        )
    print(f"fast path / reference speed: {rows[0]['msgs_per_wall_s'] / rows[1]['msgs_per_wall_s']:.0f}x")


if __name__ == "__main__":
    main()
