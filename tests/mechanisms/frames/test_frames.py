"""YAMI4 frame channels (issue 14; SYSTEMS.md §1 and §6): hand timelines of the three ordering settings.

Every expected time below is computed by hand from the mechanism
(:mod:`pubsim.models.mechanisms.frames`), not taken from a run. Common
setting: frames of F = 4,096 bytes, a send window of W = 16,384 bytes (4
frames), a 1 MB/s channel (a full frame in 4.096 ms) with no latency and
no framing (protocol none), a broker with no cost, and (in the Python
topologies) publishers on zero-time uplinks, so a message reaches its
channel when it is published. A message's priority is its topic's: ``tK``
has priority K, ``bulk`` 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.mechanisms.frames.discipline import FrameDiscipline, frame_sizes
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.scenario import load_scenario
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError
from pubsim.sim.packets import Packets
from pubsim.testing import ZERO_LINK
from tests import ROOT

F, W = 4096, 16384
CHANNEL = LinkParams(bandwidth_Bps=1e6, scheduling="priority")
BROKER = BrokerParams(client_frame_bytes=F, client_send_window_bytes=W)
TOPICS, PRIOS = ("bulk", "t0", "t1", "t2"), (0, 0, 1, 2)


@pytest.fixture(params=["batch", "reference"])
def driver(request):
    return request.param


def _pub(times, sizes, order):
    return PublisherParams(
        topics=TOPICS,
        topic_priorities=PRIOS,
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=tuple(sizes),
        schedule_topic=tuple(order),
    )


def _subs(sleep_s, subscriptions):
    return {
        name: SubscriberParams(subscriptions=subs, processing_s=Constant(value=sleep_s))
        for name, subs in subscriptions.items()
    }


def _run(pub, subs, driver, broker=BROKER, duration_s=7.0):
    links = {"p": ZERO_LINK, **{s: CHANNEL for s in subs}}
    g = T.star(broker=broker, publishers={"p": pub}, subscribers=subs, link=links, protocol="none")
    return simulate(g, duration_s=duration_s, seed=1, driver=driver)


def _order(result, sub=None):
    d = result.deliveries()
    if sub is not None:
        d = d[d["subscriber"] == sub]
    d = d.sort_values("delivery_time_s", kind="stable")
    return list(d["topic"].astype(str)), [round(x, 9) for x in d["delivery_time_s"]]


def _ms(*times_ms):
    return [round(t / 1e3, 9) for t in times_ms]


# --- the discipline on its own ------------------------------------------------
def test_frame_sizes():
    assert frame_sizes(12288.0, F) == [4096.0] * 3
    assert frame_sizes(1000.0, F) == [1000.0]
    assert frame_sizes(5000.0, F) == [4096.0, 904.0]


def _offer(d, times, sizes, prios, processing):
    n = len(times)
    pk = Packets(np.asarray(times, float), np.arange(n), np.arange(n), np.asarray(sizes), np.asarray(times, float))
    d.set_processing(np.asarray(processing, float))
    return d.run(pk, np.zeros(n), np.asarray(sizes, float), 100.0, np.asarray(prios))


def test_interleaved_partial_messages_do_not_deadlock():
    # W = 2 frames. m0 (prio 0, 3 frames) at 0; m2 (prio 2, 3 frames) at 1 ms. f = 4.096 ms.
    # m0.f0 0 -> 4.096 (window 4096); at 4.096 m2 has priority: m2.f0 -> 8.192 (window full,
    # no complete message, no read pending: the receiving agent reads partial frames, so the
    # frames go on); m2.f1 -> 12.288, m2.f2 -> 16.384 (m2 complete, read at once, free);
    # m0.f1 -> 20.48, m0.f2 -> 24.576.
    d = FrameDiscipline(frame_bytes=F, window_bytes=2 * F, bandwidth_Bps=1e6, delay_s=0.0)
    served = _offer(d, [0.0, 0.001], [12288, 12288], [0, 2], [0.0, 0.0])
    assert served.packets.msg.tolist() == [1, 0]
    assert np.round(served.depart, 9).tolist() == [0.016384, 0.024576]
    assert np.round(served.start, 9).tolist() == [0.004096, 0.0]


def test_queue_limit_drops_the_newest():
    # limit 1 message with frames queued: m0 (2 frames) sends f0 at 0; m1 at 1 ms finds m0 queued
    d = FrameDiscipline(frame_bytes=F, window_bytes=W, bandwidth_Bps=1e6, delay_s=0.0, capacity_messages=1)
    served = _offer(d, [0.0, 0.001], [8192, 100], [0, 2], [0.0, 0.0])
    assert served.packets.msg.tolist() == [0] and served.dropped.msg.tolist() == [1]


# --- (a) idle subscriber: FIFO --------------------------------------------------
@pytest.mark.parametrize(
    "size, delivered_ms",
    [
        # 3 frames: 12.288 ms on the wire, read at once; published 20 ms apart
        (12288, (12.288, 32.288, 52.288)),
        # 1 frame: 1 ms
        (1000, (1.0, 21.0, 41.0)),
    ],
)
def test_idle_subscriber_delivers_fifo(driver, size, delivered_ms):
    pub = _pub([0.0, 0.02, 0.04], [size] * 3, ["t0", "t2", "t1"])
    r = _run(pub, _subs(0.0, {"s": ("#",)}), driver)
    assert _order(r) == (["t0", "t2", "t1"], _ms(*delivered_ms))


# --- (b) slow (sleeping) subscriber on one channel: by priority --------------------
def test_sleeping_subscriber_large_messages_reorder_frames(driver):
    # bulk1 0 -> 12.288 ms, read at once, reader asleep until 1.012288 s (delivered then);
    # bulk2 20 -> 32.288 ms, unread: window 12,288; t0 at 40 ms: frame 1 40 -> 44.096 ms,
    # window full (16,384) with a read pending: t0 frames 2-3 wait; t2 (60 ms), t1 (80 ms) wait.
    # 1.012288: bulk2 read (frees 12,288): t2 f0-f2 -> 1.024576, window full;
    # 2.012288: t2 read: t1's frames -> 2.024576; 3.012288: t1 read: t0 f2-f3 -> 3.020480;
    # 4.012288: t0 read. Delivered (read + 1 s sleep):
    pub = _pub([0.0, 0.02, 0.04, 0.06, 0.08], [12288] * 5, ["bulk", "bulk", "t0", "t2", "t1"])
    r = _run(pub, _subs(1.0, {"s": ("#",)}), driver)
    assert _order(r) == (["bulk", "bulk", "t2", "t1", "t0"], [1.012288, 2.012288, 3.012288, 4.012288, 5.012288])


def test_sleeping_subscriber_small_messages_by_priority(driver):
    # bulk messages of 4 frames (= W): bulk1 read at 16.384 ms (asleep until 1.016384 s); bulk2
    # 20 -> 36.384 ms fills the window; t0 (40 ms), t2, t1 (1 frame each) wait; at 1.016384
    # bulk2 is read and the frames go by priority: t2, t1, t0; one read per second.
    pub = _pub([0.0, 0.02, 0.04, 0.06, 0.08], [16384, 16384, 1000, 1000, 1000], ["bulk", "bulk", "t0", "t2", "t1"])
    r = _run(pub, _subs(1.0, {"s": ("#",)}), driver)
    assert _order(r) == (["bulk", "bulk", "t2", "t1", "t0"], [1.016384, 2.016384, 3.016384, 4.016384, 5.016384])


def test_sleeping_subscriber_on_a_fifo_channel_keeps_publication_order(driver):
    # the same backlog with every message at one priority: nothing overtakes t0
    pub = _pub([0.0, 0.02, 0.04, 0.06, 0.08], [12288] * 5, ["bulk", "bulk", "t0", "t2", "t1"])
    flat = BrokerParams(client_frame_bytes=F, client_send_window_bytes=W)
    links_fifo = LinkParams(bandwidth_Bps=1e6)
    g = T.star(
        broker=flat,
        publishers={"p": pub},
        subscribers=_subs(1.0, {"s": ("#",)}),
        link={"p": ZERO_LINK, "s": links_fifo},
        protocol="none",
    )
    r = simulate(g, duration_s=7.0, seed=1, driver=driver)
    assert _order(r)[0] == ["bulk", "bulk", "t0", "t2", "t1"]


# --- (c) several channels, one per priority: no reordering across channels ------
@pytest.mark.parametrize("size, wire_ms", [(12288, 12.288), (1000, 1.0)])
def test_one_channel_per_priority_does_not_reorder(driver, size, wire_ms):
    # each message finds its own channel idle: read when it arrives, delivered 1 s later,
    # in publication order 0, 2, 1
    pub = _pub([0.0, 0.02, 0.04], [size] * 3, ["t0", "t2", "t1"])
    subs = _subs(1.0, {"c0": ("t0",), "c1": ("t1",), "c2": ("t2",)})
    r = _run(pub, subs, driver)
    assert _order(r) == (["t0", "t2", "t1"], _ms(1000 + wire_ms, 1020 + wire_ms, 1040 + wire_ms))


# --- the scenario files -------------------------------------------------------------
def _scenario(name, driver):
    sc = load_scenario(ROOT / "experiments" / f"yami4_priority_{name}.yaml")
    return sc.simulate(driver=driver)


def test_idle_scenario(driver):
    # + the uplink: 12.288 ms (large), 1 ms (small) after publication the message is at the broker
    r = _scenario("idle", driver)
    assert _order(r, "large-reader") == (["large.t0", "large.t2", "large.t1"], _ms(24.576, 44.576, 64.576))
    assert _order(r, "small-reader") == (["small.t0", "small.t2", "small.t1"], _ms(2.0, 22.0, 42.0))


def test_slow_scenario(driver):
    # the timelines of the two tests above shifted by the uplink (12.288 ms, 16.384 ms for the
    # small case's bulk messages, which keep the reader's times)
    r = _scenario("slow", driver)
    large = [1.024576, 2.024576, 3.024576, 4.024576, 5.024576]
    assert _order(r, "large-reader") == (["large.bulk", "large.bulk", "large.t2", "large.t1", "large.t0"], large)
    small = [1.032768, 2.032768, 3.032768, 4.032768, 5.032768]
    assert _order(r, "small-reader") == (["small.bulk", "small.bulk", "small.t2", "small.t1", "small.t0"], small)


def test_channels_scenario(driver):
    r = _scenario("channels", driver)
    d = r.deliveries().sort_values("delivery_time_s", kind="stable")
    for p, wire_ms in (("large", 2 * 12.288), ("small", 2.0)):
        mine = d[d["topic"].astype(str).str.startswith(p)]
        assert list(mine["topic"].astype(str)) == [f"{p}.t0", f"{p}.t2", f"{p}.t1"]
        assert [round(x, 9) for x in mine["delivery_time_s"]] == _ms(1000 + wire_ms, 1020 + wire_ms, 1040 + wire_ms)


def test_frames_off_by_default_keep_whole_messages(driver):
    # without client_frame_bytes the channel queues whole messages: the saturated-link rule
    # (SYSTEMS.md §1) of the existing priority channel, 0 then 2 then 1 for a burst at t = 0
    pub = _pub([0.0] * 3, [12288] * 3, ["t0", "t2", "t1"])
    r = _run(pub, _subs(0.0, {"s": ("#",)}), driver, broker=BrokerParams(), duration_s=1.0)
    assert _order(r)[0] == ["t0", "t2", "t1"]


def test_burst_with_frames_reorders_behind_the_first_frame(driver):
    # the same burst with frames and an idle reader: t0's first frame is on the wire
    # (0 -> 4.096 ms); then t2's 3 frames (-> 16.384), t1's (-> 28.672), t0's last two (-> 36.864)
    pub = _pub([0.0] * 3, [12288] * 3, ["t0", "t2", "t1"])
    big_window = BrokerParams(client_frame_bytes=F)
    r = _run(pub, _subs(0.0, {"s": ("#",)}), driver, broker=big_window, duration_s=1.0)
    assert _order(r) == (["t2", "t1", "t0"], _ms(16.384, 28.672, 36.864))


# --- errors ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fields, field",
    [
        ({"client_frame_bytes": 0}, "client_frame_bytes"),
        ({"client_frame_bytes": 4096, "client_send_window_bytes": 1000}, "client_send_window_bytes"),
        ({"client_send_window_bytes": 16384}, "client_send_window_bytes"),
    ],
)
def test_bad_frame_values_are_one_line_errors(fields, field):
    with pytest.raises(ConfigError) as e:
        BrokerParams(**fields)
    assert e.value.field == field and "\n" not in str(e.value)


def test_scenario_error_names_the_path(tmp_path):
    text = (ROOT / "experiments" / "yami4_priority_idle.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("client_send_window_bytes: 16KiB", "client_send_window_bytes: 1KiB"))
    with pytest.raises(ConfigError) as e:
        load_scenario(bad)
    assert e.value.field == "topology.broker.client_send_window_bytes" and "\n" not in str(e.value)


def test_reader_with_random_processing_runs_on_both_drivers():
    # a sanity check of the reader's stream: exponential sleeps, many messages, both drivers equal
    pub = PublisherParams(topics=("t0", "t2"), topic_priorities=(0, 2), rate_per_s=200.0)
    subs = {"s": SubscriberParams(subscriptions=("#",), processing_s=Exponential(mean_value=4e-3))}
    links = {"p": ZERO_LINK, "s": CHANNEL}
    g = T.star(broker=BROKER, publishers={"p": pub}, subscribers=subs, link=links, protocol="none")
    a = simulate(g, duration_s=2.0, seed=3, driver="batch").deliveries()
    b = simulate(g, duration_s=2.0, seed=3, driver="reference").deliveries()
    assert len(a) > 300
    assert a.equals(b)


@pytest.mark.parametrize(
    "old, new, field",
    [
        ("schedule_size_bytes: [12288, 12288, 12288]", "schedule_size_bytes: [1e300B, 12288, 12288]", "[0]"),
        ("schedule_time_s: [0.0, 0.02, 0.04]", "schedule_time_s: [0.0, soon, 0.04]", "[1]"),
        ("schedule_time_s: [0.0, 0.02, 0.04]", "schedule_time_s: 3", ""),
    ],
)
def test_bad_schedule_values_are_one_line_errors(tmp_path, old, new, field):
    # schedule lists are read item by item (a schedule publisher used to crash on '1e300B')
    text = (ROOT / "experiments" / "yami4_priority_idle.yaml").read_text()
    assert old in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError) as e:
        load_scenario(bad)
    assert e.value.field.endswith(old.split(":")[0] + field) and "\n" not in str(e.value)


def test_window_limits_throughput_to_window_per_round_trip(driver):
    # theory: a window-limited channel carries W bytes per round trip. F = 1,000-byte messages
    # (one frame each), W = 4 frames, 10 ms latency each way, 1 GB/s (1 us per frame), a reader
    # that reads at once: message k is read at 10 ms + (k mod 4 + 1) us + (k // 4) x 20.001 ms
    # (its window slot comes back 10 ms after the read), i.e. W / RTT = 4 / 20.001 ms ~ 200 msg/s.
    pub = PublisherParams(
        topics=("t0",),
        arrival="schedule",
        schedule_time_s=(0.0,) * 40,
        schedule_size_bytes=(1000,) * 40,
        schedule_topic=("t0",) * 40,
    )
    broker = BrokerParams(client_frame_bytes=1000, client_send_window_bytes=4000)
    fast = LinkParams(bandwidth_Bps=1e9, latency_s=0.010)
    g = T.star(
        broker=broker,
        publishers={"p": pub},
        subscribers=_subs(0.0, {"s": ("#",)}),
        link={"p": ZERO_LINK, "s": fast},
        protocol="none",
    )
    r = simulate(g, duration_s=0.5, seed=1, driver=driver)
    t = np.sort(r.deliveries()["delivery_time_s"].to_numpy())
    k = np.arange(40)
    assert np.allclose(t, 0.010 + (k % 4 + 1) * 1e-6 + (k // 4) * 0.020001, rtol=0, atol=1e-9)
    rate = 4 / (0.020001)
    assert abs(36 / (t[-1] - t[0]) - rate) / rate < 0.01
