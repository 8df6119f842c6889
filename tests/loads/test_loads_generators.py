"""Synthetic loads: reproducible from a seed, independent across component streams,
statistically what they claim, and the §5 classes with their provenance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pubsim.models.loads import generators as G
from pubsim.models.params.provenance import Source
from pubsim.sim.distributions import LogNormal
from pubsim.sim.errors import ConfigError
from pubsim.sim.rng import StreamFactory


def _rng(component="gen", purpose="", seed=7):
    return StreamFactory(seed).generator(component, purpose)


CASES = {
    "poisson": lambda r: G.poisson(
        r,
        rate_per_s=3.0,
        duration_s=50,
        n_publishers=4,
        topics=("a", "b"),
        size_bytes=LogNormal(mean_value=100, cv=0.5),
    ),
    "constant": lambda r: G.constant_rate(r, rate_per_s=2.0, duration_s=50, n_publishers=4, jitter_s=0.05),
    "on_off": lambda r: G.on_off(r, rate_on_per_s=20, mean_on_s=2, mean_off_s=8, duration_s=200, n_publishers=5),
    "diurnal": lambda r: G.diurnal(r, mean_rate_per_s=0.01, duration_s=86400, n_publishers=5),
    "weather": lambda r: G.weather_sensors(r, n_gateways=2, sensors_per_gateway=50, duration_s=120),
    "cars": lambda r: G.car_sharing(r, n_cars=200, n_publishers=3, duration_s=600, t0_of_day_s=8 * 3600),
    "cameras": lambda r: G.traffic_cameras(r, n_cameras=5, duration_s=600),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_seed_same_trace_other_stream_other_trace(name):
    make = CASES[name]
    a, b = make(_rng(name)), make(_rng(name))
    assert a == b and len(a) > 0
    c = make(_rng(name, seed=8))
    assert not (c == a)


def test_component_streams_are_independent():
    x = G.poisson(_rng("gateway-1"), rate_per_s=1.0, duration_s=20000).t_s
    y = G.poisson(_rng("gateway-2"), rate_per_s=1.0, duration_s=20000).t_s
    n = min(len(x), len(y))
    gx, gy = np.diff(x[:n]), np.diff(y[:n])
    assert abs(stats.pearsonr(gx, gy)[0]) < 0.03
    assert abs(stats.spearmanr(np.histogram(x, 200)[0], np.histogram(y, 200)[0])[0]) < 0.25
    assert not np.array_equal(gx[:100], gy[:100])


def test_rng_must_be_explicit():
    with pytest.raises(ConfigError, match="Generator"):
        G.poisson(7, rate_per_s=1.0, duration_s=1.0)
    with pytest.raises(ConfigError, match="rate_per_s"):
        G.poisson(_rng(), rate_per_s=-1.0, duration_s=1.0)


def test_poisson_counts_and_gaps():
    t = G.poisson(_rng(), rate_per_s=2.0, duration_s=5000, n_publishers=3)
    assert len(t) == pytest.approx(30000, rel=0.03)
    gaps = t.gaps_s()
    assert stats.kstest(gaps, "expon", args=(0, 0.5)).pvalue > 1e-3


def test_constant_rate_is_periodic():
    t = G.constant_rate(_rng(), rate_per_s=4.0, duration_s=10, n_publishers=3)
    assert np.allclose(t.gaps_s(), 0.25)
    assert len(t) == 120


def test_on_off_mean_rate():
    t = G.on_off(_rng(), rate_on_per_s=10.0, mean_on_s=1.0, mean_off_s=4.0, duration_s=20000, n_publishers=2)
    assert len(t) / 20000 / 2 == pytest.approx(10 * 1 / 5, rel=0.08)
    gaps = t.gaps_s()
    assert np.std(gaps) / np.mean(gaps) > 1.5  # bursty: far above Poisson's 1


def test_mmpp_stationary_rate_with_transitions():
    trans = [[0, 1, 0], [0.5, 0, 0.5], [0, 1, 0]]
    t = G.mmpp(_rng(), rates_per_s=(0.0, 1.0, 5.0), mean_sojourn_s=(10, 10, 10), transition=trans, duration_s=50000)
    # embedded chain stationary (1/4, 1/2, 1/4), equal sojourns -> mean rate 0.5 + 1.25
    assert len(t) / 50000 == pytest.approx(1.75, rel=0.08)
    with pytest.raises(ConfigError, match="transition"):
        G.mmpp(_rng(), rates_per_s=(1, 2), mean_sojourn_s=(1, 1), transition=[[0.5, 0.2], [1, 0]], duration_s=1)


def test_diurnal_callable_profile_and_peak_at_noon():
    t = G.diurnal(
        _rng(), mean_rate_per_s=0.5, duration_s=86400, profile=lambda tod: 1 + np.cos(2 * np.pi * (tod - 43200) / 86400)
    )
    hourly = np.array(t.summary()["rate_by_hour_per_s"])
    assert np.argmax(hourly) in (11, 12)
    assert hourly[0] < 0.1 * hourly[12]


def test_zipf_topics_follow_the_law():
    codes = G.zipf_topics(_rng(), 200000, n_topics=10, exponent=1.2)
    freq = np.bincount(codes, minlength=10) / 200000
    w = 1 / np.arange(1, 11) ** 1.2
    assert np.allclose(freq, w / w.sum(), atol=0.005)
    t = G.with_zipf_topics(G.poisson(_rng(), rate_per_s=10, duration_s=100), _rng("z"), n_topics=3)
    assert set(t.frame["topic"].astype(str)) <= {"topic/0", "topic/1", "topic/2"}


def test_device_churn_keeps_the_online_fraction():
    base = G.poisson(_rng(), rate_per_s=1.0, duration_s=20000, n_publishers=50)
    kept = G.device_churn(base, _rng("churn"), mean_online_s=300, mean_offline_s=100)
    assert len(kept) / len(base) == pytest.approx(0.75, abs=0.03)
    assert set(kept.publishers) == set(base.publishers)
    # offline periods leave long gaps
    assert np.percentile(kept.gaps_s(), 99.9) > 50


def test_weather_class():
    p = G.WeatherParams()
    assert p.provenance_of("message_bytes").source is Source.PUBLICATION
    assert p.provenance_of("threshold").source is Source.ASSUMPTION
    assert {row[0] for row in p.describe()} >= {"sample_interval_s", "step_sd_noon"}
    noon = G.weather_sensors(_rng(), p, n_gateways=3, sensors_per_gateway=200, duration_s=600, t0_of_day_s=12 * 3600)
    night = G.weather_sensors(_rng(), p, n_gateways=3, sensors_per_gateway=200, duration_s=600, t0_of_day_s=0)
    assert set(noon.size_bytes) == {36}
    assert len(noon) > 5 * len(night)  # the rate follows the day
    assert noon.publishers == ["gw0", "gw1", "gw2"]
    assert set(noon.frame["topic"].astype(str)) == {f"weather/{k}" for k in p.sensor_kinds}
    # threshold-based: a sensor never sends twice within one sample interval
    assert noon.gaps_s().min() > 0
    with pytest.raises(ConfigError, match="threshold"):
        G.WeatherParams(threshold=0)


def test_car_sharing_class():
    p = G.CarSharingParams()
    assert p.provenance_of("poll_interval_s").source is Source.PUBLICATION
    assert p.provenance_of("size_mean_bytes").source is Source.PUBLICATION  # public operator API records
    assert p.size_mean_bytes == (220.0, 440.0)  # car2go v2.1: 219 B; Share Now: 441 B (counted by hand)
    day = G.car_sharing(_rng(), p, n_cars=500, n_publishers=5, duration_s=86400)
    hourly = np.array(day.summary()["rate_by_hour_per_s"])
    assert hourly[9] < 0.8 * hourly[12] and hourly[18] < 0.75 * hourly[12]  # rush-hour dips
    assert hourly[12] == pytest.approx(500 / 60 * p.available_base, rel=0.05)
    f = day.frame
    means = f.groupby(f["topic"].astype(str))["size_bytes"].mean()
    assert means["carsharing/operator_a"] == pytest.approx(220, rel=0.03)
    assert means["carsharing/operator_b"] == pytest.approx(440, rel=0.03)
    hourly_size = f.groupby((day.t_s // 3600).astype(int))["size_bytes"].mean()
    assert hourly_size.std() / hourly_size.mean() < 0.05  # steady over the day


def test_traffic_camera_class():
    p = G.CameraParams()
    day = G.traffic_cameras(_rng(), p, n_cameras=34, duration_s=86400)
    f = day.frame
    hour = (day.t_s // 3600).astype(int)
    size = f.groupby(hour)["size_bytes"].mean()
    assert size[12] > 2 * size[2]
    expected = 34 * 2 * 60 * 24
    assert expected * 0.9 < len(day) < expected * 0.99  # duplicates dropped
    assert np.all(day.gaps_s() >= 30 - 1e-9)
    assert np.allclose(np.round(day.gaps_s() / 30), day.gaps_s() / 30)
    assert len(day.publishers) == 34 and f["topic"].nunique() == 34
    # the stated cross-check: over a day the mean still is 40 kB + 70 kB x (12 h / 24 h) x 2/pi = 62.3 kB
    # (vs 60 kB per public traffic-webcam still, G.WEBCAMS_2011)
    tod = np.arange(0, 86400, 30.0)
    assert p.mean_size_bytes(tod).mean() == pytest.approx(40_000 + 70_000 / np.pi, rel=1e-3)
