"""Speed of the closed loop (request/reply) in the batch driver.

The closed loop advances in chunks no longer than the least round-trip
lookahead, so its cost grows with simulated time / RTT rather than with the
number of messages. Prints replies per second of wall time for a few
windows. Run: ``python benchmarks/patterns_benchmark.py``.
"""

from __future__ import annotations

import time

from pubsim.models.mechanisms.patterns.reqrep import request_reply
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Exponential


def main():
    for clients, window in ((1, 1), (1, 16), (4, 16), (16, 64)):
        g = request_reply(
            server=BrokerParams(ingress_cost_s=Exponential(mean_value=1e-5)),
            link=LinkParams(latency_s=1e-3),
            clients={
                f"c{i}": PublisherParams(topics=("x",), arrival="closed_loop", window_requests=window)
                for i in range(clients)
            },
        )
        t0 = time.perf_counter()
        r = simulate(g, duration_s=10.0, seed=1, record="stream")
        wall = time.perf_counter() - t0
        n = r.summary()["published"]
        print(
            f"{clients:3d} clients x W={window:3d}: {n:9,.0f} requests in 10 s simulated, "
            f"{wall:6.2f} s wall, {n / wall:10,.0f} requests/s of wall time"
        )


if __name__ == "__main__":
    main()
