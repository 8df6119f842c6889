"""Properties that hold for any topology and load (hypothesis).

Random small stars and chains, random parameters and seeds:

* conservation: owed deliveries = delivered + lost + still in flight,
  with and without draining;
* FIFO: with one worker per broker and no jitter, copies from one publisher
  reach one subscriber in publish order;
* no copy arrives before it was published, or faster than the links allow;
* same seed, same records; another seed, other records.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.sim.distributions import Constant, Exponential
from pubsim.run import simulate

TOPICS = ["a/x", "a/y", "b/x"]
FILTERS = ["a/x", "a/+", "#", "+/x", "b/#"]
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def topologies(draw, jitter=True, one_worker=False):
    n_brokers = draw(st.integers(1, 3))
    overflow = draw(st.sampled_from(["drop_newest", "drop_oldest", "backpressure"]))
    brokers = {f"b{i}": BrokerParams(
        workers=1 if one_worker else draw(st.integers(1, 2)),
        ingress_cost_s=Exponential(mean_value=draw(st.floats(1e-5, 4e-4))),
        delivery_cost_s=Constant(value=draw(st.floats(0, 5e-5))),
        queue_messages=draw(st.one_of(st.none(), st.integers(0, 8))),
        client_queue_messages=draw(st.one_of(st.none(), st.integers(1, 5))),
        overflow="drop_newest" if one_worker and overflow == "drop_oldest" else overflow,
    ) for i in range(n_brokers)}
    link = LinkParams(latency_s=draw(st.floats(1e-5, 1e-3)), bandwidth_Bps=draw(st.floats(1e5, 1e8)),
                      overhead_bytes=draw(st.integers(0, 60)),
                      jitter_s=Exponential(mean_value=draw(st.floats(1e-6, 1e-4))) if jitter else Constant(value=0),
                      loss_probability=draw(st.sampled_from([0.0, 0.0, 0.05])))
    names = list(brokers)
    pubs = {f"p{i}": (draw(st.sampled_from(names)), PublisherParams(
        topics=tuple(draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2, unique=True))),
        arrival=draw(st.sampled_from(["poisson", "constant"])),
        rate_per_s=draw(st.floats(100, 3000)),
        size_bytes=Constant(value=draw(st.integers(1, 1500)))))
        for i in range(draw(st.integers(1, 4)))}
    subs = {f"s{i}": (draw(st.sampled_from(names)), SubscriberParams(
        subscriptions=tuple(draw(st.lists(st.sampled_from(FILTERS), min_size=1, max_size=2, unique=True))),
        processing_s=Exponential(mean_value=draw(st.floats(1e-6, 2e-4))),
        buffer_messages=draw(st.one_of(st.none(), st.integers(1, 4)))))
        for i in range(draw(st.integers(1, 4)))}
    fwd = draw(st.sampled_from(["flood", "subscription"]))
    return T.chain(brokers=brokers, bridge=link, link=link, publishers=pubs, subscribers=subs, forwarding=fwd)


@SETTINGS
@given(g=topologies(), seed=st.integers(0, 2**32 - 1), drain=st.booleans())
def test_conservation(g, seed, drain):
    r = simulate(g, duration_s=0.2, seed=seed, drain=drain)
    counts = r.sink.counts()  # window = whole run
    owed = counts["expected_deliveries"]
    lost = sum(v for k, v in counts.items() if k.startswith("lost_"))
    in_flight = r.driver.in_flight_deliveries()
    assert owed == counts["delivered"] + lost + in_flight
    assert len(r.deliveries()) == counts["delivered"]
    assert r.drops()["lost_deliveries"].sum() == lost
    if drain:
        assert in_flight == 0


@SETTINGS
@given(g=topologies(jitter=False, one_worker=True), seed=st.integers(0, 2**32 - 1))
def test_fifo_per_publisher_and_subscriber(g, seed):
    d = simulate(g, duration_s=0.2, seed=seed).deliveries()
    for _, grp in d.groupby(["publisher", "subscriber"], observed=True):
        grp = grp.sort_values(["publish_time_s", "msg"])
        assert np.all(np.diff(grp["delivery_time_s"].to_numpy()) >= 0)


@SETTINGS
@given(g=topologies(), seed=st.integers(0, 2**32 - 1))
def test_no_negative_or_impossible_latency(g, seed):
    d = simulate(g, duration_s=0.2, seed=seed).deliveries()
    link = next(iter(g.edges(data=True)))[2][T.PARAMS]
    # every delivery crossed at least an uplink and a downlink
    assert (d["latency_s"] >= 2 * link.latency_s - 1e-12).all()
    assert (d["delivery_time_s"] >= d["publish_time_s"]).all()


@settings(max_examples=10, deadline=None)
@given(g=topologies(), seed=st.integers(0, 2**32 - 2))
def test_same_seed_same_records(g, seed):
    a = simulate(g, duration_s=0.1, seed=seed)
    b = simulate(g, duration_s=0.1, seed=seed)
    pd.testing.assert_frame_equal(a.deliveries(), b.deliveries(), check_exact=True)
    pd.testing.assert_frame_equal(a.drops(), b.drops(), check_exact=True)
    c = simulate(g, duration_s=0.1, seed=seed + 1)
    if len(a.deliveries()) > 5:
        assert not a.deliveries()["delivery_time_s"].equals(c.deliveries()["delivery_time_s"])
