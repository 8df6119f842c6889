"""The engine against closed-form queueing results.

Each test runs seeded, independent replications and checks that the
theoretical value lies inside the 99 % confidence interval of the replication
means (Student t), and that the point estimate is within a stated relative
error. The seeds are fixed, so a test fails every time or never.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pubsim.models import topology as T
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant, Exponential
from pubsim.testing import single_queue, tandem

REPS = 10


def _replicate(graph, metric, *, duration_s, warmup_s, seed):
    values = [
        metric(simulate(graph, duration_s=duration_s, warmup_s=warmup_s, seed=seed, replication=r, record="stream"))
        for r in range(REPS)
    ]
    return np.array(values)


def _ci(values, level=0.99):
    mean = values.mean()
    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return mean, half


def _assert_matches(values, expected, rel):
    mean, half = _ci(values)
    assert abs(mean - expected) <= half, f"theory {expected:.6g} outside {mean:.6g} ± {half:.3g}"
    assert abs(mean - expected) <= rel * expected, f"mean {mean:.6g} vs theory {expected:.6g}"


def _mean_latency(result):
    return result.summary()["latency_mean_s"]


def test_mm1_sojourn_mean():
    lam, mu = 800.0, 1000.0
    g = single_queue(rate_per_s=lam, service=Exponential(mean_value=1 / mu))
    values = _replicate(g, _mean_latency, duration_s=60, warmup_s=5, seed=101)
    _assert_matches(values, theory.mm1_sojourn_mean_s(lam, mu), rel=0.05)


def test_mm1_sojourn_distribution():
    lam, mu = 500.0, 1000.0
    g = single_queue(rate_per_s=lam, service=Exponential(mean_value=1 / mu))
    r = simulate(g, duration_s=200, warmup_s=5, seed=7)
    lat = r.deliveries().query("publish_time_s >= 5")["latency_s"].to_numpy()
    # sojourn in M/M/1 FIFO is exponential with rate mu - lambda (Kleinrock 1975, §3.2)
    ks = stats.kstest(lat, "expon", args=(0, 1 / (mu - lam)))
    assert ks.statistic < 0.01


def test_md1_sojourn_mean():
    lam, service_s = 800.0, 1e-3
    g = single_queue(rate_per_s=lam, service=Constant(value=service_s))
    values = _replicate(g, _mean_latency, duration_s=60, warmup_s=5, seed=202)
    _assert_matches(values, theory.md1_sojourn_mean_s(lam, service_s), rel=0.05)


@pytest.mark.parametrize("k, rho", [(5, 1.0), (3, 0.7), (10, 1.3)])
def test_mm1k_loss_probability(k, rho):
    mu = 1000.0
    lam = rho * mu
    g = single_queue(rate_per_s=lam, service=Exponential(mean_value=1 / mu), queue_messages=k - 1)
    values = _replicate(g, lambda r: r.summary()["loss_rate_buffer_full"], duration_s=30, warmup_s=2, seed=303 + k)
    _assert_matches(values, theory.mm1k_loss_probability(lam, mu, k), rel=0.05)


def test_mmc_sojourn_mean():
    c, lam, mu = 3, 2400.0, 1000.0
    g = single_queue(rate_per_s=lam, service=Exponential(mean_value=1 / mu), workers=c, n_publishers=4)
    values = _replicate(g, _mean_latency, duration_s=30, warmup_s=2, seed=404)
    _assert_matches(values, theory.mmc_sojourn_mean_s(c, lam, mu), rel=0.05)


def test_mmc_waiting_probability_erlang_c():
    c, lam, mu = 2, 1500.0, 1000.0
    g = single_queue(rate_per_s=lam, service=Exponential(mean_value=1 / mu), workers=c)
    service_s = 1 / mu

    def waited(result):
        d = result.deliveries().query("publish_time_s >= 2")
        # a message waited if its sojourn exceeds what service alone explains:
        # compare with the station's mean waiting via Little: P(wait) estimated
        # from mean waiting time = C(c, a) / (c mu - lam)
        return (d["latency_s"].mean() - service_s) * (c * mu - lam)

    values = np.array([waited(simulate(g, duration_s=30, warmup_s=2, seed=505, replication=r)) for r in range(REPS)])
    _assert_matches(values, theory.erlang_c(c, lam, mu), rel=0.06)


def test_jackson_tandem_sojourn_mean():
    lam = 800.0
    means = [1e-3, 0.8e-3, 0.5e-3]
    g = tandem(rate_per_s=lam, services=[Exponential(mean_value=m) for m in means])
    values = _replicate(g, _mean_latency, duration_s=40, warmup_s=4, seed=606)
    _assert_matches(values, theory.jackson_tandem_sojourn_mean_s(lam, [1 / m for m in means]), rel=0.05)


def test_utilization_and_queue_length_match_theory():
    lam, mu = 700.0, 1000.0
    g = single_queue(rate_per_s=lam, service=Exponential(mean_value=1 / mu))
    rows = [
        simulate(g, duration_s=40, warmup_s=2, seed=707, replication=r)
        .stations()
        .set_index("station")
        .loc["broker:broker"]
        for r in range(REPS)
    ]
    util = np.array([r["utilization"] for r in rows])
    waiting = np.array([r["mean_waiting"] for r in rows])
    rho = lam / mu
    _assert_matches(util, rho, rel=0.02)
    _assert_matches(waiting, rho**2 / (1 - rho), rel=0.06)  # Lq of M/M/1


def test_topology_builder_gives_one_broker_station():
    g = single_queue(rate_per_s=10.0, service=Constant(value=1e-3))
    assert len(T.brokers(g)) == 1


def test_nonpreemptive_priority_waits_cobham():
    """Two priority classes at one broker: mean waits per class (Cobham 1954)."""
    from pubsim.models.params.broker import BrokerParams
    from pubsim.models.params.client import PublisherParams, SubscriberParams
    from pubsim.testing import ZERO_LINK

    mu = 1000.0
    lams = {2: 300.0, 0: 500.0}  # priority 2 (served first) and 0
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=1 / mu), scheduling="priority")
    pubs = {f"prio{p}": PublisherParams(topics=(f"t{p}",), rate_per_s=lam, priority=p) for p, lam in lams.items()}
    subs = {f"s{p}": SubscriberParams(subscriptions=(f"t{p}",)) for p in lams}
    g = T.star(broker=broker, publishers=pubs, subscribers=subs, link=ZERO_LINK, protocol="none")
    expected = theory.mm1_priority_nonpreemptive_wait_mean_s([lams[2], lams[0]], [mu, mu]) + 1 / mu

    def per_class(r):
        d = r.deliveries().query("publish_time_s >= 2")
        return d.groupby("publisher", observed=True)["latency_s"].mean()

    runs = [per_class(simulate(g, duration_s=30, warmup_s=2, seed=808, replication=r)) for r in range(REPS)]
    for name, exp in (("prio2", expected[0]), ("prio0", expected[1])):
        _assert_matches(np.array([run[name] for run in runs]), exp, rel=0.05)
    # and the high class really waits less than FIFO would make it
    assert expected[0] < theory.mm1_sojourn_mean_s(800.0, mu) < expected[1]
