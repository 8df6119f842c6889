"""Broker restarts (sim.restart): what a restart loses and why, on hand timelines,
conservation of copies, and both drivers."""

from __future__ import annotations

import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError


def _sched(times, persistent):
    return PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(10,) * len(times),
        schedule_topic=("t",) * len(times),
        persistent=persistent,
    )


def _run(durable, driver, subs=1):
    broker = BrokerParams(
        ingress_cost_s=Constant(value=1.0), restart_at_s=(1.5,), restart_downtime_s=1.0, durable_queue=durable
    )
    g = T.star(
        broker=broker,
        publishers={"p": _sched([0.0, 0.2, 2.0], True), "q": _sched([0.1, 0.3, 3.0], False)},
        subscribers={f"s{i}": SubscriberParams(subscriptions=("t",)) for i in range(subs)},
        link=LinkParams(),
        protocol="none",
    )
    return simulate(g, duration_s=6.0, seed=1, driver=driver)


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_durable_queue_keeps_persistent_messages(driver):
    # worker 1 s per message. p@0 served 0-1 (delivered). q@0.1 in service at the
    # restart (1.5), q@0.3 waiting: transient, lost. p@0.2 waiting, persistent in a
    # durable queue: served after the downtime 2.5-3.5. p@2.0 refused (down until
    # 2.5). q@3.0 waits for p@0.2: 3.5-4.5.
    r = _run(True, driver)
    d = r.deliveries().sort_values("publish_time_s")
    assert list(zip(d["publish_time_s"].round(9), d["delivery_time_s"].round(9))) == [
        (0.0, 1.0),
        (0.2, 3.5),
        (3.0, 4.5),
    ]
    drops = r.drops()
    assert list(zip(drops["publish_time_s"].round(9), drops["drop_time_s"].round(9), drops["cause"])) == [
        (0.1, 1.5, "broker_restart"),
        (0.3, 1.5, "broker_restart"),
        (2.0, 2.0, "broker_down"),
    ]
    assert list(drops["publisher"]) == ["q", "q", "p"]


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_non_durable_queue_loses_everything_it_holds(driver):
    r = _run(False, driver)
    d = r.deliveries().sort_values("publish_time_s")
    assert list(zip(d["publish_time_s"].round(9), d["delivery_time_s"].round(9))) == [(0.0, 1.0), (3.0, 4.0)]
    causes = {k: v for k, v in r.drops()["cause"].value_counts().to_dict().items() if v}
    assert causes == {"broker_restart": 3, "broker_down": 1}


def test_conservation_with_fanout():
    r = _run(True, "batch", subs=3)
    s, drops = r.summary(), r.drops()
    assert s["expected_deliveries"] == 6 * 3
    assert s["expected_deliveries"] == len(r.deliveries()) + int(drops["lost_deliveries"].sum())
    assert s["loss_rate_broker_restart"] == pytest.approx(2 * 3 / 18)
    assert s["loss_rate_broker_down"] == pytest.approx(3 / 18)
    st = r.stations().set_index("station").loc["broker:broker"]
    assert st["drops_broker_restart"] == 2 and st["drops_broker_down"] == 1


def _random(durable):
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=2e-4),
        delivery_cost_s=Constant(value=2e-5),
        queue_messages=40,
        restart_at_s=(0.1, 0.2, 0.205),
        restart_downtime_s=0.02,
        durable_queue=durable,
        overflow="drop_oldest",
        idle_wakeup_cost_s=1e-5,
    )
    pubs = {
        f"p{i}": PublisherParams(
            topics=(f"x/{i % 2}",), rate_per_s=1500.0, persistent=i % 2 == 0, size_bytes=Constant(value=100)
        )
        for i in range(4)
    }
    subs = {"all": SubscriberParams(subscriptions=("x/#",)), "zero": SubscriberParams(subscriptions=("x/0",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4, bandwidth_Bps=1e6))


@pytest.mark.parametrize("durable", [False, True])
def test_drivers_agree_with_restarts(durable):
    g = _random(durable)
    fast = simulate(g, duration_s=0.3, warmup_s=0.02, seed=5, driver="batch")
    ref = simulate(g, duration_s=0.3, warmup_s=0.02, seed=5, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations()), (ref.deliveries(), ref.drops(), ref.stations())
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    causes = set(fast.drops()["cause"])
    assert {"broker_restart", "broker_down"} <= causes
    s = fast.summary()
    assert s["expected_deliveries"] == s["delivered"] + round(s["loss_rate"] * s["expected_deliveries"])


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"restart_at_s": (2.0, 1.0)}, "restart_at_s"),
        ({"restart_at_s": (-1.0,)}, "restart_at_s"),
        ({"restart_at_s": (1.0,), "overflow": "backpressure"}, "overflow"),
        ({"restart_at_s": (1.0,), "batch_max_messages": 4}, "batch_max_messages"),
        ({"durable_queue": "sometimes"}, "durable_queue"),
    ],
)
def test_bad_restart_settings(kw, field):
    with pytest.raises(ConfigError) as err:
        BrokerParams(**kw)
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("driver", ["batch", "reference"])
@pytest.mark.parametrize("durable", [True, False])
def test_per_subscriber_queue_restarts_with_its_broker(driver, durable):
    # free broker; the subscriber's downlink sends 10 B in 1 s. p@0 sent 0-1.
    # p@0.1 in transmission at the restart (1.5): persistent in a durable queue it is
    # sent again after the downtime, 2.5-3.5; q@0.2 waiting, transient: lost at 1.5.
    broker = BrokerParams(restart_at_s=(1.5,), restart_downtime_s=1.0, durable_queue=durable)
    g = T.star(
        broker=broker,
        publishers={"p": _sched([0.0, 0.1], True), "q": _sched([0.2], False)},
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link={"p": LinkParams(), "q": LinkParams(), "s": LinkParams(bandwidth_Bps=10.0)},
        protocol="none",
    )
    r = simulate(g, duration_s=5.0, seed=1, driver=driver)
    d = r.deliveries().sort_values("publish_time_s")
    expected = [(0.0, 1.0), (0.1, 3.5)] if durable else [(0.0, 1.0)]
    assert list(zip(d["publish_time_s"].round(9), d["delivery_time_s"].round(9))) == expected
    drops = r.drops()
    assert set(drops["place"]) == {"link:broker->s"} and set(drops["cause"]) == {"broker_restart"}
    assert len(drops) == (1 if durable else 2)
