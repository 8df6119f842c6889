"""Copies that wake their readers (models.mechanisms.readers): the rule, a hand timeline, both drivers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pubsim.models.mechanisms.readers import ReaderWakes
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.mapping import from_mapping
from pubsim.models.params.readers import ReaderWakeParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError

from ..scheduled import scheduled_star


def _wakes(shared=True, copy_s=0.1, visits=2):
    return ReaderWakes(ReaderWakeParams(wake_cost_s=0.5, copy_s=copy_s, shared_core=shared), visits, (0.0, math.inf))


def test_on_a_shared_core_the_ranks_read_before_the_next_write_are_woken_again():
    w = _wakes()
    # gaps: first (all 4), 0.25 s -> ranks 0, 1 read by 0.1, 0.2 < 0.25; 0.1 -> none ((0+1) 0.1 is not < 0.1);
    # 0.05 -> none; 10 s -> all 4
    woken = w.asleep([0.0, 0.25, 0.35, 0.4, 10.4], [0] * 5, [4] * 5)
    assert woken.tolist() == [4, 2, 0, 0, 4]


def test_on_cores_of_their_own_every_reader_sleeps_after_copy_s():
    w = _wakes(shared=False)
    assert w.asleep([0.0, 0.05, 0.2, 0.25], [0] * 4, [3] * 4).tolist() == [3, 0, 3, 0]


def test_each_visit_keeps_its_own_gaps_across_calls():
    w = _wakes()
    assert w.asleep([0.0, 0.01], [0, 1], [2, 2]).tolist() == [2, 2]  # first of each visit
    assert w.asleep([0.15, 0.3], [1, 0], [2, 2]).tolist() == [1, 2]  # 0.14 s since visit 1's; 0.3 s since 0's
    assert w.record() == {"reader_wakes": 7, "reader_copies": 8}


def test_only_messages_in_the_window_are_counted():
    w = ReaderWakes(ReaderWakeParams(wake_cost_s=0.5, copy_s=0.1), 1, (1.0, 2.0))
    w.asleep([0.0, 1.5, 2.5], [0, 0, 0], [3, 3, 3])
    assert w.record() == {"reader_wakes": 3, "reader_copies": 3}


def test_copy_s_must_be_positive_and_the_error_names_it():
    with pytest.raises(ConfigError, match="copy_s"):
        ReaderWakeParams(wake_cost_s=1e-5, copy_s=0.0)
    with pytest.raises(ConfigError, match="reader_wake.wake_cost_s"):
        from_mapping(BrokerParams, {"reader_wake": {"wake_cost_s": "-1us", "copy_s": "50us"}}, "")


def _star(times, reader_wake, subscribers=3):
    b = BrokerParams(ingress_cost_s=Constant(value=1.0), reader_wake=reader_wake)
    return scheduled_star(b, times, subscribers=subscribers)


def test_hand_timeline_each_woken_copy_adds_its_cost():
    # 1 s per message, 0.5 s per woken copy, copy_s 0.1 s on one core, three readers:
    # m0 at 0 wakes 3 (2.5 s: leaves 2.5); m1 at 0.15 wakes rank 0 only (1.5 s: 2.5 -> 4.0);
    # m2 at 10 wakes 3 (10 -> 12.5)
    rw = ReaderWakeParams(wake_cost_s=0.5, copy_s=0.1)
    r = simulate(_star([0.0, 0.15, 10.0], rw), duration_s=20.0)
    d = r.deliveries().groupby("msg")["delivery_time_s"].max().sort_index()
    assert d.tolist() == pytest.approx([2.5, 4.0, 12.5])
    row = r.stations().set_index("station").loc["broker:broker"]
    assert (row["reader_wakes"], row["reader_copies"]) == (7, 9)
    plain = simulate(_star([0.0, 0.15, 10.0], None), duration_s=20.0)
    assert plain.deliveries().groupby("msg")["delivery_time_s"].max().tolist() == pytest.approx([1.0, 2.0, 11.0])


def test_both_drivers_agree_record_for_record():
    times = np.sort(np.random.default_rng(4).uniform(0.0, 2.0, 80))
    rw = ReaderWakeParams(wake_cost_s=0.01, copy_s=0.01)
    fast = simulate(_star(times, rw), duration_s=2.0, seed=1)
    ref = simulate(_star(times, rw), duration_s=2.0, seed=1, driver="reference")
    assert 0 < fast.stations().set_index("station").loc["broker:broker", "reader_wakes"] < 3 * 80
    pd.testing.assert_frame_equal(fast.deliveries(), ref.deliveries(), check_exact=True)
