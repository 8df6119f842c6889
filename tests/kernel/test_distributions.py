"""Distributions: moments of samples, parsing of the accepted forms, round trips."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.sim.distributions import (
    Constant,
    Empirical,
    Exponential,
    Gamma,
    LogNormal,
    Shifted,
    Uniform,
    parse_distribution,
)
from pubsim.sim.errors import ConfigError
from pubsim.sim.units import parse_duration_s, parse_size_bytes

DISTS = [
    Constant(value=2e-3),
    Exponential(mean_value=1e-3),
    Uniform(low=1e-3, high=3e-3),
    LogNormal(mean_value=1e-3, cv=0.7),
    Gamma(mean_value=1e-3, cv=0.3),
    Shifted(offset=1e-4, base=Exponential(mean_value=2e-4)),
    Empirical(values=(1e-3, 2e-3, 4e-3)),
]


@pytest.mark.parametrize("dist", DISTS, ids=str)
def test_sample_moments_match_declared_mean_and_scv(dist):
    x = dist.sample(np.random.default_rng(3), 400_000)
    assert x.mean() == pytest.approx(dist.mean, rel=0.01)
    assert x.var() / x.mean() ** 2 == pytest.approx(dist.scv, rel=0.03, abs=1e-9)
    assert x.min() >= dist.min_value - 1e-15


@pytest.mark.parametrize("dist", [d for d in DISTS if not isinstance(d, Empirical)], ids=str)
def test_str_parses_back_to_the_same_distribution(dist):
    assert parse_distribution(str(dist), parse_duration_s) == dist


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2ms", Constant(value=0.002)),
        ("exp(1ms)", Exponential(mean_value=0.001)),
        ("uniform(1ms, 3ms)", Uniform(low=0.001, high=0.003)),
        ("lognormal(mean=1ms, cv=0.5)", LogNormal(mean_value=0.001, cv=0.5)),
        ("shifted(10us, exp(1ms))", Shifted(offset=1e-5, base=Exponential(mean_value=0.001))),
        ({"dist": "gamma", "mean": "2ms", "cv": 0.25}, Gamma(mean_value=0.002, cv=0.25)),
    ],
)
def test_accepted_forms(text, expected):
    assert parse_distribution(text, parse_duration_s) == expected


def test_sizes_use_the_size_parser():
    assert parse_distribution("uniform(1KiB, 2KiB)", parse_size_bytes) == Uniform(low=1024, high=2048)


@pytest.mark.parametrize(
    "bad, field",
    [
        ("exp(-1ms)", "service.mean"),
        ("weibull(1ms)", "service"),
        ("uniform(3ms, 1ms)", "service"),
        ({"dist": "exponential"}, "service.mean"),
        ("gamma(1ms, 0)", "service"),
    ],
)
def test_bad_distributions_name_the_field(bad, field):
    with pytest.raises(ConfigError) as err:
        parse_distribution(bad, parse_duration_s, "service")
    assert err.value.field.startswith(field)
    assert "\n" not in str(err.value)
