"""Streaming records: same counts as full records, quantiles within resolution, flat memory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pubsim.run import simulate
from pubsim.sim.distributions import Exponential
from pubsim.sim.records import LatencyHistogram
from pubsim.testing import single_queue


def test_stream_summary_matches_full_records():
    g = single_queue(rate_per_s=900.0, service=Exponential(mean_value=1e-3), queue_messages=30)
    full = simulate(g, duration_s=20, warmup_s=2, seed=4, record="full").summary()
    stream = simulate(g, duration_s=20, warmup_s=2, seed=4, record="stream").summary()
    for key in ("published", "delivered", "expected_deliveries", "loss_rate", "ingress_per_s", "egress_per_s"):
        assert stream[key] == full[key], key
    assert stream["latency_mean_s"] == pytest.approx(full["latency_mean_s"], rel=1e-12)
    assert stream["latency_max_s"] == full["latency_max_s"]
    for q in ("latency_p50_s", "latency_p90_s", "latency_p99_s"):
        assert stream[q] == pytest.approx(full[q], rel=0.012), q


def test_histogram_quantiles_against_numpy():
    rng = np.random.default_rng(0)
    values = rng.lognormal(-7, 1.5, 200_000)
    h = LatencyHistogram()
    for chunk in np.array_split(values, 13):
        h.add(chunk)
    for q in (0.01, 0.5, 0.9, 0.99, 0.999):
        exact = np.quantile(values, q, method="inverted_cdf")
        assert h.quantile(q) == pytest.approx(exact, rel=0.012)
    assert h.n == len(values) and h.max == values.max() and h.min == values.min()


def test_stream_memory_does_not_grow_with_messages():
    g = single_queue(rate_per_s=900.0, service=Exponential(mean_value=1e-3))
    short = simulate(g, duration_s=5, seed=1, record="stream", series_bin_s=1.0, chunk_messages=500)
    long = simulate(g, duration_s=50, seed=1, record="stream", series_bin_s=1.0, chunk_messages=500)
    assert long.sink.hist.counts.shape == short.sink.hist.counts.shape
    assert long.sink.delivered > 9 * short.sink.delivered
    # only the per-second series grows, with simulated time, not messages
    assert len(long.throughput_series()) == pytest.approx(50, abs=1)
    assert not hasattr(long.sink, "_delivered")
    assert math.isfinite(long.summary()["latency_p99_s"])
