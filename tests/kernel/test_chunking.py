"""How the batch driver cuts a run into chunks (issue 12).

A schedule publisher counts as its number of messages, not as ``n / span``:
400 messages at one instant used to give a span of 1e-9 s, a rate of 4e11
msg/s and chunks of 0.6 us (233 s of wall time for a 146 s run).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant


def _burst_star(n, at_s=0.5):
    pub = PublisherParams(
        topics=("t0",),
        arrival="schedule",
        schedule_time_s=(at_s,) * n,
        schedule_size_bytes=(1000,) * n,
        schedule_topic=("t0",) * n,
    )
    sub = SubscriberParams(subscriptions=("#",), processing_s=Constant(value=1e-5))
    link = LinkParams(bandwidth_Bps=1e9, latency_s=1e-3)
    return T.star(broker=BrokerParams(), publishers={"p": pub}, subscribers={"s": sub}, link=link, protocol="none")


def _chunks(graph, duration_s, **kwargs):
    """Ends of the chunks the batch driver cut (fails fast beyond 100 chunks)."""
    steps = []

    def step(done_s, total_s):
        steps.append(done_s)
        assert len(steps) <= 100, "more than 100 chunks"

    r = simulate(graph, duration_s=duration_s, seed=1, progress=step, **kwargs)
    return steps, r


def test_messages_at_one_instant_take_one_chunk():
    steps, r = _chunks(_burst_star(400), 10.0)
    assert steps == [10.0]
    assert len(r.deliveries()) == 400


def test_schedule_chunks_follow_its_message_count():
    # 400 scheduled messages in a 10 s run at 100 messages per chunk: 4 chunks of 2.5 s
    steps, r = _chunks(_burst_star(400), 10.0, chunk_messages=100)
    assert np.allclose(steps, [2.5, 5.0, 7.5, 10.0])
    assert len(r.deliveries()) == 400


def test_burst_records_match_the_reference_driver():
    g = _burst_star(400)
    fast = simulate(g, duration_s=1.0, seed=1)
    ref = simulate(g, duration_s=1.0, seed=1, driver="reference")
    pd.testing.assert_frame_equal(fast.deliveries(), ref.deliveries(), check_exact=True)
