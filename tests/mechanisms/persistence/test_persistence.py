"""Persistent messages through a broker's disk stage (models.mechanisms.persistence.disk): group
commit hand timelines, the throughput bound, conservation, both drivers."""

from __future__ import annotations

import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.disk import DiskParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.scenario import parse_scenario
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError


def _sched(times, size, persistent=True):
    return PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * len(times),
        schedule_topic=("t",) * len(times),
        persistent=persistent,
    )


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_group_commit_hand_timeline(driver):
    # sync 0.25 s, 1000 B/s, 250-byte messages: 0.25 s each; at most 2 per sync
    # 0: idle, alone 0 -> 0.5; 0.1, 0.2 synced together 0.5 -> 1.25; 0.3: 1.25 -> 1.75;
    # 2.0: idle -> 2.5. The transient message at 0.15 skips the disk.
    disk = DiskParams(sync_latency_s=0.25, bandwidth_Bps=1000.0, batch_max_messages=2)
    g = T.star(
        broker=BrokerParams(disk=disk),
        publishers={"p": _sched([0.0, 0.1, 0.2, 0.3, 2.0], 250), "q": _sched([0.15], 250, persistent=False)},
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(),
        protocol="none",
    )
    r = simulate(g, duration_s=3.0, seed=1, driver=driver)
    d = r.deliveries().sort_values("publish_time_s")
    assert [round(x, 9) for x in d["delivery_time_s"]] == [0.5, 1.25, 0.15, 1.25, 1.75, 2.5]
    st = r.stations().set_index("station")
    assert st.loc["disk:broker", "served"] == 5
    assert st.loc["disk:broker", "utilization"] == pytest.approx((0.5 + 0.75 + 0.5 + 0.5) / 3.0)


def test_throughput_bound_of_the_disk():
    disk = DiskParams(sync_latency_s=2e-3, bandwidth_Bps=50e6, batch_max_messages=20)
    bound = disk.throughput_bound_per_s(10_000)  # 20 / (2 ms + 20 x 0.2 ms) = 3333/s
    assert bound == pytest.approx(20 / (2e-3 + 20 * 10_000 / 50e6))
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=1e-6), disk=disk),
        publishers={
            f"p{i}": PublisherParams(
                topics=("t",), rate_per_s=2 * bound / 4, persistent=True, size_bytes=Constant(value=10_000)
            )
            for i in range(4)
        },
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(),
        protocol="none",
    )
    r = simulate(g, duration_s=3.0, warmup_s=1.0, seed=4, drain=False)
    served = r.stations().set_index("station").loc["disk:broker", "served"]
    assert served / 2.0 == pytest.approx(bound, rel=0.01)


def _mixed():
    disk = DiskParams(sync_latency_s=4e-4, bandwidth_Bps=20e6, batch_max_messages=8)
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=3e-5),
        delivery_cost_s=Constant(value=1e-5),
        queue_messages=30,
        client_queue_messages=10,
        disk=disk,
    )
    pubs = {
        f"p{i}": PublisherParams(
            topics=(f"x/{i % 2}",), rate_per_s=2500.0, persistent=i % 2 == 0, size_bytes=Exponential(mean_value=2000)
        )
        for i in range(4)
    }
    subs = {
        "all": SubscriberParams(subscriptions=("x/#",)),
        "one": SubscriberParams(subscriptions=("x/0",), processing_s=Exponential(mean_value=1e-4), buffer_messages=5),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4, bandwidth_Bps=5e6))


def test_conservation_published_times_fanout():
    # whole run (window = run, drained): every owed copy is delivered or lost with a cause
    r = simulate(_mixed(), duration_s=0.5, seed=3)
    s, d, drops = r.summary(), r.deliveries(), r.drops()
    fanout = {"p0": 2, "p2": 2, "p1": 1, "p3": 1}  # x/0 -> all and one; x/1 -> all
    pubs = d.groupby("msg")["publisher"].first().to_dict() | drops.groupby("msg")["publisher"].first().to_dict()
    assert s["published"] == len(pubs)  # drained: every message shows up delivered or lost
    assert s["expected_deliveries"] == sum(fanout[p] for p in pubs.values())
    assert s["expected_deliveries"] == len(d) + int(drops["lost_deliveries"].sum())
    assert set(drops["cause"]) >= {"buffer_full"} and (drops["place"] == "disk:broker").sum() == 0
    assert r.stations().set_index("station").loc["disk:broker", "arrivals"] > 0


def test_drivers_agree_with_disk():
    g = _mixed()
    fast = simulate(g, duration_s=0.3, warmup_s=0.05, seed=9, driver="batch")
    ref = simulate(g, duration_s=0.3, warmup_s=0.05, seed=9, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations()), (ref.deliveries(), ref.drops(), ref.stations())
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(fast.deliveries()) > 500


def test_broker_counts_copies_behind_the_disk():
    # constant costs: utilization = rate x (ingress + 3 copies x delivery) for persistent and transient alike
    disk = DiskParams(sync_latency_s=1e-4, batch_max_messages=10)
    broker = BrokerParams(ingress_cost_s=Constant(value=20e-6), delivery_cost_s=Constant(value=10e-6), disk=disk)
    g = T.star(
        broker=broker,
        publishers={"p": PublisherParams(topics=("t",), rate_per_s=1000.0, arrival="constant", persistent=True)},
        subscribers={f"s{i}": SubscriberParams(subscriptions=("t",)) for i in range(3)},
        link=LinkParams(),
        protocol="none",
    )
    st = simulate(g, duration_s=2.0, warmup_s=0.5, seed=1).stations().set_index("station")
    assert st.loc["broker:broker", "utilization"] == pytest.approx(1000 * (20e-6 + 3 * 10e-6), rel=0.01)


def test_scenario_disk_preset_and_graphml_round_trip(tmp_path):
    sc = parse_scenario(
        {
            "run": {"duration": "1s"},
            "topology": {
                "builder": "star",
                "broker": {"ingress_cost_s": "10us", "disk": {"preset": "ssd-disk", "batch_max_messages": 16}},
                "publishers": [{"name": "p", "topics": ["t"], "rate_per_s": 100, "persistent": True}],
                "subscribers": [{"name": "s", "subscriptions": ["t"]}],
            },
        }
    )
    disk = sc.topology.nodes["broker"][T.PARAMS].disk
    assert disk.sync_latency_s == pytest.approx(1e-3) and disk.batch_max_messages == 16
    assert "ssd-disk" in disk.provenance.note
    T.write_graphml(sc.topology, tmp_path / "d.graphml")
    back = T.read_graphml(tmp_path / "d.graphml")
    assert back.nodes["broker"][T.PARAMS] == sc.topology.nodes["broker"][T.PARAMS]
    assert back.nodes["p"][T.PARAMS].persistent is True


@pytest.mark.parametrize(
    "spec,field",
    [
        ({"sync_latency_s": "-1ms"}, "sync_latency_s"),
        ({"batch_max_messages": 0}, "batch_max_messages"),
        ({"preset": "floppy"}, "preset"),
        ({"fsync": "1ms"}, "fsync"),
    ],
)
def test_bad_disk_fields_name_the_field(spec, field):
    with pytest.raises(ConfigError) as err:
        parse_scenario(
            {
                "run": {"duration": "1s"},
                "topology": {
                    "builder": "star",
                    "broker": {"disk": spec},
                    "publishers": [{"name": "p", "topics": ["t"], "rate_per_s": 1, "persistent": True}],
                    "subscribers": [{"name": "s", "subscriptions": ["t"]}],
                },
            }
        )
    assert f"disk.{field}" in str(err.value) and "\n" not in str(err.value)


def test_bad_persistent_flag():
    with pytest.raises(ConfigError, match="persistent"):
        PublisherParams(topics=("t",), rate_per_s=1.0, persistent="maybe")
