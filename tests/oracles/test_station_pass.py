"""The fused station pass (:mod:`pubsim.sim.station_pass`) gives the plain path's records.

The batch driver serves one-server FIFO stations (links with jitter, loss
and a finite drop-newest or reject queue; brokers; subscribers with a
receive buffer) in one compiled pass; the reference driver keeps the plain
path. Checked record for record against the reference driver and against
the batch driver with the pass switched off (both record modes, several
chunk sizes), and the draw streams' ``peek``/``skip`` against ``take``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim import station_pass as SP
from pubsim.sim.distributions import Constant, Exponential, Uniform
from pubsim.sim.rng import StreamFactory


def lossy_star(overflow="drop_newest", jitter=None):
    """A small standard star: Poisson publishers, a broker with a short queue, downlinks with
    jitter, loss and a 3-message transmit queue, subscribers with a receive buffer."""
    jitter = Exponential(mean_value=3e-4) if jitter is None else jitter
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=1.5e-4), delivery_cost_s=Exponential(mean_value=1e-5), queue_messages=8
    )
    pubs = {
        f"p{i}": PublisherParams(topics=("t",), rate_per_s=600.0, size_bytes=Uniform(low=100, high=1500))
        for i in range(8)
    }
    subs = {
        "fast": SubscriberParams(subscriptions=("t",)),
        "slow": SubscriberParams(subscriptions=("t",), processing_s=Exponential(mean_value=2e-4), buffer_messages=3),
        "other": SubscriberParams(subscriptions=("t",), processing_s=Constant(value=1e-4)),
    }
    up = LinkParams(latency_s=1e-4, bandwidth_Bps=12.5e6, overhead_bytes=40)
    down = LinkParams(
        latency_s=5e-4,
        bandwidth_Bps=3e6,
        jitter_s=jitter,
        loss_probability=0.03,
        queue_messages=3,
        overflow=overflow,
    )
    links = {**{p: up for p in pubs}, **{s: down for s in subs}}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=links, protocol="none")


CASES = {
    "drop-newest": lambda: lossy_star(),
    "reject": lambda: lossy_star("reject"),
    "constant-jitter": lambda: lossy_star(jitter=Constant(value=2e-4)),
}


def _frames(result):
    return result.deliveries(), result.drops(), result.stations()


def _count_passes(monkeypatch):
    calls = []
    plain = SP.run_pass
    monkeypatch.setattr(SP, "run_pass", lambda *a: calls.append(1) or plain(*a))
    return calls


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_pass_equals_reference(case, monkeypatch):
    g = CASES[case]()
    calls = _count_passes(monkeypatch)
    fast = simulate(g, duration_s=0.4, warmup_s=0.05, seed=3, chunk_messages=200)
    assert len(calls) > 50  # the batch driver used the pass (links, broker, subscribers)
    n_fast = len(calls)
    ref = simulate(g, duration_s=0.4, warmup_s=0.05, seed=3, driver="reference")
    assert len(calls) == n_fast  # the reference driver kept the plain path
    for a, b in zip(_frames(fast), _frames(ref)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    causes = set(fast.drops()["cause"])
    queue_cause = "rejected" if case == "reject" else "buffer_full"
    assert {queue_cause, "link_loss"} <= causes  # the case drops at full queues and loses on links
    drops = fast.drops()
    assert drops[drops["cause"] == queue_cause]["place"].astype(str).str.startswith("link:").any()


@pytest.mark.parametrize("record", ["full", "stream"])
@pytest.mark.parametrize("chunk", [37, 1000, 1_000_000])
def test_fused_pass_equals_plain_batch(record, chunk):
    g = lossy_star()
    runs = [
        simulate(g, duration_s=0.4, warmup_s=0.05, seed=8, record=record, chunk_messages=chunk,
                 batch_options={"fused_stations": fused})
        for fused in (True, False)
    ]  # fmt: skip
    np.testing.assert_equal(runs[0].summary(), runs[1].summary())  # exact, NaN equal to NaN
    for name in ("stations", "throughput_series", "latency_ecdf"):
        pd.testing.assert_frame_equal(getattr(runs[0], name)(), getattr(runs[1], name)(), check_exact=True)
    if record == "full":
        for a, b in zip(_frames(runs[0]), _frames(runs[1])):
            pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_peek_and_skip_draw_as_take():
    streams = StreamFactory(4)
    a = streams.draws(Exponential(mean_value=1.0), "link", "jitter", block=64)
    b = streams.draws(Exponential(mean_value=1.0), "link", "jitter", block=64)
    for n, used in ((10, 10), (200, 150), (0, 0), (64, 3), (500, 500)):
        view = b.peek(n)
        assert len(view) == n
        b.skip(used)
        np.testing.assert_array_equal(view[:used], a.take(used))
    np.testing.assert_array_equal(b.take(100), a.take(100))
