"""A broker and its ILDM node on one host share its CPU (models.mechanisms.hosts.cpu):
a shared FIFO whose demand per message is the node's plus the broker's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.relay import RelayParams
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError

FREE = LinkParams()


def _pair(lam, node, broker, *, host=True, queue=None):
    """One broker with its node, one Poisson publisher and one subscriber on free links."""
    return T.chain(
        brokers={"b": BrokerParams(ingress_cost_s=broker)},
        bridge=FREE,
        link=FREE,
        relays={"b": RelayParams(relay_cost_s=node, queue_messages=queue)},
        publishers={"p": ("b", PublisherParams(topics=("t",), rate_per_s=lam))},
        subscribers={"s": ("b", SubscriberParams(subscriptions=("t",)))},
        protocol="none",
        hosts={"srv": HostParams(cores=1)} if host else None,
        placement={"b": "srv"} if host else None,
    )


def test_shared_core_is_mg1_with_the_summed_demand():
    """Node and broker each Exp(0.4 ms) on one core: one M/G/1 queue whose demand is
    their sum (Erlang-2, mean 0.8 ms, scv 1/2), at 1000 msg/s (rho 0.8)."""
    lam, m = 1000.0, 4e-4
    g = _pair(lam, Exponential(mean_value=m), Exponential(mean_value=m))
    values = np.array(
        [
            simulate(g, duration_s=40, warmup_s=4, seed=77, replication=r, record="stream").summary()["latency_mean_s"]
            for r in range(8)
        ]
    )
    expected = theory.mg1_sojourn_mean_s(lam, 2 * m, 0.5)
    half = stats.t.ppf(0.995, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    assert abs(values.mean() - expected) <= half, f"{expected} outside {values.mean()} ± {half}"
    assert abs(values.mean() - expected) <= 0.05 * expected


def test_the_nodes_work_takes_capacity_from_the_broker():
    """0.4 ms each at 1500 msg/s: apart, both run at 60 % and nothing is lost; on one core
    the pair saturates at 1 / 0.8 ms = 1250 msg/s and the rest is dropped at the node's queue."""
    lam, m = 1500.0, Constant(value=4e-4)
    apart = simulate(_pair(lam, m, m, host=False, queue=20), duration_s=10, warmup_s=1, seed=3).summary()
    shared = simulate(_pair(lam, m, m, queue=20), duration_s=10, warmup_s=1, seed=3)
    assert apart["loss_rate"] == 0
    st = shared.stations().set_index("station")
    assert st.loc["cpu:srv", "served"] / 9.0 == pytest.approx(1250.0, rel=0.02)
    assert st.loc["cpu:srv", "utilization"] == pytest.approx(1.0, abs=0.01)
    h = shared.hosts().set_index(["process", "measure"])["value"]
    assert h[("relay:b", "cpu_pct_of_core")] == pytest.approx(50.0, rel=0.02)
    assert h[("broker:b", "cpu_pct_of_core")] == pytest.approx(50.0, rel=0.02)


def test_drivers_agree_on_shared_cpu_and_cards():
    """Three ILDM pairs on three 1-core hosts with cards, Publication Flooding."""
    brokers = {f"b{i}": BrokerParams(ingress_cost_s=Exponential(mean_value=2e-4)) for i in range(3)}
    relays = {
        b: RelayParams(relay_cost_s=Exponential(mean_value=1e-4), forward_cost_s=Constant(value=3e-5)) for b in brokers
    }
    pubs = {f"p{i}": (f"b{i % 3}", PublisherParams(topics=(f"t{i % 2}",), rate_per_s=600.0)) for i in range(6)}
    subs = {f"s{i}": (f"b{i}", SubscriberParams(subscriptions=("t0", "t1"))) for i in range(3)}
    g = T.chain(
        brokers=brokers,
        bridge=LinkParams(latency_s=1e-3, overhead_bytes=40),
        link=LinkParams(latency_s=1e-4),
        relays=relays,
        publishers=pubs,
        subscribers=subs,
        forwarding="flood",
        hosts={f"h{i}": HostParams(cores=1, card_Bps=2e6, loopback_latency_s=1e-5) for i in range(3)},
        placement={**{f"b{i}": f"h{i}" for i in range(3)}, "s0": "h0"},
    )
    fast = simulate(g, duration_s=0.5, warmup_s=0.05, seed=13, driver="batch")
    ref = simulate(g, duration_s=0.5, warmup_s=0.05, seed=13, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations()), (ref.deliveries(), ref.drops(), ref.stations())
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert {"cpu:h0", "cpu:h1", "cpu:h2", "card:h1:tx"} <= set(fast.stations().station)
    assert len(fast.deliveries()) > 500


def test_unsupported_shared_broker_settings_are_refused():
    g = _pair(10.0, Constant(value=1e-5), Constant(value=1e-5))
    g.nodes["b"][T.PARAMS] = BrokerParams(cpu_fraction=0.5)
    with pytest.raises(ConfigError) as err:
        T.validate(g)
    assert (err.value.field, err.value.value) == ("node 'b'.cpu_fraction", 0.5)
    assert "\n" not in str(err.value)
