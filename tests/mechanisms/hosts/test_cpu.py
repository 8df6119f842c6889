"""CPU on hosts: speed divides costs, multi-core brokers (M/M/c), quotas and
background load in cores up to the host's cores, the one-core limits off hosts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.host import HostParams
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError
from pubsim.testing import single_queue


def _on(g, host, nodes=None):
    return T.place(g, {"h": host}, {n: "h" for n in (nodes or g)})


def test_speed_divides_the_brokers_costs():
    """A 1 ms message on a host of speed 0.5 takes 2 ms; all on one host with free loopback."""
    g = single_queue(rate_per_s=50.0, service=Constant(value=1e-3))
    g = _on(g, HostParams(speed=0.5))
    lat = simulate(g, duration_s=20, seed=1).deliveries()["latency_s"].to_numpy()
    assert lat.min() == pytest.approx(2e-3, rel=1e-9)
    assert g.nodes["broker"][T.PARAMS].ingress_cost_s == Constant(value=1e-3)  # the graph keeps its own


def test_multicore_broker_is_mmc():
    """Four workers on a 4-core host: M/M/4 (Erlang C) mean sojourn."""
    lam, mu, c = 3000.0, 1000.0, 4
    g = _on(single_queue(rate_per_s=lam, service=Exponential(mean_value=1 / mu), workers=c), HostParams(cores=4))
    values = np.array(
        [
            simulate(g, duration_s=20, warmup_s=2, seed=41, replication=r, record="stream").summary()["latency_mean_s"]
            for r in range(8)
        ]
    )
    expected = theory.mmc_sojourn_mean_s(c, lam, mu)
    half = stats.t.ppf(0.995, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    assert abs(values.mean() - expected) <= half
    assert abs(values.mean() - expected) <= 0.05 * expected


def test_quota_of_two_cores_caps_four_workers():
    """cpu_fraction 2 (cores) on a 4-core host: four workers serve at most 2 cores' worth:
    1 ms messages offered at 3000/s are served at about 2000/s."""
    g = single_queue(rate_per_s=3000.0, service=Constant(value=1e-3), workers=4, queue_messages=50)
    broker = dataclasses.replace(g.nodes["broker"][T.PARAMS], cpu_fraction=2.0, cpu_period_s=0.01)
    g.nodes["broker"][T.PARAMS] = broker
    g = _on(g, HostParams(cores=4))
    st = simulate(g, duration_s=10, warmup_s=1, seed=2).stations().set_index("station")
    served_per_s = st.loc["broker:broker", "served"] / 9.0
    assert served_per_s == pytest.approx(2000.0, rel=0.02)


def test_background_in_cores_on_a_host():
    """Background 1.5 cores on 4 uncapped workers stretch service by 1 / (1 - 1.5/4)."""
    g = single_queue(rate_per_s=20.0, service=Constant(value=1e-3), workers=4)
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(g.nodes["broker"][T.PARAMS], background_cpu_fraction=1.5)
    g = _on(g, HostParams(cores=4))
    lat = simulate(g, duration_s=20, seed=3).deliveries()["latency_s"].to_numpy()
    assert lat.min() == pytest.approx(1e-3 / (1 - 1.5 / 4), rel=1e-9)


@pytest.mark.parametrize(
    "field, value, cores",
    [("cpu_fraction", 2.5, 2), ("background_cpu_fraction", 2.0, 2), ("workers", 3, 2)],
)
def test_cpu_above_the_hosts_cores_is_refused(field, value, cores):
    g = single_queue(rate_per_s=10.0, service=Constant(value=1e-4), workers=3 if field != "workers" else 1)
    fields = {field: value} if field != "workers" else {"workers": 3}
    if field != "workers":
        fields["workers"] = 3
    if field == "background_cpu_fraction":
        fields["cpu_fraction"] = 3.0
        fields["workers"] = 4
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(BrokerParams(), **fields)
    with pytest.raises(ConfigError) as err:
        _on(g, HostParams(cores=cores), ["broker"])
    assert err.value.field.startswith("node 'broker'.")
    assert "\n" not in str(err.value)


def test_more_than_one_core_needs_a_host():
    g = single_queue(rate_per_s=10.0, service=Constant(value=1e-4), workers=2)
    g.nodes["broker"][T.PARAMS] = BrokerParams(workers=2, cpu_fraction=1.5)
    with pytest.raises(ConfigError) as err:
        T.validate(g)
    assert (err.value.field, err.value.value) == ("node 'broker'.cpu_fraction", 1.5)
    assert "(0, 1]" in err.value.expected
    _on(g, HostParams(cores=2), ["broker"])  # fine on a 2-core host
