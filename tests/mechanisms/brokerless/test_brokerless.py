"""Brokerless ZeroMQ PUB/SUB and PUSH/PULL (models.mechanisms.brokerless.socket).

Fan-out cost on the publisher's host, byte-prefix filtering at the
publisher, HWM drops (PUB) vs a blocked sender (PUSH) on hand timelines, no
broker hop, both drivers, bad input.
"""

from __future__ import annotations

import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.zmq import ZmqSocketParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError


def _sched(times, size=1000, topic="t"):
    return PublisherParams(
        topics=(topic,),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * len(times),
        schedule_topic=(topic,) * len(times),
    )


def test_fanout_cost_is_paid_by_the_publisher_socket():
    # 2 publishers at 1000 msg/s (constant); copies: p0 -> 4 subscribers, p1 -> 1
    send, copy = 20e-6, 5e-6
    pubs = {
        "p0": PublisherParams(topics=("a/x",), rate_per_s=1000.0, arrival="constant"),
        "p1": PublisherParams(topics=("b/y",), rate_per_s=1000.0, arrival="constant"),
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("a/",)) for i in range(4)}
    subs["sb"] = SubscriberParams(subscriptions=("b",))
    g = T.brokerless(
        publishers=pubs,
        subscribers=subs,
        link=LinkParams(latency_s=1e-4),
        socket=ZmqSocketParams(send_cost_s=Constant(value=send), copy_cost_s=Constant(value=copy)),
    )
    r = simulate(g, duration_s=2.0, warmup_s=0.5, seed=2)
    st = r.stations().set_index("station")
    assert st.loc["socket:p0.sock", "utilization"] == pytest.approx(1000 * (send + 4 * copy), rel=0.01)
    assert st.loc["socket:p1.sock", "utilization"] == pytest.approx(1000 * (send + 1 * copy), rel=0.01)
    assert not any(st["role"] == "broker")
    assert r.summary()["sp_ratio"] == pytest.approx(2.5)
    assert r.summary()["delivery_ratio"] == pytest.approx(1.0, abs=0.01)


def test_prefix_filter_semantics():
    subs = {
        "slash": ("a/",),
        "a": ("a",),
        "b": ("b",),
        "longer": ("a/b/c",),
        "exact": ("a/b",),
        "all": ("",),
        "two": ("x", "a/"),
    }
    g = T.brokerless(
        publishers={"p": _sched([0.0, 0.5], size=10, topic="a/b")},
        subscribers={k: SubscriberParams(subscriptions=v) for k, v in subs.items()},
        socket=ZmqSocketParams(),
        link=LinkParams(),
        protocol="none",
    )
    r = simulate(g, duration_s=1.0, seed=1)
    got = r.deliveries().groupby("subscriber").size().to_dict()
    assert got == {"slash": 2, "a": 2, "exact": 2, "all": 2, "two": 2}  # one copy per peer, not per filter
    st = r.stations().set_index("station")
    assert st.loc["pipe:p.sock->b", "arrivals"] == 0 and st.loc["pipe:p.sock->longer", "arrivals"] == 0


def _slow_pipe(socket_type):
    # pipe: 1000 B/s, 1000-byte messages -> 1 s per message; HWM 2 (one sending, one waiting)
    g = T.brokerless(
        publishers={"p": _sched([0.0, 0.1, 0.2, 0.3])},
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        socket=ZmqSocketParams(socket_type=socket_type, sndhwm=2),
        link=LinkParams(bandwidth_Bps=1000.0, latency_s=0.01),
        protocol="none",
    )
    return g


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_hwm_drops_for_pub_and_blocks_push(driver):
    pub = simulate(_slow_pipe("pub"), duration_s=10.0, seed=1, driver=driver)
    # msg0 sent 0->1, msg1 waits (1->2); msg2 at 0.2 and msg3 at 0.3 find 2 in the pipe: dropped
    assert [round(x, 9) for x in pub.deliveries().sort_values("msg")["delivery_time_s"]] == [1.01, 2.01]
    drops = pub.drops()
    assert list(drops["cause"]) == ["buffer_full", "buffer_full"]
    assert [round(x, 9) for x in drops["drop_time_s"]] == [0.2, 0.3]
    push = simulate(_slow_pipe("push"), duration_s=10.0, seed=1, driver=driver)
    # msg2 held until msg0 leaves at 1 (sent 2->3), msg3 until 2 (sent 3->4): nothing lost
    assert [round(x, 9) for x in push.deliveries().sort_values("msg")["delivery_time_s"]] == [1.01, 2.01, 3.01, 4.01]
    assert len(push.drops()) == 0
    assert push.stations().set_index("station").loc["pipe:p.sock->s", "mean_blocked"] > 0


def test_no_broker_hop_in_latency():
    # lone message: socket 30 us (send 10 + 2 copies x 10), pipe 1 ms propagation, free hand-off
    g = T.brokerless(
        publishers={"p": _sched([0.0], size=10)},
        subscribers={"s0": SubscriberParams(subscriptions=("t",)), "s1": SubscriberParams(subscriptions=("t",))},
        socket=ZmqSocketParams(send_cost_s=Constant(value=10e-6), copy_cost_s=Constant(value=10e-6)),
        link=LinkParams(latency_s=1e-3),
        protocol="none",
    )
    d = simulate(g, duration_s=1.0, seed=1).deliveries()
    assert list(d["latency_s"].round(12)) == [round(30e-6 + 1e-3, 12)] * 2
    assert list(d["hops"]) == [2, 2]  # hand-off and pipe: no broker, no second link


def _mixed(batch=1):
    pubs = {
        f"p{i}": PublisherParams(topics=(f"dev/{i % 3}/temp",), rate_per_s=3000.0, size_bytes=Constant(value=200))
        for i in range(4)
    }
    subs = {
        f"s{i}": SubscriberParams(
            subscriptions=(f"dev/{i % 3}",), buffer_messages=20, processing_s=Exponential(mean_value=2e-5)
        )
        for i in range(5)
    }
    sock = ZmqSocketParams(
        send_cost_s=Exponential(mean_value=30e-6),
        copy_cost_s=Constant(value=8e-6),
        sndhwm=5,
        batch_max_messages=batch,
        batch_fixed_cost_s=20e-6 if batch > 1 else 0.0,
    )
    return T.brokerless(
        publishers=pubs,
        subscribers=subs,
        socket=sock,
        link=LinkParams(latency_s=1e-4, bandwidth_Bps=1.0e6, jitter_s=Exponential(mean_value=2e-5)),
    )


@pytest.mark.parametrize("batch", [1, 16])
def test_drivers_agree_brokerless(batch):
    g = _mixed(batch)
    fast = simulate(g, duration_s=0.4, warmup_s=0.05, seed=7, driver="batch")
    ref = simulate(g, duration_s=0.4, warmup_s=0.05, seed=7, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations()), (ref.deliveries(), ref.drops(), ref.stations())
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(fast.deliveries()) > 500 and len(fast.drops()) > 0


def test_graphml_round_trip(tmp_path):
    g = _mixed(16)
    T.write_graphml(g, tmp_path / "z.graphml")
    back = T.read_graphml(tmp_path / "z.graphml")
    assert {n: d[T.PARAMS] for n, d in back.nodes(data=True)} == {n: d[T.PARAMS] for n, d in g.nodes(data=True)}


def test_bad_brokerless_topologies_give_one_line_errors():
    pubs = {"p": PublisherParams(topics=("t",), rate_per_s=1.0)}
    subs = {"s0": SubscriberParams(subscriptions=("t",)), "s1": SubscriberParams(subscriptions=("t",))}
    with pytest.raises(ConfigError, match="push") as err:
        T.brokerless(publishers=pubs, subscribers=subs, socket=ZmqSocketParams(socket_type="push"), link=LinkParams())
    assert "\n" not in str(err.value)
    g = T.brokerless(publishers=pubs, subscribers=subs, socket=ZmqSocketParams(), link=LinkParams())
    g.add_node("b", **{T.KIND: "broker", T.PARAMS: BrokerParams()})
    g.add_edge("s0", "b", **{T.PARAMS: LinkParams()})
    with pytest.raises(ConfigError, match="'s0'"):
        T.validate(g)
    g = T.brokerless(publishers=pubs, subscribers=subs, socket=ZmqSocketParams(), link=LinkParams())
    g.remove_edge("p", "p.sock")
    with pytest.raises(ConfigError, match="node .p.: .0 links"):
        T.validate(g)
    with pytest.raises(ConfigError, match="sndhwm"):
        ZmqSocketParams(sndhwm=-1)
