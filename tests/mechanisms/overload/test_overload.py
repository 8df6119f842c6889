"""Overload (models.mechanisms.overload): a hand timeline, records unchanged when the buffers never
fill, the plateau of latency and ingress past the limit (closed form), bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.models.params.overload import OverloadParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError


def _schedule(times, size=100, topic="t"):
    n = len(times)
    return PublisherParams(
        topics=(topic,),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * n,
        schedule_topic=(topic,) * n,
    )


def _star(overload, times, *, cost_s=1.0, publishers=1, size=100, **broker):
    b = BrokerParams(ingress_cost_s=Constant(value=cost_s), overload=overload, **broker)
    pubs = {f"p{i}": _schedule(times, size) for i in range(publishers)}
    subs = {"s": SubscriberParams(subscriptions=("t",))}
    return T.star(broker=b, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=0.0), protocol="none")


def _delivered(result):
    d = result.deliveries().sort_values("msg")
    return d["publish_time_s"].to_numpy(), d["delivery_time_s"].to_numpy()


def test_hand_timeline():
    # five 100 B messages at t=0, 1 s each, the connection holds 200 B: m0 and m1 enter at 0;
    # m2 waits at its publisher until m0 leaves (1), m3 until m1 leaves (2), m4 until 3.
    # Departures 1..5; each is stamped when sent, so latencies 1, 2, 2, 2, 2.
    r = simulate(_star(OverloadParams(socket_buffer_bytes=200), [0.0] * 5), duration_s=10.0)
    sent, done = _delivered(r)
    assert sent.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]
    assert done.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (done - sent).tolist() == [1.0, 2.0, 2.0, 2.0, 2.0]
    plain_sent, plain_done = _delivered(simulate(_star(None, [0.0] * 5), duration_s=10.0))
    assert plain_sent.tolist() == [0.0] * 5 and plain_done.tolist() == done.tolist()


def test_overhead_counts_in_the_buffer():
    # 100 B payload + 50 B overhead: 300 B hold two messages, not three
    r = simulate(_star(OverloadParams(socket_buffer_bytes=300, message_overhead_bytes=50), [0.0] * 4), duration_s=10.0)
    assert _delivered(r)[0].tolist() == [0.0, 0.0, 1.0, 2.0]


def test_one_buffer_per_publisher_connection():
    # two publishers, 100 B each per connection: 200 B pooled, so two of the four first messages enter at 0
    r = simulate(_star(OverloadParams(socket_buffer_bytes=100), [0.0, 0.0], publishers=2), duration_s=10.0)
    assert sorted(_delivered(r)[0].tolist()) == [0.0, 0.0, 1.0, 2.0]


def test_records_unchanged_when_the_buffers_never_fill():
    times = np.arange(400) * 2e-3  # 500 msg/s, 1 ms each: utilization 0.5
    kw = {"cost_s": 1e-3, "cpu_fraction": 0.8, "cpu_period_s": 0.01}
    plain = simulate(_star(None, times, **kw), duration_s=1.0, warmup_s=0.1, seed=3)
    big = simulate(_star(OverloadParams(socket_buffer_bytes=10**9), times, **kw), duration_s=1.0, warmup_s=0.1, seed=3)
    pd.testing.assert_frame_equal(plain.deliveries(), big.deliveries(), check_exact=True)
    pd.testing.assert_frame_equal(plain.stations(), big.stations(), check_exact=True)


def test_past_the_limit_latency_levels_off_and_ingress_falls():
    # capacity 1000 msg/s (1 ms each), offered 2000 msg/s for 4 s; the connection holds 50 messages:
    # once full, every message is sent when one leaves, so it waits 50 services (closed form 50 ms),
    # ingress (sends) equals the capacity, egress is the capacity with or without flow control.
    times = np.arange(8000) * 0.5e-3
    kw = {"cost_s": 1e-3}
    plain = simulate(_star(None, times, **kw), duration_s=4.0, warmup_s=1.0, cooldown_s=0.5)
    flow = simulate(
        _star(OverloadParams(socket_buffer_bytes=5000), times, **kw), duration_s=4.0, warmup_s=1.0, cooldown_s=0.5
    )
    sp, sf = plain.summary(), flow.summary()
    assert sp["egress_per_s"] == pytest.approx(1000, rel=0.01)
    assert sf["egress_per_s"] == pytest.approx(1000, rel=0.01)
    assert sp["ingress_per_s"] == pytest.approx(2000, rel=0.01)
    assert sf["ingress_per_s"] == pytest.approx(1000, rel=0.01)
    assert sf["latency_p50_s"] == pytest.approx(0.050, rel=0.01)
    assert sf["latency_max_s"] == pytest.approx(0.050, rel=0.01)
    assert sp["latency_p50_s"] > 1.0  # without flow control the backlog grows with the run
    assert sf["loss_rate"] == sp["loss_rate"] == 0.0


def test_flow_control_hand_timeline():
    # 100 B messages of 1 s at t=0, 0, 0 and 3; the connection holds 1000 B (nobody is held) and its
    # window closes above 150 B: m0 finds 0 B and m1 100 B, so they cost 1 s (departures 1, 2); m2
    # finds 200 B and costs 1 + 0.5 + 0.01 x 100 = 2.5 s (2 -> 4.5); m3 arrives at 3, when m0 and m1
    # have left (100 B): 1 s again (4.5 -> 5.5).
    ov = OverloadParams(
        socket_buffer_bytes=1000, receive_window_bytes=150, flow_control_cost_s=0.5, flow_control_cost_s_per_byte=0.01
    )
    sent, done = _delivered(simulate(_star(ov, [0.0, 0.0, 0.0, 3.0]), duration_s=10.0))
    assert sent.tolist() == [0.0, 0.0, 0.0, 3.0]
    assert done.tolist() == [1.0, 2.0, 4.5, 5.5]
    plain = OverloadParams(socket_buffer_bytes=1000)
    assert _delivered(simulate(_star(plain, [0.0, 0.0, 0.0, 3.0]), duration_s=10.0))[1].tolist() == [1, 2, 3, 4]


def test_flow_control_makes_a_burst_tip_the_broker_into_a_slower_state():
    # 1 ms per message (capacity 1000 msg/s), 900 msg/s offered: the connection never holds more than
    # one message, below its 5-message window. Past the window each message costs 1 ms more
    # (capacity 500 msg/s < 900): a burst of 20 messages at 0.5 s tips the broker over and it
    # stays there, its publisher held by the full buffer, serving 500 msg/s (closed form 1 / 2 ms).
    steady = list(np.arange(3600) / 900.0)
    ov = OverloadParams(socket_buffer_bytes=5000, receive_window_bytes=500, flow_control_cost_s=1e-3)
    kw = {"duration_s": 3.0, "warmup_s": 1.0, "cooldown_s": 0.0}
    calm = simulate(_star(ov, steady, cost_s=1e-3), **kw).summary()
    tipped = simulate(_star(ov, sorted(steady + [0.5] * 20), cost_s=1e-3), **kw).summary()
    assert calm["egress_per_s"] == pytest.approx(900, rel=0.01)
    assert tipped["egress_per_s"] == pytest.approx(500, rel=0.01)
    assert tipped["ingress_per_s"] == pytest.approx(500, rel=0.01)


def test_scenario_mapping():
    b = from_mapping(
        BrokerParams, {"ingress_cost_s": "10us", "overload": {"socket_buffer_bytes": "3.8MB"}}, "brokers.b"
    )
    assert b.overload.socket_buffer_bytes == 3_800_000
    assert b.overload.buffer_bytes(0) == b.overload.buffer_bytes(1) == 3_800_000
    assert b.overload.buffer_bytes(4) == 4 * 3_800_000
    assert b.overload.window_bytes(4) is None and not b.overload.flow_control
    flow = {"socket_buffer_bytes": "3.93MB", "receive_window_bytes": "2.2MB", "flow_control_cost_s_per_byte": 9.25e-11}
    f = from_mapping(BrokerParams, {"ingress_cost_s": "10us", "overload": flow}, "brokers.b").overload
    assert f.flow_control and f.window_bytes(0) == 2_200_000 and f.window_bytes(4) == 8_800_000
    assert f.flow_control_cost_s_per_byte == 9.25e-11 and f.flow_control_cost_s == 0.0


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"socket_buffer_bytes": 0}, "socket_buffer_bytes"),
        ({"socket_buffer_bytes": -5}, "socket_buffer_bytes"),
        ({"socket_buffer_bytes": 1000, "message_overhead_bytes": 0.5}, "message_overhead_bytes"),
        ({"socket_buffer_bytes": 1000, "receive_window_bytes": 2000}, "receive_window_bytes"),
        ({"socket_buffer_bytes": 1000, "flow_control_cost_s": 1e-6}, "receive_window_bytes"),
        (
            {"socket_buffer_bytes": 1000, "receive_window_bytes": 100, "flow_control_cost_s": -1.0},
            "flow_control_cost_s",
        ),
    ],
)
def test_bad_parameters(spec, field):
    with pytest.raises(ConfigError) as err:
        OverloadParams(**spec)
    assert err.value.field == field
    assert str(spec.get(field)) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "broker, field",
    [
        ({"workers": 2}, "broker.workers"),
        ({"queue_bytes": 5000}, "broker.queue_bytes"),
        ({"queue_messages": 5}, "broker.queue_messages"),
        ({"batch_max_messages": 4}, "broker.batch_max_messages"),
        ({"scheduling": "priority"}, "broker.scheduling"),
        ({"io": IoParams(cycle_cost_s=1e-5)}, "broker.io.cycle_max_per_connection"),  # cycles, not passes
    ],
)
def test_bad_combinations(broker, field):
    with pytest.raises(ConfigError) as err:
        simulate(_star(OverloadParams(socket_buffer_bytes=1000), [0.0], **broker), duration_s=1.0)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_refused_on_a_shared_host_cpu():
    b = BrokerParams(ingress_cost_s=Constant(value=1e-3), overload=OverloadParams(socket_buffer_bytes=1000))
    g = T.star(
        broker=b,
        publishers={"p": _schedule([0.0])},
        subscribers={"s": SubscriberParams(subscriptions=("t",), processing_s=Constant(value=1e-4))},
        link=LinkParams(latency_s=0.0),
        hosts={"h": HostParams()},
        placement={"broker": "h", "s": "h"},
    )
    with pytest.raises(ConfigError) as err:
        simulate(g, duration_s=1.0)
    assert err.value.field == "broker.overload" and "\n" not in str(err.value)
