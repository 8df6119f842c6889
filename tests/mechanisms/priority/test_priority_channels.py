"""Priority channels (YAMI4) and queue overflow policies (YAMI4, AMQP, Qpid).

Hand timelines use: publisher uplinks with no delay, a broker with no cost,
and broker-to-subscriber links of 1 MB/s (1 ms per 1000 bytes) with 10 ms
propagation, no framing (protocol "none"): the subscriber's channel (the
downlink's transmit queue) is where messages wait. A slow (sleeping) YAMI4
subscriber is modelled as a slow downlink: TCP flow control keeps the backlog
in the sender's channel queue. These are whole-message channels; YAMI4's frames
behind a send window filled by a sleeping reader are tested in
tests/mechanisms/frames/test_frames.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.scenario import load_scenario
from pubsim.sim import theory
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError
from pubsim.testing import ZERO_LINK
from tests import ROOT
from tests.oracles.test_queueing_theory import REPS, _assert_matches, _ci

CHANNEL = LinkParams(latency_s=0.010, bandwidth_Bps=1e6, scheduling="priority")


@pytest.fixture(params=["batch", "reference"])
def driver(request):
    return request.param


def _star(pub, channels, broker=None):
    """One publisher ``p``; one subscriber per channel (name -> LinkParams), subscribed to all."""
    links = {"p": ZERO_LINK, **channels}
    subs = {s: SubscriberParams(subscriptions=("#",)) for s in channels}
    return T.star(broker=broker or BrokerParams(), publishers={"p": pub}, subscribers=subs, link=links, protocol="none")


def _yami(times, order, size, *, topics=("t0", "t2", "t1"), prios=(0, 2, 1)):
    """One publisher sending ``order`` (topic names) at ``times``; topic ``tK`` has priority K."""
    return PublisherParams(
        topics=topics,
        topic_priorities=prios,
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * len(times),
        schedule_topic=tuple(order),
    )


def _order(result, sub):
    d = result.deliveries()
    d = d[d["subscriber"] == sub]
    return list(d["topic"].astype(str)), [round(x, 9) for x in d["delivery_time_s"]]


# --- YAMI4 ordering tests (SYSTEMS.md §6) -------------------------------------
@pytest.mark.parametrize("size", [100, 100_000])
def test_idle_channel_delivers_fifo(driver, size):
    s = size / 1e6
    gap = 2 * s  # each message is sent before the next is published: no backlog
    pub = _yami([0.0, gap, 2 * gap], ["t0", "t2", "t1"], size)
    r = simulate(_star(pub, {"s": CHANNEL}), duration_s=1.0, seed=1, driver=driver)
    assert _order(r, "s") == (["t0", "t2", "t1"], [round(x, 9) for x in (s + 0.01, gap + s + 0.01, 2 * gap + s + 0.01)])


@pytest.mark.parametrize("size", [100, 100_000])
def test_saturated_channel_0_2_1(driver, size):
    # all at t=0: priority 0 is already being sent (0 -> s), then 2 (s -> 2s), then 1 (2s -> 3s)
    s = size / 1e6
    pub = _yami([0.0] * 3, ["t0", "t2", "t1"], size)
    r = simulate(_star(pub, {"s": CHANNEL}), duration_s=1.0, seed=1, driver=driver)
    assert _order(r, "s") == (["t0", "t2", "t1"], [round(k * s + 0.01, 9) for k in (1, 2, 3)])


@pytest.mark.parametrize("scheduling, expected", [("priority", ["t0", "t2", "t1"]), ("fifo", ["t0", "t1", "t2"])])
def test_saturated_channel_reorders_only_with_priority(driver, scheduling, expected):
    # published 0, 1, 2: a priority channel overtakes 1 with 2; a FIFO one does not
    pub = _yami([0.0] * 3, ["t0", "t1", "t2"], 1000)
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6, scheduling=scheduling)
    r = simulate(_star(pub, {"s": link}), duration_s=1.0, seed=1, driver=driver)
    assert _order(r, "s") == (expected, [0.011, 0.012, 0.013])


def test_several_channels_are_independent(driver):
    # three 1000-byte messages published 0, 1, 2 at t = 0, three more at 20, 21, 22 ms:
    # each subscriber's channel has its own queue: "slow" (1 MB/s) and "fast" (100 MB/s) both
    # reorder the back-to-back burst at t = 0 (0, 2, 1), each on its own clock; the second
    # burst, 1 ms apart, finds both channels idle: FIFO (0, 1, 2).
    pub = _yami([0.0, 0.0, 0.0, 0.020, 0.021, 0.022], ["t0", "t1", "t2", "t0", "t1", "t2"], 1000)
    fast = LinkParams(latency_s=0.010, bandwidth_Bps=1e8, scheduling="priority")
    r = simulate(_star(pub, {"slow": CHANNEL, "fast": fast}), duration_s=1.0, seed=1, driver=driver)
    topics, times = _order(r, "slow")
    assert topics == ["t0", "t2", "t1", "t0", "t1", "t2"]
    assert times == [0.011, 0.012, 0.013, 0.031, 0.032, 0.033]
    topics, times = _order(r, "fast")
    assert topics == ["t0", "t2", "t1", "t0", "t1", "t2"]
    assert times == [0.01001, 0.01002, 0.01003, 0.03001, 0.03101, 0.03201]


def test_max_priority_caps_priorities(driver):
    # AMQP x-max-priority 1 at the broker's per-subscriber queue: 2 counts as 1, FIFO with it
    pub = _yami([0.0] * 3, ["t0", "t1", "t2"], 1000)
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6)
    capped = BrokerParams(client_scheduling="priority", max_priority=1)
    r = simulate(_star(pub, {"s": link}, capped), duration_s=1.0, seed=1, driver=driver)
    assert _order(r, "s")[0] == ["t0", "t1", "t2"]
    uncapped = BrokerParams(client_scheduling="priority")
    r = simulate(_star(pub, {"s": link}, uncapped), duration_s=1.0, seed=1, driver=driver)
    assert _order(r, "s")[0] == ["t0", "t2", "t1"]


# --- overflow policies on a hand timeline -------------------------------------
def _one_topic(times, topics, size=1000, **pub):
    return PublisherParams(
        topics=tuple(sorted(set(topics))),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * len(times),
        schedule_topic=tuple(topics),
        **pub,
    )


@pytest.mark.parametrize("scheduling", ["fifo", "priority"])
@pytest.mark.parametrize(
    "overflow, delivered, cause",
    [
        ("drop_newest", [1, 2], "buffer_full"),  # m3 finds m1 sending, m2 waiting: dropped
        ("reject", [1, 2], "rejected"),  # the same message refused, sender told
        ("ring", [1, 3], "dropped_oldest"),  # m3 evicts m2 (Qpid ring)
        ("drop_oldest", [1, 3], "dropped_oldest"),
    ],
)
def test_overflow_policies_differ(driver, scheduling, overflow, delivered, cause):
    pub = _one_topic([0.0, 0.0, 0.0], ["a"] * 3)
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6, queue_messages=2, scheduling=scheduling, overflow=overflow)
    r = simulate(_star(pub, {"s": link}), duration_s=1.0, seed=1, driver=driver)
    d = r.deliveries()
    assert list(d["msg"] + 1) == delivered
    assert [round(x, 9) for x in d["delivery_time_s"]] == [0.011, 0.012]
    drops = r.drops()
    assert list(drops["cause"]) == [cause] and list(drops["place"]) == ["link:broker->s"]
    assert list(drops["msg"] + 1) == [x for x in (1, 2, 3) if x not in delivered]
    counts = r.sink.counts()
    assert counts[f"lost_{cause}"] == 1 and counts["delivered"] == 2 and counts["expected_deliveries"] == 3
    assert r.summary()[f"loss_rate_{cause}"] == pytest.approx(1 / 3)


def test_update_replaces_in_place(driver):
    # a1 a2 b1 a3 c1 at t=0 on a 3-message channel, update policy:
    # a1 is sent 0->1 ms; a2, b1 wait; a3 replaces a2 at its place (before b1);
    # c1: full and no c waiting -> dropped (newest). Sent: a1, a3, b1.
    pub = _one_topic([0.0] * 5, ["a", "a", "b", "a", "c"])
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6, queue_messages=3, overflow="update")
    r = simulate(_star(pub, {"s": link}), duration_s=1.0, seed=1, driver=driver)
    d = r.deliveries()
    assert list(d["msg"]) == [0, 3, 2]
    assert [round(x, 9) for x in d["delivery_time_s"]] == [0.011, 0.012, 0.013]
    drops = r.drops()
    assert list(zip(drops["msg"], drops["cause"])) == [(1, "replaced"), (4, "buffer_full")]
    s = r.sink.counts()
    assert s["lost_replaced"] == 1 and s["lost_buffer_full"] == 1 and s["delivered"] == 3


def test_update_conservation_with_fan_out():
    # Poisson flood over two slow priority channels with the update policy:
    # published x fan-out = delivered + lost by cause; replaced copies really occur.
    pub = PublisherParams(
        topics=("a", "b", "c"), topic_priorities=(0, 1, 2), rate_per_s=3000.0, size_bytes=Constant(value=500)
    )
    link = LinkParams(latency_s=1e-3, bandwidth_Bps=1e6, queue_messages=4, scheduling="priority", overflow="update")
    r = simulate(_star(pub, {"s1": link, "s2": link}), duration_s=2.0, warmup_s=0.0, seed=3)
    s = r.sink.counts()
    lost = sum(v for k, v in s.items() if k.startswith("lost_"))
    assert s["published"] * 2 == s["expected_deliveries"] == s["delivered"] + lost
    assert s["lost_replaced"] > 100 and s["lost_buffer_full"] == 0  # 3 keys + 1 in service fit in 4: nothing else lost
    assert len(r.drops()) == s["lost_replaced"]


def test_flow_to_disk_delays_instead_of_dropping(driver):
    # per-subscriber queue of 2 with flow-to-disk, 5 ms to write and read back:
    # m1 sent 0->1, m2 1->2, m3 (beyond the limit) 2->2+1+5 = 8 ms
    pub = _one_topic([0.0] * 3, ["a"] * 3)
    broker = BrokerParams(client_queue_messages=2, client_overflow="flow_to_disk", flow_to_disk_cost_s=0.005)
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6)
    r = simulate(_star(pub, {"s": link}, broker), duration_s=1.0, seed=1, driver=driver)
    assert [round(x, 9) for x in r.deliveries()["delivery_time_s"]] == [0.011, 0.012, 0.018]
    assert len(r.drops()) == 0


def test_broker_ingress_reject_and_update(driver):
    # broker ingress queue (2 ms per message, room for 1 waiting): the same machinery
    pub = _one_topic([0.0, 0.0, 0.0], ["a", "a", "a"], size=10)
    link = ZERO_LINK
    for overflow, cause, sent in (("reject", "rejected", [0, 1]), ("update", "replaced", [0, 2])):
        broker = BrokerParams(ingress_cost_s=Constant(value=0.002), queue_messages=1, overflow=overflow)
        r = simulate(_star(pub, {"s0": link, "s1": link, "s2": link}, broker), duration_s=1.0, seed=1, driver=driver)
        assert list(r.deliveries()["msg"].drop_duplicates()) == sent
        assert list(r.drops()["cause"]) == [cause] and list(r.drops()["place"]) == ["broker:broker"]
        counts = r.sink.counts()  # one message lost at the broker = its 3 deliveries
        assert counts[f"lost_{cause}"] == 3 and counts["delivered"] == 6 and counts["expected_deliveries"] == 9
        assert list(r.drops()["lost_deliveries"]) == [3]


# --- Cobham: non-preemptive priority M/G/1 at a priority link -----------------
def _link_star(pubs, bandwidth_Bps):
    subs = {"s": SubscriberParams(subscriptions=("#",))}
    link = LinkParams(bandwidth_Bps=bandwidth_Bps, scheduling="priority")
    links = {**{p: ZERO_LINK for p in pubs}, "s": link}
    return T.star(broker=BrokerParams(), publishers=pubs, subscribers=subs, link=links, protocol="none")


def _per_class(g, column, seed):
    runs = []
    for r in range(REPS):
        d = simulate(g, duration_s=30, warmup_s=2, seed=seed, replication=r).deliveries()
        runs.append(d[d["publish_time_s"] >= 2].groupby(column, observed=True)["latency_s"].mean())
    return runs


def test_priority_link_cobham_deterministic():
    """Two classes, 1000-byte messages at 1 MB/s (M/D/1 with priorities, rho 0.7)."""
    lams = {2: 300.0, 0: 400.0}
    pubs = {
        f"prio{p}": PublisherParams(topics=(f"t{p}",), rate_per_s=lam, priority=p, size_bytes=Constant(value=1000))
        for p, lam in lams.items()
    }
    s = 1e-3
    expected = theory.mg1_priority_nonpreemptive_wait_mean_s([lams[2], lams[0]], [s, s], [0, 0]) + s
    runs = _per_class(_link_star(pubs, 1e6), "publisher", 909)
    for name, exp in (("prio2", expected[0]), ("prio0", expected[1])):
        _assert_matches(np.array([run[name] for run in runs]), exp, rel=0.03)
    assert expected[0] < theory.md1_sojourn_mean_s(700.0, s) < expected[1]


def test_priority_link_cobham_exponential_three_classes():
    """One publisher, three topics of priorities 2, 1, 0 (per-topic priorities), exponential sizes."""
    rates = {"t2": 200.0, "t1": 250.0, "t0": 250.0}
    pub = PublisherParams(
        topics=("t2", "t1", "t0"),
        topic_priorities=(2, 1, 0),
        rate_per_s=sum(rates.values()),
        topic_weights=tuple(rates.values()),
        size_bytes=Exponential(mean_value=1000),
    )
    s = 1e-3
    expected = theory.mg1_priority_nonpreemptive_wait_mean_s(list(rates.values()), [s] * 3, [1] * 3) + s
    runs = _per_class(_link_star({"p": pub}, 1e6), "topic", 910)
    for topic, exp in zip(rates, expected):
        _assert_matches(np.array([run[topic] for run in runs]), exp, rel=0.05)


# --- theory ---------------------------------------------------------------------
def test_mg1_priority_reduces_to_known_cases():
    lams, mus = [300.0, 400.0], [1000.0, 800.0]
    np.testing.assert_allclose(
        theory.mg1_priority_nonpreemptive_wait_mean_s(lams, [1 / m for m in mus], [1, 1]),
        theory.mm1_priority_nonpreemptive_wait_mean_s(lams, mus),
        rtol=1e-12,
    )
    (w,) = theory.mg1_priority_nonpreemptive_wait_mean_s([700.0], [1e-3], [0.0])
    assert w == pytest.approx(theory.mg1_wait_mean_s(700.0, 1e-3, 0.0), rel=1e-12)
    with pytest.raises(ConfigError, match="scv_services"):
        theory.mg1_priority_nonpreemptive_wait_mean_s([1.0, 2.0], [1e-3, 1e-3], [1.0])
    with pytest.raises(ConfigError, match="rho"):
        theory.mg1_priority_nonpreemptive_wait_mean_s([600.0, 600.0], [1e-3, 1e-3], [0, 0])


def test_ci_helper_is_the_shared_one():
    mean, half = _ci(np.array([1.0, 2.0, 3.0]))
    assert mean == 2.0 and half > 0


# --- bad input -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: LinkParams(scheduling="priority", overflow="backpressure"), "overflow"),
        (lambda: LinkParams(overflow="flow_to_disk"), "overflow"),
        (lambda: LinkParams(scheduling="lifo"), "scheduling"),
        (lambda: LinkParams(overflow="spill"), "overflow"),
        (lambda: BrokerParams(client_scheduling="priority", client_overflow="backpressure"), "client_overflow"),
        (lambda: BrokerParams(overflow="update", cpu_fraction=0.5), "cpu_fraction"),
        (lambda: BrokerParams(max_priority=-1), "max_priority"),
        (lambda: PublisherParams(topics=("a", "b"), rate_per_s=1.0, topic_priorities=(1,)), "topic_priorities"),
        (lambda: PublisherParams(topics=("a",), rate_per_s=1.0, topic_priorities=(-1,)), "topic_priorities"),
        (lambda: PublisherParams(topics=("a",), rate_per_s=1.0, topic_priorities=("x",)), "topic_priorities"),
    ],
)
def test_bad_input_one_line(make, field):
    with pytest.raises(ConfigError) as e:
        make()
    assert e.value.field == field and "\n" not in str(e.value)


def test_priority_link_with_broker_backpressure_client_queue_is_one_line():
    pub = _one_topic([0.0], ["a"])
    broker = BrokerParams(client_overflow="backpressure")
    with pytest.raises(ConfigError, match=r"link:broker->s\.overflow.*backpressure"):
        simulate(_star(pub, {"s": CHANNEL}, broker), duration_s=1.0, seed=1)


def test_scenario_field_error_names_the_path(tmp_path):
    from tests.oracles.test_bad_input import base, write

    data = base()
    data["topology"]["link"] = {"preset": "gigabit-lan", "scheduling": "priority", "overflow": "backpressure"}
    with pytest.raises(ConfigError) as e:
        load_scenario(write(tmp_path, data))
    assert "overflow" in e.value.field and "\n" not in str(e.value)


def test_priority_scenario_loads(tmp_path):

    path = ROOT / "experiments" / "priority_channels.yaml"
    sc = load_scenario(path)
    assert yaml.safe_load(path.read_text())["name"] == sc.name
    r = sc.simulate()
    d = r.deliveries()
    lat = d[d["publish_time_s"] >= sc.run["warmup_s"]].groupby("topic", observed=True)["latency_s"].mean()
    assert lat["prio.ctl"] < 1e-3 < 50e-3 < lat["flat.ctl"]  # the documented outcome
    assert lat["prio.msr"] > 50e-3  # measurements still queue behind a saturated link
    drops = r.drops()
    assert set(drops["cause"]) == {"dropped_oldest"} and "prio.ctl" not in set(drops["topic"])


def test_graphml_round_trip_keeps_priority_fields(tmp_path):
    from tests.model.test_topology import _same_graph

    pub = PublisherParams(topics=("a", "b"), topic_priorities=(2, 0), rate_per_s=10.0)
    broker = BrokerParams(
        client_scheduling="priority",
        client_overflow="flow_to_disk",
        max_priority=5,
        flow_to_disk_cost_s=1e-4,
        overflow="update",
    )
    link = LinkParams(bandwidth_Bps=1e6, scheduling="priority", overflow="ring", queue_messages=7)
    g = T.star(
        broker=broker, publishers={"p": pub}, subscribers={"s": SubscriberParams(subscriptions=("#",))}, link=link
    )
    T.write_graphml(g, tmp_path / "g.graphml")
    h = T.read_graphml(tmp_path / "g.graphml")
    _same_graph(g, h)
    assert h.nodes["p"][T.PARAMS].topic_priorities == (2, 0)
    assert h.nodes["broker"][T.PARAMS].max_priority == 5


def test_fifo_link_backpressure_holds_the_sender(driver):
    # a 1-message transmit queue that holds the sender: nothing lost, m2 and m3 sent as room appears
    pub = _one_topic([0.0] * 3, ["a"] * 3)
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6, queue_messages=1, overflow="backpressure")
    r = simulate(_star(pub, {"s": link}), duration_s=1.0, seed=1, driver=driver)
    assert [round(x, 9) for x in r.deliveries()["delivery_time_s"]] == [0.011, 0.012, 0.013]
    assert len(r.drops()) == 0
    down = r.stations().set_index("station").loc["link:broker->s"]
    assert down["mean_blocked"] == pytest.approx((0.001 + 0.002) / 1.0)


def test_cli_topic_table_shows_each_topic():
    from rich.console import Console

    from pubsim.cli import _topic_table

    pub = _one_topic([0.0, 0.0, 0.0], ["a", "b", "a"])
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6, queue_messages=2)
    r = simulate(_star(pub, {"s": link}), duration_s=1.0, seed=1)
    console = Console(width=120, record=True)
    console.print(_topic_table(r))
    text = console.export_text()
    assert "11.000 ms" in text and "12.000 ms" in text  # a: m1 at 11 ms; b: 12 ms
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.startswith("│")}
    assert rows["a"].rstrip("│ ").endswith("1") and rows["b"].rstrip("│ ").endswith("0")  # m3 (a) dropped
