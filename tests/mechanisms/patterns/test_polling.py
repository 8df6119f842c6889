"""Polling: lost and duplicated samples against the closed forms, a hand
example, and read times taken from a simulated request path."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.mechanisms.patterns.polling import (
    constant_times,
    expected_duplicate_fraction,
    expected_lost_fraction,
    poll_records,
    poll_summary,
    read_times_from_deliveries,
)
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.patterns import PollingParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError


def test_hand_example():
    samples = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    polls = np.array([0.5, 0.7, 2.6, 4.2, 4.9])  # read 10 ms later, reply 20 ms after the poll
    r = poll_records(samples, polls, polls + 0.01, polls + 0.02)
    assert list(r["sample"]) == [0, 0, 2, 4, 4]
    assert list(r["duplicate"]) == [False, True, False, False, True]
    assert list(r["skipped"]) == [0, 0, 1, 1, 0]  # sample 1 and sample 3 never fetched
    np.testing.assert_allclose(r["latency_s"], 0.02)
    np.testing.assert_allclose(r["age_s"], [0.52, 0.72, 0.62, 0.22, 0.92])
    s = poll_summary(r, samples)
    assert (s["samples"], s["fetched"], s["lost"], s["duplicated_polls"]) == (5, 3, 2, 2)


def test_reads_out_of_order_are_handled_by_read_time():
    samples = [0.0, 1.0, 2.0]
    r = poll_records(samples, [0.5, 1.0], [2.5, 1.5], [2.6, 1.6])  # the second poll is read first
    assert list(r["sample"]) == [2, 1]
    assert list(r["duplicate"]) == [False, False] and list(r["skipped"]) == [0, 0]


@pytest.mark.parametrize("poll_s,sample_s", [(1.0, 0.3), (0.3, 1.0), (1.0, 1.0), (0.7, 0.5), (2.5, 2.0)])
def test_constant_intervals_against_closed_form(poll_s, sample_s):
    rng = np.random.default_rng(12)
    horizon = 20_000 * max(poll_s, sample_s)
    samples = constant_times(sample_s, horizon, rng)
    polls = constant_times(poll_s, horizon, rng)
    s = poll_summary(poll_records(samples, polls, polls, polls), samples)
    # finite window: at most one sample / one poll off at each end
    assert abs(s["lost_fraction"] - expected_lost_fraction(poll_s, sample_s)) <= 2 / s["samples"]
    assert abs(s["duplicate_fraction"] - expected_duplicate_fraction(poll_s, sample_s)) <= 2 / s["polls"]


def test_constant_intervals_exact_counts_by_floor_arithmetic():
    """Independent check: the sample read at r is floor((r - phase) / S)."""
    rng = np.random.default_rng(5)
    samples = constant_times(0.4, 500.0, rng)
    polls = constant_times(1.0, 500.0, rng)
    r = poll_records(samples, polls, polls, polls)
    expected = np.floor((polls - samples[0]) / 0.4).astype(int)
    expected[polls < samples[0]] = -1
    assert list(r["sample"]) == list(expected)
    s = poll_summary(r, samples)
    assert s["lost"] == int(r["skipped"].sum())


def test_read_times_from_a_simulated_request_path():
    """Polls as requests through a broker to the sensor: read = delivery at the sensor."""
    link = LinkParams(latency_s=2e-3)
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=1e-4)),
        publishers={"poller": PublisherParams(topics=("sensor/get",), arrival="constant", rate_per_s=2.0)},
        subscribers={"sensor": SubscriberParams(subscriptions=("sensor/get",))},
        link=link,
        protocol="none",
    )
    d = simulate(g, duration_s=30, seed=3).deliveries()
    poll_t, read_t = read_times_from_deliveries(d, "poller", "sensor")
    np.testing.assert_allclose(read_t - poll_t, 4.1e-3, atol=1e-12)
    params = PollingParams(poll_interval_s=0.5, sample_interval_s=0.2, reply_delay_s=4.1e-3)
    samples = constant_times(params.sample_interval_s, 30.0, np.random.default_rng(1))
    r = poll_records(samples, poll_t, read_t, read_t + params.reply_delay_s)
    np.testing.assert_allclose(r["latency_s"], 8.2e-3, atol=1e-12)
    s = poll_summary(r, samples)
    assert abs(s["lost_fraction"] - expected_lost_fraction(0.5, 0.2)) <= 2 / s["samples"]


def test_bad_polling_params():
    with pytest.raises(ConfigError, match="poll_interval_s"):
        PollingParams(poll_interval_s=0, sample_interval_s=1)
    with pytest.raises(ConfigError, match="sample_times_s"):
        poll_records([1.0, 0.0], [0.5], [0.5], [0.5])
