"""Copies written in turn (models.mechanisms.turns): leads, a hand timeline, both drivers, refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.mechanisms.turns import copy_leads_s
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant, Gamma, Uniform
from pubsim.sim.errors import ConfigError

from ..scheduled import scheduled_star


def test_the_last_copy_leaves_at_the_departure_and_each_earlier_one_a_copy_before():
    assert copy_leads_s(4, 0.5).tolist() == [1.5, 1.0, 0.5, 0.0]
    assert copy_leads_s(1, 0.5).tolist() == [0.0]


def _star(times, in_turn, subscribers=3, delivery=None, hosts=None, placement=None):
    b = BrokerParams(
        ingress_cost_s=Constant(value=1.0),
        delivery_cost_s=delivery or Constant(value=0.5),
        copies_in_turn=in_turn,
    )
    return scheduled_star(b, times, subscribers=subscribers, latency_s=0.1, hosts=hosts, placement=placement)


def _deliveries(r):
    return r.deliveries().sort_values(["msg", "subscriber"])["delivery_time_s"].to_numpy()


def test_hand_timeline_each_copy_reaches_its_reader_once_written():
    # 1 s ingress + 0.5 s per copy, three readers, 0.1 s links. m0 published at 0 reaches the
    # broker at 0.1 and departs at 0.1 + 2.5 = 2.6; its copies leave at 1.6, 2.1, 2.6 and arrive
    # 0.1 s later. m1 (published at 1, queued behind m0) starts at 2.6, departs 5.1: copies 4.1, 4.6, 5.1.
    r = simulate(_star([0.0, 1.0], True), duration_s=10.0)
    assert _deliveries(r) == pytest.approx([1.7, 2.2, 2.7, 4.2, 4.7, 5.2])
    plain = simulate(_star([0.0, 1.0], False), duration_s=10.0)
    assert _deliveries(plain) == pytest.approx([2.7] * 3 + [5.2] * 3)


def test_the_broker_is_as_busy_either_way():
    times = np.linspace(0.0, 20.0, 9)
    a = simulate(_star(times, True), duration_s=30.0).stations().set_index("station")
    b = simulate(_star(times, False), duration_s=30.0).stations().set_index("station")
    cols = ["served", "utilization"]
    pd.testing.assert_frame_equal(a.loc[["broker:broker"], cols], b.loc[["broker:broker"], cols])


@pytest.mark.parametrize("delivery", [Constant(value=0.01), Uniform(low=0.005, high=0.015)])
def test_both_drivers_agree_record_for_record(delivery):
    times = np.sort(np.random.default_rng(4).uniform(0.0, 2.0, 60))
    fast = simulate(_star(times, True, subscribers=5, delivery=delivery), duration_s=2.0, seed=1)
    ref = simulate(_star(times, True, subscribers=5, delivery=delivery), duration_s=2.0, seed=1, driver="reference")
    pd.testing.assert_frame_equal(fast.deliveries(), ref.deliveries(), check_exact=True)
    d = fast.deliveries()
    spread = d.groupby("msg")["delivery_time_s"].agg(lambda t: t.max() - t.min())
    assert (spread > 0).all()  # every message's copies leave at different times


def test_costs_that_can_be_near_zero_lead_by_nothing():
    # the lead is a lower bound of the copies' work (least per-copy cost): 0 for a gamma cost
    times = np.linspace(0.0, 1.0, 5)
    r = simulate(_star(times, True, delivery=Gamma(mean_value=0.01, cv=0.5)), duration_s=2.0, seed=1)
    assert (r.deliveries().groupby("msg")["delivery_time_s"].nunique() == 1).all()


def test_a_copy_never_reaches_its_reader_before_the_message_reached_the_broker():
    times = np.sort(np.random.default_rng(7).uniform(0.0, 1.0, 40))
    delivery = Uniform(low=0.001, high=0.05)
    r = simulate(_star(times, True, subscribers=4, delivery=delivery), duration_s=1.0, seed=3)
    d = r.deliveries()
    # published at publish_time_s, 0.1 s to the broker, 1 s ingress, at least 0 s per copy, 0.1 s down
    assert (d["delivery_time_s"] - d["publish_time_s"] >= 0.1 + 1.0 + 0.1 - 1e-12).all()


def test_refused_on_a_host_cpu_shared_with_other_processes():
    hosts = {"h": HostParams(cores=1)}
    placement = {"broker": "h", "s0": "h"}
    g = _star([0.0], True, subscribers=1, hosts=hosts, placement=placement)
    sub = SubscriberParams(subscriptions=("t",), processing_s=Constant(value=0.1))
    g.nodes["s0"][T.PARAMS] = sub
    with pytest.raises(ConfigError, match="copies_in_turn"):
        simulate(g, duration_s=1.0)
