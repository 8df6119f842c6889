"""Speed of the QoS paths: the same star at QoS 0, QoS 1 and QoS 2 on a lossy link.

100 Poisson publishers -> one broker (exponential service, mean 0.1 ms) ->
fan-out 10 over links of 12.5 MB/s, 1 ms propagation, 0.1 % loss; QoS > 0
hops use Mosquitto's default window of 20 and resend after 0.1 s. Prints
published messages per second of wall time (fast path), resends, duplicates
and mean latency per QoS level. Expect QoS 2 to queue: its handshake holds a
window slot about 4.2 ms (PUBLISH, PUBREC, PUBREL, PUBCOMP over 1 ms links),
so 20 slots carry at most about 4.8k msg/s per subscriber, under the 5k
offered (sim.theory.window_throughput_per_s).

Each QoS level runs with the fast path on ``--messages`` publications and with
the reference driver (SimPy, one event per hop) on ``--reference-messages``,
in the same run; peak RSS of the whole script at the end. ``cpu_s`` is the
process's CPU time of the run (on a shared machine wall time also counts
the waits for a core).

    python benchmarks/qos_benchmark.py [--messages 300000] [--reference-messages 1000]
"""

from __future__ import annotations

import argparse
import resource
import time

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant, Exponential

RATE_PER_S = 5000.0
N_PUB, FANOUT = 100, 10


def star(qos):
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=1e-4), retry_timeout_s=0.1, ack_cost_s=1e-6)
    pubs = {
        f"p{i}": PublisherParams(
            topics=("bench/t",),
            rate_per_s=RATE_PER_S / N_PUB,
            qos=qos,
            retry_timeout_s=0.1,
            size_bytes=Constant(value=200),
        )
        for i in range(N_PUB)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("bench/t",), qos=qos) for i in range(FANOUT)}
    link = LinkParams(latency_s=1e-3, bandwidth_Bps=12.5e6, loss_probability=0.001)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


def measure(qos, messages, driver):
    """One timed run of the star at ``qos`` with ``driver``; prints its row, returns msg/s of wall time."""
    duration = messages / RATE_PER_S
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(
        star(qos), duration_s=duration, warmup_s=min(1.0, duration / 10), seed=1, driver=driver, record="stream"
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = r.summary()
    st = r.stations()
    resent = int(st["resent_packets"].sum()) if "resent_packets" in st else 0
    published = int(r.sink._series["published"].sum())
    print(
        f"{driver:>9} {qos:>3} {published:>10,} {wall:>7.2f} {published / wall:>12,.0f} {cpu:>6.2f} {resent:>8,} "
        f"{s['duplicates']:>6,} {s['loss_rate']:>8.4%} {s['latency_mean_s'] * 1e3:>11.3f}"
    )
    return published / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300_000, help="published messages per fast-path run")
    ap.add_argument("--reference-messages", type=int, default=1_000, help="published messages per reference run")
    args = ap.parse_args()
    simulate(star(1), duration_s=0.2, seed=0)  # compile numba kernels outside the timing
    print(
        f"{'driver':>9} {'qos':>3} {'published':>10} {'wall_s':>7} {'msgs/wall_s':>12} {'cpu_s':>6} {'resent':>8} {'dups':>6} "
        f"{'loss':>8} {'lat_mean_ms':>11}"
    )
    for qos in (0, 1, 2):
        fast = measure(qos, args.messages, "batch")
        ref = measure(qos, args.reference_messages, "reference")
        print(f"{'':>9} {qos:>3} fast path / reference driver: {fast / ref:,.0f}x")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
