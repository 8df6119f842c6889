"""Subscriber sessions: connection intervals, clean and persistent sessions, churn."""

from __future__ import annotations

import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from tests import ROOT

LINK = LinkParams(latency_s=0.010, bandwidth_Bps=1e6)
ONLINE = ((0.0, 0.05), (0.2, 1.0))


@pytest.fixture(params=["batch", "reference"])
def driver(request):
    return request.param


def _run(driver, *, qos=1, clean=True):
    # 992-byte payload on topic "a": 1000 B at QoS > 0 (1 ms), 998 B at QoS 0; broker 2 ms
    times = (0.0, 0.1, 0.3)
    pub = PublisherParams(
        topics=("a",),
        arrival="schedule",
        schedule_time_s=times,
        schedule_size_bytes=(992,) * 3,
        schedule_topic=("a",) * 3,
        qos=qos,
    )
    sub = SubscriberParams(subscriptions=("a",), qos=qos, online_s=ONLINE, clean_session=clean)
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=0.002)),
        publishers={"p": pub},
        subscribers={"s": sub},
        link=LINK,
    )
    return simulate(g, duration_s=1.0, seed=1, driver=driver)


def _times(r):
    return [round(x, 9) for x in r.deliveries().sort_values("msg")["delivery_time_s"]]


def test_clean_session_copies_while_offline_are_not_owed(driver):
    # msg 1 reaches the client queue at 0.113 s, the client is offline [0.05, 0.2): not owed
    r = _run(driver, clean=True)
    assert _times(r) == [0.024, 0.324]
    s = r.summary()
    assert (s["expected_deliveries"], s["delivered"], s["not_owed"], s["loss_rate"]) == (2, 2, 1, 0.0)
    assert list(r.drops()["cause"]) == ["offline_not_owed"]


def test_persistent_session_holds_qos1_until_reconnect(driver):
    # msg 1 waits at the broker until 0.2 s: downlink 0.2 -> 0.201, +10 ms -> 0.211
    r = _run(driver, clean=False)
    assert _times(r) == [0.024, 0.211, 0.324]
    assert r.summary()["not_owed"] == 0


def test_persistent_session_does_not_store_qos0(driver):
    # QoS 0: 998-byte copies on both hops (0.998 ms each); msg 1 is not stored for the offline client
    r = _run(driver, qos=0, clean=False)
    assert _times(r) == [0.023996, 0.323996]
    assert r.summary()["not_owed"] == 1


def _churn(seed, clean=True, qos=0):
    pub = PublisherParams(topics=("a",), rate_per_s=200.0, qos=qos)
    subs = {
        f"s{i}": SubscriberParams(
            subscriptions=("a",), churn_online_mean_s=1.0, churn_offline_mean_s=0.5, clean_session=clean, qos=qos
        )
        for i in range(4)
    }
    g = T.star(
        broker=BrokerParams(),
        publishers={"p": pub},
        subscribers=subs,
        link=LinkParams(latency_s=1e-3, bandwidth_Bps=1e7),
    )
    return simulate(g, duration_s=200.0, warmup_s=1.0, seed=seed, record="stream")


def test_churn_not_owed_fraction_is_the_offline_fraction():
    # alternating renewal process: P(offline) = 0.5 / (1 + 0.5) = 1/3 (Poisson arrivals see time averages)
    s = _churn(3).summary()
    owed_or_not = s["expected_deliveries"] + s["not_owed"]
    assert s["not_owed"] / owed_or_not == pytest.approx(1 / 3, abs=0.03)
    assert s["loss_rate"] == 0 and s["delivered"] == s["expected_deliveries"]


def test_churn_persistent_qos1_delivers_everything_late():
    s = _churn(3, clean=False, qos=1).summary()
    assert s["not_owed"] < 0.002 * s["expected_deliveries"]  # only copies after the last disconnect
    assert s["loss_rate"] == 0
    assert s["latency_mean_s"] > 0.05  # held copies wait for the reconnect (mean residual offline time 0.5 s)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"online_s": ((0.0, 1.0), (0.5, 2.0))}, "online_s"),
        ({"online_s": ((1.0, 1.0),)}, "online_s"),
        ({"online_s": "soon"}, "online_s"),
        ({"churn_online_mean_s": 1.0}, "churn_offline_mean_s"),
        ({"churn_online_mean_s": 1.0, "churn_offline_mean_s": 1.0, "online_s": ((0.0, 1.0),)}, "online_s"),
    ],
)
def test_bad_sessions_are_one_line_errors(kwargs, field):
    with pytest.raises(ConfigError) as err:
        SubscriberParams(subscriptions=("a",), **kwargs)
    assert err.value.field == field and "\n" not in str(err.value)


def test_churn_scenario_runs():

    from pubsim.scenario import load_scenario

    sc = load_scenario(ROOT / "experiments" / "churn_retained.yaml")
    s = simulate(sc.topology, duration_s=60.0, warmup_s=5.0, seed=sc.seed, record="stream").summary()
    assert s["not_owed"] > 0 and s["delivered"] > 0


def test_qos_and_session_fields_survive_graphml(tmp_path):
    pub = PublisherParams(
        topics=("a",),
        rate_per_s=1.0,
        qos=2,
        inflight_messages=7,
        retry_timeout_s=0.3,
        offline_s=((1.0, 2.0),),
        will_topic="w",
        will_size_bytes=12,
        will_delay_s=0.5,
    )
    subs = {
        "s": SubscriberParams(subscriptions=("a",), qos=1, online_s=ONLINE, clean_session=False, inflight_messages=3),
        "c": SubscriberParams(subscriptions=("a",), churn_online_mean_s=1.0, churn_offline_mean_s=2.0),
    }
    g = T.star(
        broker=BrokerParams(ack_cost_s=1e-5, max_inflight_messages=5, retry_timeout_s=2.0),
        publishers={"p": pub},
        subscribers=subs,
        link=LINK,
    )
    T.write_graphml(g, tmp_path / "g.graphml")
    h = T.read_graphml(tmp_path / "g.graphml")
    for n in g.nodes:
        assert h.nodes[n][T.PARAMS] == g.nodes[n][T.PARAMS]


def _retained_run(driver, clean=True):
    # retained publisher on "r" at 0.0 and 0.1 s (998 B at QoS 0: 0.998 ms per link), a plain one on "a" at 0.25 s;
    # subscriber online [0, 0.05) and [0.2, 1): on reconnect at 0.2 it gets the last retained ("r" from 0.1 s)
    # when the first copy at or after 0.2 s reaches its downlink (the "a" copy at 0.262998 s): sent at 0.2,
    # 0.2 -> 0.200998, +10 ms -> 0.210998
    def sched(topic, times, retain):
        return PublisherParams(
            topics=(topic,),
            arrival="schedule",
            schedule_time_s=times,
            schedule_size_bytes=(992,) * len(times),
            schedule_topic=(topic,) * len(times),
            retain=retain,
        )

    pubs = {"keeper": sched("r", (0.0, 0.1), True), "other": sched("a", (0.25,), False)}
    sub = SubscriberParams(subscriptions=("#",), online_s=ONLINE, clean_session=clean)
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=0.002)), publishers=pubs, subscribers={"s": sub}, link=LINK
    )
    return simulate(g, duration_s=1.0, seed=1, driver=driver)


def test_retained_message_is_sent_on_reconnect(driver):
    r = _retained_run(driver)
    d = r.deliveries().sort_values("delivery_time_s")
    got = [(round(t, 9), tp, bool(x)) for t, tp, x in zip(d["delivery_time_s"], d["topic"], d["retained"])]
    assert got == [(0.023996, "r", False), (0.210998, "r", True), (0.273996, "a", False)]
    s = r.summary()
    # the 0.1 s copy is not owed (offline, clean session); the retained copy is counted apart
    assert (s["expected_deliveries"], s["delivered"], s["not_owed"], s["retained_deliveries"]) == (2, 2, 1, 1)
    assert s["egress_per_s"] * 1.0 == 2
