"""Cost of hosts on the fast path: the standard star (benchmarks/star_benchmark.py)
at 80 % load, without hosts and with every process on a host (publishers on 10
gateways with 100 Mbit/s cards, the broker on a 1 Gbit/s server, each
subscriber on a host of its own with a 1 Gbit/s card): three card hops more
per delivered copy. Prints published messages per second of wall time (best
of ``--repeats``) and the speed ratio.

    python benchmarks/hosts_benchmark.py [--messages 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

from star_benchmark import FANOUT, N_PUB, SERVICE_S, star

from pubsim.models import topology as T
from pubsim.models.params.host import HostParams
from pubsim.run import simulate


def hosted(load):
    g = star(load)
    hosts = {f"gw{i}": HostParams(card_Bps=12.5e6) for i in range(10)}
    hosts |= {"server": HostParams(cores=2, card_Bps=125e6)}
    hosts |= {f"app{i}": HostParams(card_Bps=125e6) for i in range(FANOUT)}
    placement = {f"p{i}": f"gw{i % 10}" for i in range(N_PUB)} | {"broker": "server"}
    placement |= {f"s{i}": f"app{i}" for i in range(FANOUT)}
    return T.place(g, hosts, placement)


def rate(graph, messages, repeats):
    duration = messages / (0.8 / SERVICE_S)
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = simulate(graph, duration_s=duration, seed=1, record="stream")
        best = max(best, r.summary()["published"] / (time.perf_counter() - t0))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    simulate(hosted(0.8), duration_s=0.5, seed=0)  # compile numba kernels outside the timing
    plain = rate(star(0.8), args.messages, args.repeats)
    with_hosts = rate(hosted(0.8), args.messages, args.repeats)
    print(f"without hosts: {plain:,.0f} msg/s of wall time")
    print(f"with hosts:    {with_hosts:,.0f} msg/s of wall time")
    print(f"ratio with/without: {with_hosts / plain:.2f}")


if __name__ == "__main__":
    main()
