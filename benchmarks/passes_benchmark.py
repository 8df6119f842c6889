"""Speed of Mosquitto's event-loop passes (the event-driven pass discipline) against the FIFO paths.

One load, three brokers: ``--publishers`` publishers (paced bursts of
``--batch`` messages every millisecond, together ``--rate`` msg/s, 64 B)
-> one broker (10 us own cost per message) -> one subscriber. The brokers
differ only in how their worker reads:

* ``fifo``: the plain broker, FIFO by arithmetic (the reference speed);
* ``cycles``: I/O cycles that read everything buffered (NATS-like,
  :class:`pubsim.models.mechanisms.iothreads.discipline.CycleDiscipline`);
* ``passes``: Mosquitto's loop, one message per ready connection per pass
  (:class:`pubsim.models.mechanisms.iothreads.passes.PassDiscipline`,
  event-driven: messages wait for later passes);
* ``passes+buffers``: the same behind the publishers' socket buffers
  (``overload``, ``--buffer`` bytes per publisher): every admission checks
  the bytes held, and past the limit (``--rate`` above about 80k msg/s)
  publishers wait for departures.

Each is run once to compile (or load) the numba kernels, then timed. Prints
simulated messages per second of wall time, passes per message and the ratio
to ``fifo`` (one run each, same process; no assertion: the machine may be
shared).

    python benchmarks/passes_benchmark.py [--publishers 32] [--rate 20000] [--duration 4] [--buffer 64000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.overload import OverloadParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant


def _topology(io, publishers, rate_per_s, batch, duration_s, overload=None):
    per = rate_per_s / publishers
    bursts = np.arange(0.0, duration_s, batch / per)
    times = np.repeat(bursts, batch)
    pubs = {
        f"p{i}": PublisherParams(
            topics=("t",),
            arrival="schedule",
            schedule_time_s=times + i * 2e-6,
            schedule_size_bytes=np.full(times.size, 64),
            schedule_topic=np.full(times.size, "t", dtype=object),
        )
        for i in range(publishers)
    }
    broker = BrokerParams(ingress_cost_s=Constant(value=10e-6), io=io, overflow="backpressure", overload=overload)
    return T.star(
        broker=broker,
        publishers=pubs,
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(latency_s=5e-5),
    )


def _run(kind, args, duration_s):
    io, overload = kind
    top = _topology(io, args.publishers, args.rate, args.batch, duration_s, overload)
    t = time.perf_counter()
    r = simulate(top, duration_s=duration_s, warmup_s=0.0, seed=1)
    wall = time.perf_counter() - t
    st = r.stations().set_index("station").loc["broker:broker"]
    passes = st["cycles"] / st["served"] if "cycles" in st else float("nan")
    return wall, int(st["served"]), passes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--publishers", type=int, default=32)
    ap.add_argument("--rate", type=float, default=20_000.0, help="msg/s, all publishers together")
    ap.add_argument("--batch", type=int, default=2, help="messages per burst of one publisher")
    ap.add_argument("--duration", type=float, default=4.0, help="simulated s")
    ap.add_argument("--buffer", type=int, default=64_000, help="socket buffer bytes per publisher (passes+buffers)")
    args = ap.parse_args()
    passes = IoParams(cycle_cost_s=2.5e-6, cycle_max_per_connection=1)
    kinds = {
        "fifo": (None, None),
        "cycles": (IoParams(cycle_cost_s=2.5e-6), None),
        "passes": (passes, None),
        "passes+buffers": (passes, OverloadParams(socket_buffer_bytes=args.buffer, message_overhead_bytes=25)),
    }
    base = None
    for name, kind in kinds.items():
        _run(kind, args, 0.05)  # compile or load the kernels
        wall, served, passes = _run(kind, args, args.duration)
        speed = served / wall
        base = base or speed
        print(
            f"{name:14s} {served:8d} messages in {wall:6.2f} s: {speed:10,.0f} msg/s of wall time, "
            f"passes/msg {passes:.3f}, {speed / base:.2f} x fifo"
        )


if __name__ == "__main__":
    main()
