"""Publisher outages and Will messages (models.mechanisms.sessions.will), on both drivers."""

from __future__ import annotations

import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError

LINK = LinkParams(latency_s=0.010, bandwidth_Bps=1e6)


@pytest.fixture(params=["batch", "reference"])
def driver(request):
    return request.param


def _run(driver, **will):
    times = (0.0, 0.1, 0.3)
    pub = PublisherParams(
        topics=("a",),
        arrival="schedule",
        schedule_time_s=times,
        schedule_size_bytes=(992,) * 3,
        schedule_topic=("a",) * 3,
        offline_s=((0.05, 0.2),),
        **will,
    )
    subs = {"all": SubscriberParams(subscriptions=("#",)), "wills": SubscriberParams(subscriptions=("dead/+",))}
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=0.002)), publishers={"p": pub}, subscribers=subs, link=LINK
    )
    return simulate(g, duration_s=1.0, seed=1, driver=driver)


def test_will_is_published_by_the_broker_at_the_disconnect(driver):
    # msg at 0.1 s is not published (down [0.05, 0.2)); QoS 0 copies 998 B: 0 -> 0.023996, 0.3 -> 0.323996
    # Will on "dead/p" (6 B topic, 0 B payload: 1 + 1 + 2 + 6 = 10 B) enters the broker at 0.05 + 0.01 s:
    # served 0.060 -> 0.062, downlink 10 us -> 0.06201, +10 ms -> 0.07201
    r = _run(driver, will_topic="dead/p", will_delay_s=0.01)
    d = r.deliveries().sort_values(["delivery_time_s", "subscriber"])
    got = [(s, t, round(x, 9)) for s, t, x in zip(d["subscriber"], d["topic"], d["delivery_time_s"])]
    assert got == [
        ("all", "a", 0.023996),
        ("all", "dead/p", 0.07201),
        ("wills", "dead/p", 0.07201),
        ("all", "a", 0.323996),
    ]
    s = r.summary()
    assert (s["published"], s["expected_deliveries"], s["delivered"]) == (3, 4, 4)
    assert r.stations().set_index("station").loc["link:p->broker", "arrivals"] == 2  # not the Will


def test_outage_without_will_only_silences_the_publisher(driver):
    r = _run(driver)
    assert r.summary()["published"] == 2
    assert set(r.deliveries()["topic"]) == {"a"}


def test_bad_outages_are_one_line_errors():
    with pytest.raises(ConfigError) as err:
        PublisherParams(topics=("a",), rate_per_s=1.0, offline_s=((1.0, 0.5),))
    assert err.value.field == "offline_s" and "\n" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        PublisherParams(topics=("a",), rate_per_s=1.0, will_topic=5)
    assert err.value.field == "will_topic"
