"""Tests of sim.theory against independently known numbers and each other."""

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pubsim.sim.errors import ConfigError
from pubsim.sim.theory import (
    erlang_c,
    jackson_tandem_sojourn_mean_s,
    md1_sojourn_mean_s,
    mg1_sojourn_mean_s,
    mg1_wait_mean_s,
    mm1_priority_nonpreemptive_wait_mean_s,
    mm1_sojourn_cdf,
    mm1_sojourn_mean_s,
    mm1k_loss_probability,
    mm1k_sojourn_mean_s,
    mmc_sojourn_mean_s,
    mmc_wait_mean_s,
)

# --- M/M/1 ------------------------------------------------------------------


def test_mm1_known_values():
    assert mm1_sojourn_mean_s(0.8, 1.0) == pytest.approx(5.0)
    assert mm1_sojourn_mean_s(0.0, 4.0) == pytest.approx(0.25)
    assert mm1_sojourn_mean_s(900.0, 1000.0) == pytest.approx(0.01)


def test_mm1_cdf():
    lam, mu = 0.8, 1.0
    median_s = math.log(2.0) / (mu - lam)
    assert mm1_sojourn_cdf(median_s, lam, mu) == pytest.approx(0.5)
    assert mm1_sojourn_cdf(0.0, lam, mu) == 0.0
    assert mm1_sojourn_cdf(-1.0, lam, mu) == 0.0
    assert mm1_sojourn_cdf(math.inf, lam, mu) == 1.0
    t_s = np.array([0.0, 1.0, 5.0, 50.0])
    np.testing.assert_allclose(mm1_sojourn_cdf(t_s, lam, mu), 1.0 - np.exp(-0.2 * t_s))


def test_mm1_cdf_mean_is_sojourn_mean():
    """E[T] = integral of (1 - F(t)) dt."""
    lam, mu = 3.0, 5.0
    t_s = np.linspace(0.0, 20.0, 200_001)
    survival = 1.0 - mm1_sojourn_cdf(t_s, lam, mu)
    area_s = float(np.sum((survival[1:] + survival[:-1]) / 2.0 * np.diff(t_s)))
    assert area_s == pytest.approx(mm1_sojourn_mean_s(lam, mu), rel=1e-6)


def _lindley_sojourns_s(rng, lam, services_s):
    """Sojourn times of a FCFS single-server queue by Lindley's recursion."""
    gaps_s = rng.exponential(1.0 / lam, size=len(services_s))
    sojourns_s = np.empty(len(services_s))
    wait_s = 0.0
    for i, service_s in enumerate(services_s):
        sojourns_s[i] = wait_s + service_s
        if i + 1 < len(services_s):
            wait_s = max(0.0, sojourns_s[i] - gaps_s[i + 1])
    return sojourns_s


def test_mm1_against_lindley_simulation():
    rng = np.random.default_rng(20240601)
    lam, mu, n = 0.5, 1.0, 200_000
    sojourns_s = _lindley_sojourns_s(rng, lam, rng.exponential(1.0 / mu, size=n))[1000:]
    assert sojourns_s.mean() == pytest.approx(mm1_sojourn_mean_s(lam, mu), rel=0.05)
    for t_s in (0.5, 2.0, 6.0):
        assert np.mean(sojourns_s <= t_s) == pytest.approx(mm1_sojourn_cdf(t_s, lam, mu), abs=0.02)


def test_md1_against_lindley_simulation():
    rng = np.random.default_rng(7)
    lam, service_s, n = 0.7, 1.0, 200_000
    sojourns_s = _lindley_sojourns_s(rng, lam, np.full(n, service_s))[1000:]
    assert sojourns_s.mean() == pytest.approx(md1_sojourn_mean_s(lam, service_s), rel=0.05)


# --- M/G/1, M/D/1 -------------------------------------------------------------


def test_md1_known_value():
    # rho = 0.5, D = 1 s: T = 1 + 0.5 / (2 * 0.5) = 1.5 s
    assert md1_sojourn_mean_s(0.5, 1.0) == pytest.approx(1.5)


@pytest.mark.parametrize("lam, service_s", [(0.5, 1.0), (0.99, 1.0), (10.0, 0.05), (0.0, 0.2)])
def test_md1_is_mg1_with_zero_scv(lam, service_s):
    expected_s = mg1_sojourn_mean_s(lam, service_s, 0.0)
    assert md1_sojourn_mean_s(lam, service_s) == pytest.approx(expected_s)


@pytest.mark.parametrize("lam, mu", [(0.8, 1.0), (1.0, 3.0), (99.0, 100.0)])
def test_mg1_with_unit_scv_is_mm1(lam, mu):
    assert mg1_sojourn_mean_s(lam, 1.0 / mu, 1.0) == pytest.approx(mm1_sojourn_mean_s(lam, mu))


def test_md1_waits_half_as_long_as_mm1():
    """P-K: the M/D/1 wait is half the M/M/1 wait at the same load."""
    lam, mu = 0.6, 1.0
    wait_md1_s = md1_sojourn_mean_s(lam, 1.0 / mu) - 1.0 / mu
    wait_mm1_s = mm1_sojourn_mean_s(lam, mu) - 1.0 / mu
    assert wait_md1_s == pytest.approx(wait_mm1_s / 2.0)
    assert mg1_wait_mean_s(lam, 1.0 / mu, 0.0) == pytest.approx(wait_md1_s)


# --- M/M/1/K ------------------------------------------------------------------


def _mm1k_numeric(lam, mu, k):
    """Loss probability and admitted sojourn from p_n proportional to rho^n."""
    n = np.arange(k + 1)
    log_weights = n * math.log(lam / mu)
    p = np.exp(log_weights - log_weights.max())
    p /= p.sum()
    number_mean = float(n @ p)
    return float(p[-1]), number_mean / (lam * (1.0 - p[-1]))


@pytest.mark.parametrize(
    "lam, mu, k",
    [
        (0.5, 1.0, 1),
        (0.5, 1.0, 5),
        (0.9, 1.0, 50),
        (1.0, 1.0, 10),
        (2.0, 1.0, 3),
        (5.0, 1.0, 20),
        (1.0 + 1e-9, 1.0, 7),
        (1.0 - 1e-9, 1.0, 7),
        (1.001, 1.0, 2000),
        (0.999, 1.0, 2000),
        (30.0, 1.0, 400),
        (0.1, 1.0, 400),
        (1.5, 2.0, 100_000),
    ],
)
def test_mm1k_against_numeric_distribution(lam, mu, k):
    loss, sojourn_s = _mm1k_numeric(lam, mu, k)
    assert mm1k_loss_probability(lam, mu, k) == pytest.approx(loss, rel=1e-9, abs=1e-300)
    assert mm1k_sojourn_mean_s(lam, mu, k) == pytest.approx(sojourn_s, rel=1e-9)


def test_mm1k_single_place_is_erlang_loss():
    # K = 1: P = rho / (1 + rho) (Erlang B with one server), no waiting
    assert mm1k_loss_probability(1.0, 2.0, 1) == pytest.approx(1.0 / 3.0)
    assert mm1k_sojourn_mean_s(1.0, 2.0, 1) == pytest.approx(0.5)
    assert mm1k_sojourn_mean_s(50.0, 2.0, 1) == pytest.approx(0.5)


@pytest.mark.parametrize("k", [1, 2, 9, 1000])
def test_mm1k_at_rho_one(k):
    assert mm1k_loss_probability(3.0, 3.0, k) == pytest.approx(1.0 / (k + 1))
    # L = K/2, admitted rate lam K/(K+1) -> T = (K+1) / (2 lam)
    assert mm1k_sojourn_mean_s(3.0, 3.0, k) == pytest.approx((k + 1) / (2 * 3.0))


@pytest.mark.parametrize("k", [1, 10, 500])
def test_mm1k_is_continuous_at_rho_one(k):
    at_one = mm1k_sojourn_mean_s(1.0, 1.0, k)
    for eps in (1e-13, 1e-11, 1e-9):  # slope dT/drho ~ K^2/12: keep eps K^2 small
        assert mm1k_sojourn_mean_s(1.0 + eps, 1.0, k) == pytest.approx(at_one, rel=1e-5)
        assert mm1k_sojourn_mean_s(1.0 - eps, 1.0, k) == pytest.approx(at_one, rel=1e-5)
        assert mm1k_loss_probability(1.0 + eps, 1.0, k) == pytest.approx(1.0 / (k + 1), rel=1e-5)


@pytest.mark.parametrize("scale", [0.5, 0.999, 1.001, 2.0])
@pytest.mark.parametrize("sign", [-1.0, 1.0])
def test_mm1k_around_series_switch(scale, sign):
    """Near rho = 1 a series replaces the closed form when |(K+1) ln rho| < 1e-3."""
    k = 1000
    lam = math.exp(sign * scale * 1e-3 / (k + 1))
    loss, sojourn_s = _mm1k_numeric(lam, 1.0, k)
    assert mm1k_loss_probability(lam, 1.0, k) == pytest.approx(loss, rel=1e-9)
    assert mm1k_sojourn_mean_s(lam, 1.0, k) == pytest.approx(sojourn_s, rel=1e-9)


@pytest.mark.parametrize("lam, mu", [(0.8, 1.0), (0.5, 2.0), (0.99, 1.0)])
def test_mm1k_large_capacity_approaches_mm1(lam, mu):
    assert mm1k_loss_probability(lam, mu, 100_000) == pytest.approx(0.0, abs=1e-12)
    expected_s = mm1_sojourn_mean_s(lam, mu)
    assert mm1k_sojourn_mean_s(lam, mu, 100_000) == pytest.approx(expected_s, rel=1e-9)


def test_mm1k_overload_limits():
    # rho -> infinity: always full, admitted customers find K-1 ahead -> T -> K / mu
    assert mm1k_loss_probability(1e9, 1.0, 5) == pytest.approx(1.0, abs=1e-8)
    assert mm1k_sojourn_mean_s(1e9, 1.0, 5) == pytest.approx(5.0, rel=1e-6)
    # large K, rho > 1: lost fraction -> 1 - 1/rho (throughput -> mu)
    assert mm1k_loss_probability(4.0, 1.0, 200) == pytest.approx(0.75)


def test_mm1k_no_arrivals():
    assert mm1k_loss_probability(0.0, 1.0, 3) == 0.0
    assert mm1k_sojourn_mean_s(0.0, 4.0, 3) == pytest.approx(0.25)


@given(st.floats(0.01, 100.0), st.floats(0.01, 100.0), st.integers(1, 300))
def test_mm1k_property_against_numeric(lam, mu, k):
    loss, sojourn_s = _mm1k_numeric(lam, mu, k)
    assert mm1k_loss_probability(lam, mu, k) == pytest.approx(loss, rel=1e-7, abs=1e-300)
    assert mm1k_sojourn_mean_s(lam, mu, k) == pytest.approx(sojourn_s, rel=1e-7)


# --- M/M/c ------------------------------------------------------------------


def _erlang_c_direct(c, a):
    """Erlang C from the textbook sum with factorials (small c only)."""
    top = a**c / math.factorial(c) / (1.0 - a / c)
    return top / (sum(a**n / math.factorial(n) for n in range(c)) + top)


def test_erlang_c_known_values():
    assert erlang_c(2, 1.0, 1.0) == pytest.approx(1.0 / 3.0)
    assert erlang_c(3, 2.0, 1.0) == pytest.approx(4.0 / 9.0)
    assert erlang_c(1, 0.7, 1.0) == pytest.approx(0.7)  # M/M/1: P(wait) = rho
    assert erlang_c(4, 0.0, 1.0) == 0.0


@pytest.mark.parametrize("c", [1, 2, 5, 10, 30, 80])
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.999])
def test_erlang_c_against_direct_sum(c, rho):
    assert erlang_c(c, rho * c * 2.0, 2.0) == pytest.approx(_erlang_c_direct(c, rho * c), rel=1e-9)


def test_erlang_c_large_c_is_finite():
    value = erlang_c(5000, 4900.0, 1.0)
    assert 0.0 < value < 1.0


def test_mmc_known_values():
    # M/M/2, a = 1: Wq = C / (c mu - lam) = (1/3) / 1
    assert mmc_wait_mean_s(2, 1.0, 1.0) == pytest.approx(1.0 / 3.0)
    assert mmc_sojourn_mean_s(2, 1.0, 1.0) == pytest.approx(4.0 / 3.0)


@pytest.mark.parametrize("lam, mu", [(0.8, 1.0), (3.0, 10.0)])
def test_mmc_with_one_server_is_mm1(lam, mu):
    assert mmc_sojourn_mean_s(1, lam, mu) == pytest.approx(mm1_sojourn_mean_s(lam, mu))


def test_mmc_pooling_beats_separate_queues():
    """Two pooled servers beat two separate M/M/1 queues with half the load each."""
    assert mmc_sojourn_mean_s(2, 1.6, 1.0) < mm1_sojourn_mean_s(0.8, 1.0)
    # and a single twice-as-fast server beats both on sojourn
    assert mm1_sojourn_mean_s(1.6, 2.0) < mmc_sojourn_mean_s(2, 1.6, 1.0)


def test_mmc_many_servers_light_load_is_service_time():
    assert mmc_sojourn_mean_s(100, 1.0, 1.0) == pytest.approx(1.0, rel=1e-12)


# --- Jackson tandem -------------------------------------------------------------


def test_jackson_single_station_is_mm1():
    assert jackson_tandem_sojourn_mean_s(0.8, [1.0]) == pytest.approx(5.0)


def test_jackson_tandem_is_sum():
    mus = [2.0, 5.0, 1.25]
    expected = sum(mm1_sojourn_mean_s(1.0, mu) for mu in mus)
    assert jackson_tandem_sojourn_mean_s(1.0, mus) == pytest.approx(expected)
    assert jackson_tandem_sojourn_mean_s(1.0, np.array(mus)) == pytest.approx(expected)
    # 1/(2-1) + 1/(5-1) + 1/(1.25-1) = 1 + 0.25 + 4
    assert expected == pytest.approx(5.25)


# --- non-preemptive priority ----------------------------------------------------


@pytest.mark.parametrize("lam, mu", [(0.8, 1.0), (0.3, 2.0)])
def test_priority_one_class_is_mg1(lam, mu):
    (wait_s,) = mm1_priority_nonpreemptive_wait_mean_s([lam], [mu])
    assert wait_s == pytest.approx(mg1_wait_mean_s(lam, 1.0 / mu, 1.0))
    assert wait_s == pytest.approx(mm1_sojourn_mean_s(lam, mu) - 1.0 / mu)


def test_priority_two_equal_classes_known_values():
    # W0 = 0.6, sigma = (0.3, 0.6): W = 0.6/0.7 and 0.6/(0.7*0.4)
    waits_s = mm1_priority_nonpreemptive_wait_mean_s([0.3, 0.3], [1.0, 1.0])
    np.testing.assert_allclose(waits_s, [0.6 / 0.7, 0.6 / 0.28])
    fcfs_wait_s = mm1_sojourn_mean_s(0.6, 1.0) - 1.0
    assert np.mean(waits_s) == pytest.approx(fcfs_wait_s)  # equal lam and mu
    assert waits_s[0] < fcfs_wait_s < waits_s[1]


_class_rates = st.tuples(st.one_of(st.just(0.0), st.floats(0.01, 5.0)), st.floats(0.1, 10.0))


@given(st.lists(_class_rates, min_size=1, max_size=6), st.floats(0.05, 0.95))
def test_priority_conservation_law(classes, load):
    """Kleinrock's conservation law: sum rho_k W_k = rho W0 / (1 - rho) [Kle76 eq. 3.21]."""
    lams = np.array([lam for lam, _ in classes])
    mus = np.array([mu for _, mu in classes])
    if lams.sum() == 0:
        lams[0] = 1.0
    lams *= load / np.sum(lams / mus)  # scale to total utilisation `load`
    waits_s = mm1_priority_nonpreemptive_wait_mean_s(lams, mus)
    rhos = lams / mus
    residual_s = np.sum(lams / mus**2)
    assert np.sum(rhos * waits_s) == pytest.approx(load * residual_s / (1.0 - load), rel=1e-9)
    assert np.all(np.diff(waits_s) >= -1e-12 * waits_s[:-1])  # lower priority never waits less


# --- cross-checks --------------------------------------------------------------


@given(st.floats(0.0, 0.99), st.floats(0.01, 1e4))
def test_single_server_forms_agree(rho, mu):
    lam = rho * mu
    expected_s = mm1_sojourn_mean_s(lam, mu)
    assert mg1_sojourn_mean_s(lam, 1.0 / mu, 1.0) == pytest.approx(expected_s, rel=1e-9)
    assert mmc_sojourn_mean_s(1, lam, mu) == pytest.approx(expected_s, rel=1e-9)
    assert jackson_tandem_sojourn_mean_s(lam, [mu]) == pytest.approx(expected_s, rel=1e-9)
    (wait_s,) = mm1_priority_nonpreemptive_wait_mean_s([lam], [mu])
    assert wait_s + 1.0 / mu == pytest.approx(expected_s, rel=1e-9)
    assert md1_sojourn_mean_s(lam, 1.0 / mu) <= expected_s


# --- bad input ------------------------------------------------------------------


def _raises(field):
    return pytest.raises(ConfigError, match="^" + re.escape(field) + ": ")


_prio = mm1_priority_nonpreemptive_wait_mean_s


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: mm1_sojourn_mean_s(1.0, 1.0), "arrival_rate_per_s"),
        (lambda: mm1_sojourn_mean_s(2.0, 1.0), "arrival_rate_per_s"),
        (lambda: mm1_sojourn_mean_s(-0.1, 1.0), "arrival_rate_per_s"),
        (lambda: mm1_sojourn_mean_s(0.5, 0.0), "service_rate_per_s"),
        (lambda: mm1_sojourn_mean_s(0.5, -1.0), "service_rate_per_s"),
        (lambda: mm1_sojourn_mean_s(math.nan, 1.0), "arrival_rate_per_s"),
        (lambda: mm1_sojourn_mean_s(0.5, math.inf), "service_rate_per_s"),
        (lambda: mm1_sojourn_mean_s("0.5", 1.0), "arrival_rate_per_s"),
        (lambda: mm1_sojourn_mean_s(True, 1.0), "arrival_rate_per_s"),
        (lambda: mm1_sojourn_cdf(1.0, 1.0, 1.0), "arrival_rate_per_s"),
        (lambda: mm1_sojourn_cdf(math.nan, 0.5, 1.0), "t_s"),
        (lambda: mm1_sojourn_cdf("soon", 0.5, 1.0), "t_s"),
        (lambda: md1_sojourn_mean_s(1.0, 1.0), "arrival_rate_per_s"),
        (lambda: md1_sojourn_mean_s(0.5, 0.0), "service_time_s"),
        (lambda: mg1_sojourn_mean_s(0.5, 1.0, -0.5), "scv_service"),
        (lambda: mg1_sojourn_mean_s(0.5, -1.0, 1.0), "mean_service_s"),
        (lambda: mg1_sojourn_mean_s(2.0, 0.5, 1.0), "arrival_rate_per_s"),
        (lambda: mm1k_loss_probability(1.0, 1.0, 0), "capacity"),
        (lambda: mm1k_loss_probability(1.0, 1.0, 2.5), "capacity"),
        (lambda: mm1k_loss_probability(1.0, 1.0, True), "capacity"),
        (lambda: mm1k_sojourn_mean_s(-1.0, 1.0, 3), "arrival_rate_per_s"),
        (lambda: mm1k_sojourn_mean_s(1.0, 0.0, 3), "service_rate_per_s"),
        (lambda: erlang_c(0, 0.5, 1.0), "servers"),
        (lambda: erlang_c(1.5, 0.5, 1.0), "servers"),
        (lambda: erlang_c(2, 2.0, 1.0), "arrival_rate_per_s"),
        (lambda: mmc_wait_mean_s(2, 3.0, 1.0), "arrival_rate_per_s"),
        (lambda: mmc_sojourn_mean_s(-1, 0.5, 1.0), "servers"),
        (lambda: jackson_tandem_sojourn_mean_s(1.0, [2.0, 1.0]), "service_rates_per_s[1]"),
        (lambda: jackson_tandem_sojourn_mean_s(1.0, [2.0, -3.0]), "service_rates_per_s[1]"),
        (lambda: jackson_tandem_sojourn_mean_s(1.0, []), "service_rates_per_s"),
        (lambda: jackson_tandem_sojourn_mean_s(1.0, 5.0), "service_rates_per_s"),
        (lambda: _prio([0.5, 0.6], [1.0, 1.0]), "arrival_rates_per_s"),
        (lambda: _prio([0.5, -0.1], [1.0, 1.0]), "arrival_rates_per_s[1]"),
        (lambda: _prio([0.1], [1.0, 1.0]), "service_rates_per_s"),
        (lambda: _prio([0.1, 0.1], [1.0, 0.0]), "service_rates_per_s[1]"),
        (lambda: _prio([], []), "arrival_rates_per_s"),
    ],
)
def test_bad_input_names_the_argument(call, field):
    with _raises(field):
        call()


def test_unstable_message_mentions_rho():
    with pytest.raises(ConfigError, match=r"rho = 1\.25"):
        mm1_sojourn_mean_s(1.25, 1.0)
