"""Hand-computed event timelines on tiny scenarios, for both drivers.

Links: 1 MB/s (1 ms per 1000 bytes), 10 ms propagation, no framing
(protocol "none"), no overhead. Broker: 2 ms per message unless stated.
"""

from __future__ import annotations

import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.heap import HeapTrimParams
from pubsim.models.params.idle import IdleExitParams, WakeCurveParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant

LINK = LinkParams(latency_s=0.010, bandwidth_Bps=1e6)


def _run(times, sizes, *, link=LINK, protocol="none", driver="batch", topic="a", subs=1, **broker):
    broker.setdefault("ingress_cost_s", Constant(value=0.002))
    pub = PublisherParams(
        topics=(topic,),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=tuple(sizes),
        schedule_topic=(topic,) * len(times),
    )
    g = T.star(
        broker=BrokerParams(**broker),
        publishers={"p": pub},
        subscribers={f"s{i}": SubscriberParams(subscriptions=(topic,)) for i in range(subs)},
        link=link,
        protocol=protocol,
    )
    return simulate(g, duration_s=1.0, seed=1, driver=driver)


def _times(result):
    d = result.deliveries().sort_values(["msg", "subscriber"])
    return [round(x, 9) for x in d["delivery_time_s"]]


@pytest.fixture(params=["batch", "reference"])
def driver(request):
    return request.param


def test_two_messages_queue_at_the_broker(driver):
    # msg1: uplink 0->1ms, +10ms -> broker 11ms, served 11->13, downlink 13->14, +10 -> 24 ms
    # msg2: uplink 1->2ms, broker at 12ms waits for msg1, served 13->15, downlink 15->16, -> 26 ms
    r = _run([0.0, 0.001], [1000, 1000], driver=driver)
    assert _times(r) == [0.024, 0.026]
    assert list(r.deliveries()["hops"]) == [2, 2]  # uplink and downlink


def test_uplink_serialization_queues_back_to_back_messages(driver):
    # both published at 0: uplink sends 0->1 ms and 1->2 ms
    # broker: 11->13, 13->15 (msg2 arrives 12, waits); downlink 13->14, 15->16
    r = _run([0.0, 0.0], [1000, 1000], driver=driver)
    assert _times(r) == [0.024, 0.026]


def test_full_buffer_drops_newest(driver):
    # capacity 1 in the broker (queue 0 + 1 worker): msg2 arrives at 12 ms while
    # msg1 is served (11->13): dropped. msg3 arrives at 13 ms as msg1 leaves: admitted.
    r = _run([0.0, 0.001, 0.002], [1000] * 3, queue_messages=0, driver=driver)
    assert _times(r) == [0.024, 0.026]
    drops = r.drops()
    assert list(drops["cause"]) == ["buffer_full"]
    assert list(drops["drop_time_s"].round(9)) == [0.012]
    assert list(drops["place"]) == ["broker:broker"]


def test_backpressure_delays_instead_of_dropping(driver):
    # msg2 held by its publisher until msg1 leaves at 13 ms: served 13->15;
    # msg3 (arrives 13) waits until msg2 leaves at 15: served 15->17.
    r = _run([0.0, 0.001, 0.002], [1000] * 3, queue_messages=0, overflow="backpressure", driver=driver)
    assert _times(r) == [0.024, 0.026, 0.028]
    assert len(r.drops()) == 0
    broker = r.stations().set_index("station").loc["broker:broker"]
    assert broker["mean_blocked"] == pytest.approx((0.001 + 0.002) / 1.0)


def test_drop_oldest_evicts_the_waiting_message(driver):
    # 100-byte messages: uplink 0.1 ms. Broker arrivals 10.1, 11.1, 11.6 ms.
    # msg1 served 10.1->12.1; msg2 waits; msg3 finds the station full (queue 1
    # + 1 in service) and evicts msg2; msg3 served 12.1->14.1.
    # deliveries: msg1 12.1+0.1+10 = 22.2 ms, msg3 14.1+0.1+10 = 24.2 ms
    r = _run([0.0, 0.001, 0.0015], [100] * 3, queue_messages=1, overflow="drop_oldest", driver=driver)
    assert _times(r) == [0.0222, 0.0242]
    drops = r.drops()
    assert list(drops["cause"]) == ["dropped_oldest"]
    assert list(drops["drop_time_s"].round(9)) == [0.0116]


def test_wakeup_cost_only_when_idle(driver):
    # msg1 finds the broker idle: 2 + 0.5 ms; msg2 arrives while busy: 2 ms.
    # msg1: broker 11->13.5, downlink 13.5->14.5 -> 24.5; msg2: 13.5->15.5 -> 26.5
    r = _run([0.0, 0.001], [1000, 1000], idle_wakeup_cost_s=0.0005, driver=driver)
    assert _times(r) == [0.0245, 0.0265]


def test_idle_exit_delays_a_message_that_finds_the_broker_idle(driver):
    # Exit curve through (0, 0), (10 ms, 1 ms), (20 ms, 3 ms), flat after. Broker 2 ms per message.
    # msg1 reaches the broker at 11 ms, idle since 0 (11 ms): exit 1 + 2 * 0.1 = 1.2 ms: 12.2->14.2,
    #   downlink 14.2->15.2, +10 -> 25.2 ms.
    # msg2 reaches it at 12 ms while msg1 waits for the core: queued, no exit: 14.2->16.2 -> 27.2 ms.
    # msg3 reaches it at 61 ms, idle since 16.2 (44.8 ms): exit 3 ms (flat): 64->66 -> 77 ms.
    # msg4 at 67 ms, idle since 66 (1 ms): exit 0.1 ms: 67.1->69.1 -> 80.1 ms.
    # The exit is latency, not work: the broker's CPU is 4 x 2 ms.
    exit_ = IdleExitParams(idle_s=(0.010, 0.020), exit_s=(0.001, 0.003))
    r = _run([0.0, 0.001, 0.050, 0.056], [1000] * 4, idle_exit=exit_, driver=driver)
    assert _times(r) == [0.0252, 0.0272, 0.077, 0.0801]
    broker = r.stations().set_index("station").loc["broker:broker"]
    assert broker["utilization"] == pytest.approx(0.008)  # 8 ms busy in the 1 s window
    assert broker["mean_waiting"] == pytest.approx((0.0012 + 0.0022 + 0.003 + 0.0001) / 1.0)


def test_idle_exit_is_not_charged_to_the_cpu_quota(driver):
    # quota 0.25 core, period 4 ms: 1 ms of CPU per period; exit 1.5 ms after any idle over 1 ms.
    # msg1 reaches the broker at 11 ms: exit 11->12.5, then 2 ms of work: the [12,16) budget pays
    # 12.5->13.5, the [16,20) one 16->17: departs 17 -> downlink 17->18 -> 28 ms. (Without the exit:
    # 11->12, 12->13 -> 24 ms; the exit charged as work: 11->12, 12->13, 16->17, 20->20.5 -> 31.5 ms.)
    exit_ = IdleExitParams(idle_s=(0.001,), exit_s=(0.0015,))
    r = _run([0.0], [1000], cpu_fraction=0.25, cpu_period_s=0.004, idle_exit=exit_, driver=driver)
    assert _times(r) == [0.028]


def test_wake_curve_prices_a_wake_up_by_the_idle_before_it(driver):
    # Wake-up 1 ms; curve through (0, 0), (10 ms, 0.5), (20 ms, 1), flat after; work share 0.5, so a
    # wake-up after t of idle costs share(t) x (1 + 0.5 x 2) ms more. Broker 2 ms per message.
    # msg1 reaches the broker at 11 ms, idle since 0 (11 ms): share 0.55, +1.1 ms: 11->14.1 -> 25.1 ms.
    # msg2 reaches it at 12 ms, queued behind msg1: no wake-up: 14.1->16.1 -> 27.1 ms.
    # msg3 at 61 ms, idle since 16.1 (44.9 ms): share 1, +2 ms: 61->65 -> 76 ms.
    # msg4 at 77 ms, idle since 65 (12 ms): share 0.6, +1.2 ms: 77->80.2 -> 91.2 ms.
    # msg5 at 81 ms, idle since 80.2 (0.8 ms): share 0.04, +0.08 ms: 81->83.08 -> 94.08 ms.
    # Unlike the idle exit this is work: 5 x 2 + 1.1 + 2 + 1.2 + 0.08 = 14.38 ms of CPU.
    curve = WakeCurveParams(idle_s=(0.010, 0.020), share=(0.5, 1.0), work_share=0.5)
    r = _run([0.0, 0.001, 0.050, 0.066, 0.070], [1000] * 5, idle_wakeup_cost_s=0.001, wake_curve=curve, driver=driver)
    assert _times(r) == [0.0251, 0.0271, 0.076, 0.0912, 0.09408]
    broker = r.stations().set_index("station").loc["broker:broker"]
    assert broker["utilization"] == pytest.approx(0.01438)
    assert broker["wakeups"] == 4


def test_heap_trim_charges_the_pages_a_large_message_faults_in_again(driver):
    # 1 GB/s links. msg1, 200,000 B: uplink 0->0.2 ms, broker at 10.2 ms; pages ceil((2 x 200,000
    # - 131,072) / 4096) = 66 at 10 us: 2 + 0.66 ms: 10.2->12.86, downlink ->13.06, +10 -> 23.06 ms.
    # msg2, 1,000 B at 50 ms: no pages (2 x 1,000 < 128 KiB): 60.001->62.001 -> 72.002 ms.
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e9)
    trim = HeapTrimParams(fault_cost_s=1e-5)
    r = _run([0.0, 0.050], [200_000, 1000], link=link, heap_trim=trim, driver=driver)
    assert _times(r) == [0.02306, 0.072002]
    broker = r.stations().set_index("station").loc["broker:broker"]
    assert broker["utilization"] == pytest.approx(0.00466)  # 2 + 0.66 + 2 ms in the 1 s window


def test_two_workers_serve_in_parallel(driver):
    # msg2 arrives at 12 ms and takes the second worker: 12->14, downlink 14->15 -> 25 ms
    r = _run([0.0, 0.001], [1000, 1000], workers=2, driver=driver)
    assert _times(r) == [0.024, 0.025]


def test_fanout_copies_share_the_broker_demand(driver):
    # 3 subscribers: demand = ingress 2 ms + 3 x delivery 1 ms = 5 ms: broker 11->16
    # each downlink is its own link: 16->17, +10 -> 27 ms for every subscriber
    r = _run([0.0], [1000], subs=3, delivery_cost_s=Constant(value=0.001), driver=driver)
    assert _times(r) == [0.027] * 3


def test_mqtt_framing_and_overhead_on_the_wire(driver):
    # payload 10 B on topic "ab": MQTT PUBLISH = 1 + 1 (remaining length 14)
    # + 2 + 2 (topic) = 6 bytes of framing; + 4 overhead = 20 bytes at 1000 B/s = 20 ms
    link = LinkParams(latency_s=0.0, bandwidth_Bps=1000.0, overhead_bytes=4)
    r = _run([0.0], [10], link=link, protocol="mqtt", topic="ab", ingress_cost_s=Constant(value=0.0), driver=driver)
    assert _times(r) == [0.040]


def test_link_transmit_queue_drops_tail(driver):
    # uplink queue of 1: msg2 (published at 0.5 ms while msg1 is on the wire until 1 ms) is dropped
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e6, queue_messages=1)
    r = _run([0.0, 0.0005, 0.0011], [1000] * 3, link=link, driver=driver)
    assert len(r.deliveries()) == 2
    assert list(r.drops()["place"]) == ["link:p->broker"]


def test_cpu_quota_stalls_service_until_the_next_period(driver):
    # quota 0.25 core, period 4 ms: 1 ms of CPU per period. Service 2 ms (+1 ms
    # wake-up when idle). msg1 reaches the broker at 11 ms, idle: 3 ms of work;
    # runs 11->12 (budget of [8,12) spent), 12->13 (budget of [12,16) spent),
    # 16->17: departs 17, downlink 17->18, +10 -> 28 ms. msg2 (arrived 12 ms,
    # no wake-up) starts 17 with the [16,20) budget spent: 20->21, 24->25;
    # downlink 25->26 -> 36 ms.
    r = _run([0.0, 0.001], [1000, 1000], cpu_fraction=0.25, cpu_period_s=0.004, idle_wakeup_cost_s=0.001, driver=driver)
    assert _times(r) == [0.028, 0.036]


def test_light_load_under_a_quota_runs_at_full_speed(driver):
    # one message per 100 ms period uses 3 ms of a 25 ms budget: no stall
    r = _run([0.0, 0.2], [1000, 1000], cpu_fraction=0.25, idle_wakeup_cost_s=0.001, driver=driver)
    assert _times(r) == [0.025, 0.225]


def test_background_cpu_takes_its_share_of_the_quota_first(driver):
    # as the quota test above, with 0.125 core of background load: the messages
    # get 0.125 core = 0.5 ms of CPU per 4 ms period. msg1 (3 ms of work,
    # arrives 11 ms): 11->11.5, 12->12.5, 16->16.5, 20->20.5, 24->24.5,
    # 28->28.5: departs 28.5, downlink 28.5->29.5, +10 -> 39.5 ms.
    r = _run(
        [0.0],
        [1000],
        cpu_fraction=0.25,
        cpu_period_s=0.004,
        idle_wakeup_cost_s=0.001,
        background_cpu_fraction=0.125,
        driver=driver,
    )
    assert _times(r) == [0.0395]


def test_background_cpu_stretches_service_of_an_uncapped_broker(driver):
    # 0.2 core of background on one worker: 2 ms of work take 2 / 0.8 = 2.5 ms.
    # msg1: broker 11->13.5, downlink 13.5->14.5 -> 24.5 ms; msg2 (at 12 ms)
    # 13.5->16, downlink 16->17 -> 27 ms.
    r = _run([0.0, 0.001], [1000, 1000], background_cpu_fraction=0.2, driver=driver)
    assert _times(r) == [0.0245, 0.027]
