"""The broker's per-connection cost against a hand-computed timeline (issue 18)."""

from dataclasses import replace

import numpy as np
import pytest

from pubsim.calibration.virtual import result_row
from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant

LINK_S = 1e-4
INGRESS_S = 10e-6
PER_CONNECTION_S = 4e-6


def scheduled(times):
    return PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(64,) * len(times),
        schedule_topic=("t",) * len(times),
    )


def star(connection_cost_s):
    """2 publishers and 3 subscribers (5 connections); only s0 takes topic t."""
    broker = BrokerParams(ingress_cost_s=Constant(value=INGRESS_S), connection_cost_s=connection_cost_s)
    pubs = {"p0": scheduled((0.1, 0.1)), "p1": scheduled((0.2,))}
    subs = {
        "s0": SubscriberParams(subscriptions=("t",)),
        "s1": SubscriberParams(subscriptions=("u",)),
        "s2": SubscriberParams(subscriptions=("u",)),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=LINK_S))


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_every_message_pays_each_connection(driver):
    res = simulate(star(PER_CONNECTION_S), duration_s=0.3, seed=1, driver=driver)
    lat = np.sort(res.deliveries()["latency_s"].to_numpy())
    service = INGRESS_S + 5 * PER_CONNECTION_S  # 30 us
    # by hand: the two messages of 0.1 s arrive together, the second waits for the first;
    # the one of 0.2 s finds the broker idle: uplink + service (+ wait) + downlink
    expected = [2 * LINK_S + service, 2 * LINK_S + service, 2 * LINK_S + 2 * service]
    assert lat == pytest.approx(expected, abs=1e-12)
    row = result_row(res)
    assert row["demand_s_per_ingress"] == pytest.approx(service, abs=1e-12)


def test_zero_cost_keeps_the_old_timeline():
    lat = np.sort(simulate(star(0.0), duration_s=0.3, seed=1).deliveries()["latency_s"].to_numpy())
    assert lat == pytest.approx([2 * LINK_S + INGRESS_S] * 2 + [2 * LINK_S + 2 * INGRESS_S], abs=1e-12)


def test_each_broker_counts_its_own_clients():
    brokers = {"e1": BrokerParams(connection_cost_s=1e-6), "e2": BrokerParams(connection_cost_s=1e-6)}
    pubs = {"p0": ("e1", scheduled((0.1,))), "p1": ("e2", scheduled((0.1,))), "p2": ("e2", scheduled((0.2,)))}
    subs = {"s0": ("e1", SubscriberParams(subscriptions=("t",)))}
    g = T.chain(brokers=brokers, bridge=LinkParams(), link=LinkParams(), publishers=pubs, subscribers=subs)
    net = build_network(g, seed=1)
    counts = {s.name: s.connections for s in net.stations if s.name.startswith("broker:")}
    assert counts == {"broker:e1": 2, "broker:e2": 2}


@pytest.mark.parametrize("cpu_fraction", [1.0, 0.5])
def test_the_row_counts_the_background_load_as_the_harness_does(cpu_fraction):
    """/proc counts all of a broker's CPU: the messages' work and the background load the twin
    runs beside them (uncapped, the messages' service is stretched by 1 / (1 - B), and that
    stretch is the background's share, not more work)."""
    g = star(0.0)
    b = g.nodes["broker"][T.PARAMS]
    g.nodes["broker"][T.PARAMS] = replace(b, background_cpu_fraction=0.05, cpu_fraction=cpu_fraction)
    res = simulate(g, duration_s=0.3, seed=1)
    assert result_row(res)["demand_s_per_ingress"] == pytest.approx(INGRESS_S + 0.05 * 0.3 / 3, rel=1e-9)
