"""Closed-form queueing results used to check the simulator.

All rates are in events per second and all times in seconds. Every function
validates its arguments and raises :class:`pubsim.sim.errors.ConfigError` naming the
offending argument for negative or non-finite rates, non-integer server counts
or capacities, and unstable systems (utilisation ``rho >= 1`` for queues with
unbounded waiting room).

References
----------
.. [Kle75] L. Kleinrock, *Queueing Systems, Volume 1: Theory*, Wiley, 1975.
.. [Kle76] L. Kleinrock, *Queueing Systems, Volume 2: Computer Applications*,
   Wiley, 1976.
.. [GH08] D. Gross, J. F. Shortle, J. M. Thompson, C. M. Harris,
   *Fundamentals of Queueing Theory*, 4th ed., Wiley, 2008.
.. [Cob54] A. Cobham, "Priority assignment in waiting line problems",
   *Operations Research* 2(1):70-76, 1954.
.. [Jac57] J. R. Jackson, "Networks of waiting lines", *Operations Research*
   5(4):518-521, 1957.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .errors import ConfigError

Rates = Sequence[float] | np.ndarray
"""A sequence of numbers, one per station or class."""

__all__ = [
    "mm1_sojourn_mean_s",
    "mm1_sojourn_cdf",
    "mg1_wait_mean_s",
    "mg1_sojourn_mean_s",
    "md1_sojourn_mean_s",
    "mm1k_loss_probability",
    "mm1k_sojourn_mean_s",
    "erlang_c",
    "mmc_wait_mean_s",
    "mmc_sojourn_mean_s",
    "jackson_tandem_sojourn_mean_s",
    "mm1_priority_nonpreemptive_wait_mean_s",
    "mg1_priority_nonpreemptive_wait_mean_s",
    "qos_first_arrival_attempts_mean",
    "qos1_sends_mean",
    "qos1_duplicates_mean",
    "window_throughput_per_s",
    "mva",
]


# --- argument checks --------------------------------------------------------


def _real(field: str, value: Any, expected: str) -> float:
    """``value`` as a finite float, or ConfigError(field, value, expected)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ConfigError(field, value, expected)
    return float(value)


def _non_negative(field: str, value: Any) -> float:
    """A finite number >= 0 (arrival rates, squared coefficients of variation)."""
    number = _real(field, value, "a finite number >= 0")
    if number < 0:
        raise ConfigError(field, value, "a finite number >= 0")
    return number


def _positive(field: str, value: Any) -> float:
    """A finite number > 0 (service rates, service times)."""
    number = _real(field, value, "a finite number > 0")
    if number <= 0:
        raise ConfigError(field, value, "a finite number > 0")
    return number


def _positive_int(field: str, value: Any) -> int:
    """An integer >= 1 (numbers of servers, capacities)."""
    if isinstance(value, bool):
        raise ConfigError(field, value, "an integer >= 1")
    try:
        number = operator.index(value)
    except TypeError:
        raise ConfigError(field, value, "an integer >= 1") from None
    if number < 1:
        raise ConfigError(field, value, "an integer >= 1")
    return number


def _stable(field: str, value: Any, rho: float) -> None:
    """Raise unless the utilisation ``rho`` is below 1 (stability condition)."""
    if rho >= 1:
        raise ConfigError(field, value, f"a value giving utilisation rho < 1 for a stable queue (got rho = {rho:.6g})")


def _rates(arrival_rate_per_s: float, service_rate_per_s: float) -> tuple[float, float]:
    """Validated (lambda, mu), 1/s."""
    return (
        _non_negative("arrival_rate_per_s", arrival_rate_per_s),
        _positive("service_rate_per_s", service_rate_per_s),
    )


# --- M/M/1 ------------------------------------------------------------------


def mm1_sojourn_mean_s(arrival_rate_per_s: float, service_rate_per_s: float) -> float:
    """Mean sojourn time (wait + service) of an M/M/1 FCFS queue.

    ``T = 1 / (mu - lambda)`` ([Kle75]_ eq. 3.26; [GH08]_ section 2.2).

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    service_rate_per_s : float
        Exponential service rate mu, 1/s; > lambda.

    Returns
    -------
    float
        Mean sojourn time, s.
    """
    lam, mu = _rates(arrival_rate_per_s, service_rate_per_s)
    _stable("arrival_rate_per_s", arrival_rate_per_s, lam / mu)
    return 1.0 / (mu - lam)


def mm1_sojourn_cdf(t_s: ArrayLike, arrival_rate_per_s: float, service_rate_per_s: float) -> float | np.ndarray:
    """Distribution function of the M/M/1 FCFS sojourn time.

    The sojourn time is exponential with rate ``mu - lambda``:
    ``P(T <= t) = 1 - exp(-(mu - lambda) t)`` for ``t >= 0``, else 0
    ([Kle75]_ eq. 3.56; [GH08]_ section 2.2.4).

    Parameters
    ----------
    t_s : float or array_like
        Time(s), s; negative values give 0, ``inf`` gives 1.
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    service_rate_per_s : float
        Exponential service rate mu, 1/s; > lambda.

    Returns
    -------
    float or numpy.ndarray
        Probability, same shape as ``t_s``.
    """
    lam, mu = _rates(arrival_rate_per_s, service_rate_per_s)
    _stable("arrival_rate_per_s", arrival_rate_per_s, lam / mu)
    t = _times("t_s", t_s)
    cdf = -np.expm1(-(mu - lam) * np.maximum(t, 0.0))
    return float(cdf) if cdf.ndim == 0 else cdf


def _times(field: str, t_s: ArrayLike) -> np.ndarray:
    """``t_s`` as a float array without NaN."""
    try:
        t = np.asarray(t_s, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(field, t_s, "a time or array of times in seconds") from None
    if np.isnan(t).any():
        raise ConfigError(field, t_s, "times that are not NaN")
    return t


# --- M/G/1 and M/D/1 --------------------------------------------------------


def mg1_wait_mean_s(arrival_rate_per_s: float, mean_service_s: float, scv_service: float) -> float:
    """Mean waiting time in queue (excluding service) of an M/G/1 FCFS queue.

    Pollaczek-Khinchine mean-value formula ([Kle75]_ eq. 5.105; [GH08]_ 5.1.1):
    ``W = lambda E[S^2] / (2 (1 - rho)) = rho E[S] (1 + c_s^2) / (2 (1 - rho))``
    with ``rho = lambda E[S]`` and ``E[S^2] = E[S]^2 (1 + c_s^2)``.

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    mean_service_s : float
        Mean service time E[S], s; > 0.
    scv_service : float
        Squared coefficient of variation of the service time,
        ``c_s^2 = Var[S] / E[S]^2`` (0 deterministic, 1 exponential); >= 0.

    Returns
    -------
    float
        Mean wait, s.
    """
    lam = _non_negative("arrival_rate_per_s", arrival_rate_per_s)
    mean_s = _positive("mean_service_s", mean_service_s)
    scv = _non_negative("scv_service", scv_service)
    rho = lam * mean_s
    _stable("arrival_rate_per_s", arrival_rate_per_s, rho)
    return rho * mean_s * (1.0 + scv) / (2.0 * (1.0 - rho))


def mg1_sojourn_mean_s(arrival_rate_per_s: float, mean_service_s: float, scv_service: float) -> float:
    """Mean sojourn time of an M/G/1 FCFS queue, ``T = W + E[S]``.

    ``W`` is the Pollaczek-Khinchine mean wait of :func:`mg1_wait_mean_s`
    ([Kle75]_ eq. 5.106).

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    mean_service_s : float
        Mean service time E[S], s; > 0.
    scv_service : float
        Squared coefficient of variation of the service time; >= 0.

    Returns
    -------
    float
        Mean sojourn time, s.
    """
    return mg1_wait_mean_s(arrival_rate_per_s, mean_service_s, scv_service) + float(mean_service_s)


def md1_sojourn_mean_s(arrival_rate_per_s: float, service_time_s: float) -> float:
    """Mean sojourn time of an M/D/1 FCFS queue.

    Pollaczek-Khinchine with ``c_s^2 = 0`` ([Kle75]_ eq. 5.106; [GH08]_ 5.1.1):
    ``T = D + rho D / (2 (1 - rho))`` with ``rho = lambda D``.

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    service_time_s : float
        Constant service time D, s; > 0.

    Returns
    -------
    float
        Mean sojourn time, s.
    """
    lam = _non_negative("arrival_rate_per_s", arrival_rate_per_s)
    service_s = _positive("service_time_s", service_time_s)
    _stable("arrival_rate_per_s", arrival_rate_per_s, lam * service_s)
    return mg1_sojourn_mean_s(lam, service_s, 0.0)


# --- M/M/1/K ----------------------------------------------------------------


def _mm1k_args(arrival_rate_per_s: float, service_rate_per_s: float, capacity: int) -> tuple[float, float, int]:
    """Validated (lambda, mu, K) of an M/M/1/K queue (any rho is stable)."""
    lam, mu = _rates(arrival_rate_per_s, service_rate_per_s)
    return lam, mu, _positive_int("capacity", capacity)


def mm1k_loss_probability(arrival_rate_per_s: float, service_rate_per_s: float, capacity: int) -> float:
    """Blocking probability of an M/M/1/K queue (probability the system is full).

    ``P_K = (1 - rho) rho^K / (1 - rho^(K+1))`` for ``rho != 1`` and
    ``1 / (K + 1)`` for ``rho = 1`` ([GH08]_ eq. 2.32; [Kle75]_ section 3.6).
    By PASTA this is the fraction of arrivals lost. Evaluated with
    ``x = ln rho`` as ``expm1(x) e^(K x) / expm1((K+1) x)`` for ``rho < 1`` and
    ``expm1(x) / (expm1(x) - expm1(-K x))`` for ``rho > 1``, which neither
    overflows nor cancels near ``rho = 1``.

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0 (may exceed mu).
    service_rate_per_s : float
        Exponential service rate mu, 1/s; > 0.
    capacity : int
        K, the most customers in the system, including the one in service; >= 1.

    Returns
    -------
    float
        Loss probability, in [0, 1).
    """
    lam, mu, k = _mm1k_args(arrival_rate_per_s, service_rate_per_s, capacity)
    if lam == 0:
        return 0.0
    x = math.log(lam) - math.log(mu)
    if x == 0:
        return 1.0 / (k + 1)
    if x < 0:
        return math.expm1(x) * math.exp(k * x) / math.expm1((k + 1) * x)
    return math.expm1(x) / (math.expm1(x) - math.expm1(-k * x))


def _mm1k_number_mean(x: float, k: int) -> float:
    """Mean number in an M/M/1/K system, ``x = ln rho``.

    ``L = rho / (1 - rho) - (K+1) rho^(K+1) / (1 - rho^(K+1))`` ([GH08]_
    eq. 2.34). Near ``rho = 1`` the two terms cancel, so for
    ``|(K+1) x| < 1e-3`` the series of the truncated geometric distribution is
    used instead: ``L = K/2 + (N^2 - 1) x / 12 - (N^4 - 1) x^3 / 720``, with
    ``N = K + 1`` (cumulants of the uniform distribution on 0..K).
    """
    n = k + 1
    if abs(n * x) < 1e-3:
        return k / 2.0 + (n * n - 1) * x / 12.0 - (n**4 - 1) * x**3 / 720.0
    if x < 0:
        rho = math.exp(x)
        return -rho / math.expm1(x) + n * math.exp(n * x) / math.expm1(n * x)
    # rho > 1: divide the second term by rho^(K+1) to avoid overflow
    return -math.exp(x) / math.expm1(x) + n / (-math.expm1(-n * x))


def mm1k_sojourn_mean_s(arrival_rate_per_s: float, service_rate_per_s: float, capacity: int) -> float:
    """Mean sojourn time of the admitted customers of an M/M/1/K queue.

    Little's law on admitted customers ([GH08]_ eq. 2.35):
    ``T = L / (lambda (1 - P_K))`` with ``L`` the mean number in system
    (see :func:`mm1k_loss_probability` for ``P_K``). With no arrivals the
    limit ``1 / mu`` is returned.

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0 (may exceed mu).
    service_rate_per_s : float
        Exponential service rate mu, 1/s; > 0.
    capacity : int
        K, the most customers in the system, including the one in service; >= 1.

    Returns
    -------
    float
        Mean sojourn time of admitted customers, s.
    """
    lam, mu, k = _mm1k_args(arrival_rate_per_s, service_rate_per_s, capacity)
    if lam == 0:
        return 1.0 / mu
    x = math.log(lam) - math.log(mu)
    admitted_per_s = lam * (1.0 - mm1k_loss_probability(lam, mu, k))
    return _mm1k_number_mean(x, k) / admitted_per_s


# --- M/M/c ------------------------------------------------------------------


def _mmc_args(servers: int, arrival_rate_per_s: float, service_rate_per_s: float) -> tuple[int, float, float]:
    """Validated (c, lambda, mu) of a stable M/M/c queue."""
    c = _positive_int("servers", servers)
    lam, mu = _rates(arrival_rate_per_s, service_rate_per_s)
    _stable("arrival_rate_per_s", arrival_rate_per_s, lam / (c * mu))
    return c, lam, mu


def _erlang_b(c: int, offered_load: float) -> float:
    """Erlang B blocking probability by the stable recursion
    ``B(0) = 1, B(n) = a B(n-1) / (n + a B(n-1))`` ([GH08]_ eq. 2.49)."""
    b = 1.0
    for n in range(1, c + 1):
        b = offered_load * b / (n + offered_load * b)
    return b


def erlang_c(servers: int, arrival_rate_per_s: float, service_rate_per_s: float) -> float:
    """Probability that an arrival must wait in an M/M/c queue (Erlang C).

    ``C(c, a) = [a^c / (c! (1 - rho))] / [sum_{n<c} a^n / n! + a^c / (c! (1 - rho))]``
    with ``a = lambda / mu`` and ``rho = a / c`` ([Kle75]_ eq. 3.40;
    [GH08]_ eq. 2.28), computed from Erlang B as
    ``C = c B / (c - a (1 - B))`` to stay finite for large ``c``.

    Parameters
    ----------
    servers : int
        Number of servers c; >= 1.
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    service_rate_per_s : float
        Exponential service rate of each server mu, 1/s; ``lambda < c mu``.

    Returns
    -------
    float
        Probability of waiting, in [0, 1).
    """
    c, lam, mu = _mmc_args(servers, arrival_rate_per_s, service_rate_per_s)
    offered_load = lam / mu
    b = _erlang_b(c, offered_load)
    return c * b / (c - offered_load * (1.0 - b))


def mmc_wait_mean_s(servers: int, arrival_rate_per_s: float, service_rate_per_s: float) -> float:
    """Mean waiting time in queue of an M/M/c FCFS queue.

    ``W = C(c, a) / (c mu - lambda)`` ([Kle75]_ eq. 3.43; [GH08]_ eq. 2.30).

    Parameters
    ----------
    servers : int
        Number of servers c; >= 1.
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    service_rate_per_s : float
        Exponential service rate of each server mu, 1/s; ``lambda < c mu``.

    Returns
    -------
    float
        Mean wait, s.
    """
    c, lam, mu = _mmc_args(servers, arrival_rate_per_s, service_rate_per_s)
    return erlang_c(c, lam, mu) / (c * mu - lam)


def mmc_sojourn_mean_s(servers: int, arrival_rate_per_s: float, service_rate_per_s: float) -> float:
    """Mean sojourn time of an M/M/c FCFS queue, ``T = W + 1 / mu``.

    ([GH08]_ eq. 2.30; see :func:`mmc_wait_mean_s`.)

    Parameters
    ----------
    servers : int
        Number of servers c; >= 1.
    arrival_rate_per_s : float
        Poisson arrival rate lambda, 1/s; >= 0.
    service_rate_per_s : float
        Exponential service rate of each server mu, 1/s; ``lambda < c mu``.

    Returns
    -------
    float
        Mean sojourn time, s.
    """
    wait_s = mmc_wait_mean_s(servers, arrival_rate_per_s, service_rate_per_s)
    return wait_s + 1.0 / float(service_rate_per_s)


# --- networks and priorities ------------------------------------------------


def _rate_list(field: str, values: Any, check: Callable[[str, Any], float]) -> list[float]:
    """Validate a non-empty sequence of rates; errors name ``field[i]``."""
    try:
        items = list(values)
    except TypeError:
        raise ConfigError(field, values, "a non-empty sequence of rates in 1/s") from None
    if not items:
        raise ConfigError(field, values, "a non-empty sequence of rates in 1/s")
    return [check(f"{field}[{i}]", value) for i, value in enumerate(items)]


def jackson_tandem_sojourn_mean_s(arrival_rate_per_s: float, service_rates_per_s: Rates) -> float:
    """Mean end-to-end sojourn time through M/M/1 stations in series.

    By Jackson's theorem ([Jac57]_; [Kle75]_ section 4.8; [GH08]_ section
    4.1) each station behaves as an independent M/M/1 queue fed at rate
    lambda, so ``T = sum_i 1 / (mu_i - lambda)``.

    Parameters
    ----------
    arrival_rate_per_s : float
        Poisson arrival rate lambda into the first station, 1/s; >= 0.
    service_rates_per_s : sequence of float
        Exponential service rate mu_i of each station, 1/s; each > lambda.

    Returns
    -------
    float
        Mean end-to-end sojourn time, s.
    """
    lam = _non_negative("arrival_rate_per_s", arrival_rate_per_s)
    mus = _rate_list("service_rates_per_s", service_rates_per_s, _positive)
    for i, mu in enumerate(mus):
        _stable(f"service_rates_per_s[{i}]", mu, lam / mu)
    return sum(1.0 / (mu - lam) for mu in mus)


def mm1_priority_nonpreemptive_wait_mean_s(arrival_rates_per_s: Rates, service_rates_per_s: Rates) -> np.ndarray:
    """Mean waiting time in queue of each class of a non-preemptive priority M/G/1
    queue with exponential service times (M/M/1 with K classes).

    Cobham's formula ([Cob54]_; [Kle76]_ eq. 3.30; [GH08]_ section 3.4.1):
    ``W_k = W_0 / ((1 - sigma_{k-1}) (1 - sigma_k))`` with
    ``sigma_k = sum_{i<=k} rho_i``, ``sigma_{-1} = 0``, ``rho_i = lambda_i / mu_i``
    and the mean residual work ``W_0 = sum_i lambda_i E[S_i^2] / 2
    = sum_i lambda_i / mu_i^2`` since ``E[S_i^2] = 2 / mu_i^2``.
    Class 0 has the highest priority; FCFS within a class.

    Parameters
    ----------
    arrival_rates_per_s : sequence of float
        Poisson arrival rate lambda_k of each class, 1/s; >= 0.
    service_rates_per_s : sequence of float
        Exponential service rate mu_k of each class, 1/s; > 0; same length.
        The total utilisation ``sum rho_k`` must be < 1.

    Returns
    -------
    numpy.ndarray
        Mean wait of each class (excluding service), s.
    """
    lams = np.array(_rate_list("arrival_rates_per_s", arrival_rates_per_s, _non_negative))
    mus = np.array(_rate_list("service_rates_per_s", service_rates_per_s, _positive))
    if len(lams) != len(mus):
        raise ConfigError(
            "service_rates_per_s", service_rates_per_s, f"one rate per class ({len(lams)} arrival rates given)"
        )
    # exponential service: mean 1/mu, squared coefficient of variation 1
    return mg1_priority_nonpreemptive_wait_mean_s(arrival_rates_per_s, 1.0 / mus, np.ones(len(mus)))


# --- acknowledged delivery on a lossy link (models.mechanisms.qos.rules) ----------------------
def _loss(p: Any) -> float:
    p = _real("loss_probability", p, "a probability in [0, 1)")
    if not 0.0 <= p < 1.0:
        raise ConfigError("loss_probability", p, "a probability in [0, 1)")
    return p


def qos_first_arrival_attempts_mean(loss_probability: float) -> float:
    """Mean sends until a packet lost independently with p first arrives: 1/(1-p)."""
    return 1.0 / (1.0 - _loss(loss_probability))


def qos1_sends_mean(loss_probability: float) -> float:
    """Mean PUBLISH sends of a QoS 1 exchange, 1/(1-p)^2.

    Each send ends the exchange only if the PUBLISH and its PUBACK both get
    through, probability (1-p)^2, independently of earlier sends: the number
    of sends is geometric with that success probability.
    """
    return 1.0 / (1.0 - _loss(loss_probability)) ** 2


def qos1_duplicates_mean(loss_probability: float) -> float:
    """Mean duplicate deliveries per QoS 1 message, p/(1-p).

    After the PUBLISH first arrives, each PUBACK is lost with p; a lost
    PUBACK makes the sender resend until the PUBLISH arrives again, which
    the receiver delivers again and acknowledges again. The number of
    duplicates D is the number of lost PUBACKs before one gets through:
    P(D = d) = p^d (1-p), E[D] = p/(1-p). (Check: sends = first arrival
    1/(1-p) plus D geometric resend runs of mean 1/(1-p) each, total
    1/(1-p) + p/(1-p)^2 = 1/(1-p)^2, as in :func:`qos1_sends_mean`.)
    """
    p = _loss(loss_probability)
    return p / (1.0 - p)


def window_throughput_per_s(window: int, service_s: float, round_trip_s: float) -> float:
    """Most messages per second of one connection with an in-flight window.

    ``window`` messages may be un-acknowledged; a slot is busy from the
    start of a message's transmission until its acknowledgement arrives,
    ``service_s + round_trip_s`` later (round trip: propagation both ways,
    receiver's processing, acknowledgement's serialization). The transmitter
    also caps the rate at 1/service: ``min(1/service, W/(service + RTT))``.
    """
    w = _positive_int("window", window)
    service = _positive("service_s", service_s)
    rtt = _non_negative("round_trip_s", round_trip_s)
    return min(1.0 / service, w / (service + rtt))


def mg1_priority_nonpreemptive_wait_mean_s(
    arrival_rates_per_s: Rates, mean_services_s: Rates, scv_services: Rates
) -> np.ndarray:
    """Mean waiting time in queue of each class of a non-preemptive priority
    M/G/1 queue with general service times.

    Cobham's formula ([Cob54]_; [Kle76]_ eq. 3.30; [GH08]_ section 3.4.1):
    ``W_k = W_0 / ((1 - sigma_{k-1}) (1 - sigma_k))`` with
    ``sigma_k = sum_{i<=k} rho_i``, ``rho_i = lambda_i E[S_i]`` and the mean
    residual work ``W_0 = sum_i lambda_i E[S_i^2] / 2`` where
    ``E[S_i^2] = E[S_i]^2 (1 + c_i^2)``. Class 0 has the highest priority;
    FCFS within a class. With ``c_i^2 = 1`` this is
    :func:`mm1_priority_nonpreemptive_wait_mean_s`.

    Parameters
    ----------
    arrival_rates_per_s : sequence of float
        Poisson arrival rate lambda_k of each class, 1/s; >= 0.
    mean_services_s : sequence of float
        Mean service time E[S_k] of each class, s; > 0.
    scv_services : sequence of float
        Squared coefficient of variation of each class's service time
        (0 deterministic, 1 exponential); >= 0.

    Returns
    -------
    numpy.ndarray
        Mean wait of each class (excluding service), s.
    """
    lams = np.array(_rate_list("arrival_rates_per_s", arrival_rates_per_s, _non_negative))
    means = np.array(_rate_list("mean_services_s", mean_services_s, _positive))
    scvs = np.array(_rate_list("scv_services", scv_services, _non_negative))
    for name, arr in (("mean_services_s", means), ("scv_services", scvs)):
        if len(arr) != len(lams):
            raise ConfigError(name, arr.tolist(), f"one value per class ({len(lams)} arrival rates given)")
    sigma = np.cumsum(lams * means)
    _stable("arrival_rates_per_s", arrival_rates_per_s, float(sigma[-1]))
    residual_s = float(np.sum(lams * means**2 * (1.0 + scvs))) / 2.0
    sigma_before = np.concatenate(([0.0], sigma[:-1]))
    return residual_s / ((1.0 - sigma_before) * (1.0 - sigma))


# --- closed networks: Mean Value Analysis -------------------------------------


def mva(demands_s: Rates, delay_s: float, customers: int) -> dict[str, Any]:
    """Exact Mean Value Analysis of a single-class closed product-form network.

    Reiser & Lavenberg (1980), "Mean-value analysis of closed multichain
    queuing networks", *J. ACM* 27(2):313-322. For ``n = 1 .. N``::

        R_k(n) = D_k (1 + Q_k(n - 1))      (FCFS exponential single servers)
        X(n)   = n / (Z + sum_k R_k(n))
        Q_k(n) = X(n) R_k(n)

    with ``D_k`` the service demand per cycle at queue k and ``Z`` the total
    delay (infinite-server stations: think time, propagation; any
    distribution, BCMP).

    Parameters
    ----------
    demands_s : sequence of float
        Mean demand per cycle at each queueing station, s; > 0.
    delay_s : float
        Total delay per cycle outside the queues, s; >= 0.
    customers : int
        N, customers in the network (a request/reply client with window W
        contributes W).

    Returns
    -------
    dict
        ``throughput_per_s`` X(N), ``cycle_s`` (N / X = Z + sum R_k, the mean
        round trip including delays), ``residence_s`` (R_k per queue),
        ``queue`` (Q_k per queue), ``utilization`` (X D_k).
    """
    demands = np.array(_rate_list("demands_s", demands_s, _positive))
    z = _non_negative("delay_s", delay_s)
    n_max = _positive_int("customers", customers)
    q = np.zeros(len(demands))
    for n in range(1, n_max + 1):
        r = demands * (1.0 + q)
        x = n / (z + r.sum())
        q = x * r
    return {
        "throughput_per_s": float(x),
        "cycle_s": float(n_max / x),
        "residence_s": r,
        "queue": q,
        "utilization": x * demands,
    }
