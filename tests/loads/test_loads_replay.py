"""Replay: exact, time-scaled, unbiased resampling per 15-minute interval (KS-checked against the
source, and a deliberately wrong resampler fails the same check), scale-up with spawned streams."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models.loads import generators as G
from pubsim.models.loads import replay as R
from pubsim.sim.errors import ConfigError
from pubsim.sim.rng import StreamFactory

P_MIN = 1e-3


@pytest.fixture(scope="module")
def source():
    """Three days, ten devices; sizes and rates that change with the time of day."""
    rng = StreamFactory(5).generator("source")
    src = G.diurnal(rng, mean_rate_per_s=1 / 120, duration_s=3 * 86400, n_publishers=10, t0_of_day_s=3 * 3600)
    tod = (src.t_s + src.t0_of_day_s) % 86400
    frame = src.frame.copy()
    frame["size_bytes"] = np.rint(rng.gamma(4.0, (20 + 100 * G.daylight(tod)) / 4)).astype(np.int64)
    return src.copy_with(frame)


def _failing(ks):
    return int((ks["p_size"] < P_MIN).sum()), int((ks["p_gap"] < P_MIN).sum())


def test_exact_and_window(source):
    assert R.exact(source) == source
    w = R.exact(source, 3600, 7200)
    assert w.t_s.min() >= 0 and w.t_s.max() < 3600
    assert w.t0_of_day_s == (source.t0_of_day_s + 3600) % 86400


def test_time_scaled(source):
    fast = R.time_scaled(source, 10)
    assert np.allclose(fast.t_s, source.t_s / 10)
    assert np.array_equal(fast.size_bytes, source.size_bytes)
    with pytest.raises(ConfigError, match="k"):
        R.time_scaled(source, 0)


@pytest.mark.parametrize("start", ["random", "noon"])
def test_resampled_matches_the_source_per_interval(source, start):
    rng = StreamFactory(7).generator("resample", start)
    res = R.resample(source, rng, duration_s=86400, copies=30, start_tod_s=None if start == "random" else 43200.0)
    ks = R.interval_ks(source, res)
    assert ks["p_size"].notna().sum() == 96 and ks["p_gap"].notna().sum() >= 90
    assert _failing(ks) == (0, 0), ks.sort_values("p_size").head()
    # the same check catches a resampler that ignores the time of day
    wrong = R.resample(
        source,
        StreamFactory(7).generator("resample", start),
        duration_s=86400,
        copies=30,
        interval_s=86400,
        start_tod_s=None if start == "random" else 43200.0,
    )
    bad_size, bad_gap = _failing(R.interval_ks(source, wrong))
    assert bad_size > 48 and bad_gap > 24


def test_random_starts_spread_over_the_source(source):
    res = R.resample(source, StreamFactory(1).generator("r"), duration_s=60, copies=2000)
    starts = res.publisher_t0_of_day_s
    assert len(starts) == 2000
    assert np.histogram(starts, bins=24, range=(0, 86400))[0].min() > 40


def test_resample_is_reproducible_and_rate_preserving(source):
    a = R.resample(source, StreamFactory(2).generator("r"), duration_s=86400, copies=10, start_tod_s=0.0)
    b = R.resample(source, StreamFactory(2).generator("r"), duration_s=86400, copies=10, start_tod_s=0.0)
    assert a == b
    per_device_day = len(source) / 10 / 3
    assert len(a) / 10 == pytest.approx(per_device_day, rel=0.1)
    assert set(a.frame["topic"].astype(str)) <= set(source.frame["topic"].astype(str))


def test_scale_up_superposes_independent_gateways(source):
    pools = R.IntervalPools(source)
    big = R.scale_up(
        pools,
        StreamFactory(3).generator("scale"),
        n_gateways=4,
        devices_per_gateway=50,
        duration_s=3600,
        start_tod_s=43200.0,
    )
    small = R.scale_up(
        pools,
        StreamFactory(3).generator("scale"),
        n_gateways=2,
        devices_per_gateway=50,
        duration_s=3600,
        start_tod_s=43200.0,
    )
    assert big.publishers == ["gw0", "gw1", "gw2", "gw3"]
    f = big.frame
    first_two = f[f["publisher"].astype(str).isin(["gw0", "gw1"])].reset_index(drop=True)
    assert np.array_equal(first_two["t_s"].to_numpy(), small.t_s)  # gateway g: same stream whatever N
    counts = f["publisher"].value_counts()
    assert counts.min() > 0.7 * counts.max()
    noon_rate = np.array(source.summary()["rate_by_hour_per_s"])[12] / 10  # per device
    assert len(f) / 3600 / 200 == pytest.approx(noon_rate, rel=0.2)
    g0 = f[f["publisher"] == "gw0"]["t_s"].to_numpy()
    g1 = f[f["publisher"] == "gw1"]["t_s"].to_numpy()
    assert not np.array_equal(g0[:50], g1[:50])


def test_bad_inputs(source):
    rng = StreamFactory(1).generator("r")
    with pytest.raises(ConfigError, match="interval_s"):
        R.resample(source, rng, duration_s=10, interval_s=7)
    with pytest.raises(ConfigError, match="Generator"):
        R.resample(source, 1, duration_s=10)
    with pytest.raises(ConfigError, match="at least two"):
        R.resample(source.window(0, 1e-9), rng, duration_s=10)


def test_first_message_is_the_equilibrium_residual_not_a_short_gap():
    # Poisson source, mean gap 60 s: from a random instant the wait to the first
    # message is again exponential with mean 60 s (memoryless). Drawing a gap
    # uniformly and taking a uniform fraction of it gives mean 30 s instead.
    rng = StreamFactory(9).generator("poisson-source")
    src = G.poisson(rng, rate_per_s=1 / 60, duration_s=20 * 86400, n_publishers=1)
    first = []
    for k in range(4):
        out = R.resample(src, StreamFactory(10 + k).generator("copies"), duration_s=3600, copies=500)
        first.append(out.frame.groupby("publisher", observed=True)["t_s"].min().to_numpy())
    first = np.concatenate(first)
    mean, half = first.mean(), 3 * first.std() / np.sqrt(len(first))
    assert abs(mean - 60.0) < half + 1.0, (mean, half)
    assert first.std() / mean == pytest.approx(1.0, abs=0.1)  # exponential: cv 1
