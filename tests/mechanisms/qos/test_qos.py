"""QoS handshakes, in-flight window, resends and duplicates (models.mechanisms.qos.rules, sim.window).

Timelines: links 1 MB/s (1 us per byte), 10 ms propagation; broker 2 ms.
MQTT PUBLISH of 992 payload bytes on topic "a": 1 + 2 (remaining length
997) + 2 + 1 + 2 (packet id) = 8 bytes of framing at QoS > 0 -> 1000 bytes,
1 ms; at QoS 0 no packet id: 998 bytes. Handshake packets: 4 bytes, 4 us.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pubsim.models import topology as T
from pubsim.models.mechanisms.qos.rules import exchange_draws
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from tests import ROOT

LINK = LinkParams(latency_s=0.010, bandwidth_Bps=1e6)


@pytest.fixture(params=["batch", "reference"])
def driver(request):
    return request.param


def _schedule(times, size, **kw):
    return PublisherParams(
        topics=("a",),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * len(times),
        schedule_topic=("a",) * len(times),
        **kw,
    )


def _star(pub, sub, *, link=LINK, protocol="mqtt", **broker):
    broker.setdefault("ingress_cost_s", Constant(value=0.002))
    return T.star(
        broker=BrokerParams(**broker), publishers={"p": pub}, subscribers={"s": sub}, link=link, protocol=protocol
    )


def _delivered(r):
    return [round(x, 9) for x in r.deliveries().sort_values("msg")["delivery_time_s"]]


def _station(r, name):
    return r.stations().set_index("station").loc[name]


# --- handshake packets: bytes on links, CPU at the broker --------------------
def test_qos1_hand_timeline_with_broker_ack_cost(driver):
    # uplink 1000 B: 0 -> 1 ms, +10 -> 11 ms; broker 2 ms + 1 PUBACK x 0.1 ms -> 13.1 ms
    # downlink at QoS 0: 998 B -> 14.098 ms, +10 -> 24.098 ms
    g = _star(_schedule([0.0], 992, qos=1), SubscriberParams(subscriptions=("a",)), ack_cost_s=1e-4)
    r = simulate(g, duration_s=1.0, seed=1, driver=driver)
    assert _delivered(r) == [0.024098]
    assert _station(r, "link:p->broker")["control_packets"] == 1


def test_qos2_delivers_on_pubrel(driver):
    # uplink: PUBLISH 1000 B + PUBREL 4 B on the transmitter: 0 -> 1.004 ms, +10 -> 11.004
    # PUBREC back 10.004 ms, PUBREL forward 10.004 ms -> broker gets it at 31.012 ms
    # broker 2 ms + 3 handshake packets x 0.1 ms -> 33.312; downlink QoS 0 998 B -> 34.310, +10 -> 44.310
    g = _star(_schedule([0.0], 992, qos=2), SubscriberParams(subscriptions=("a",)), ack_cost_s=1e-4)
    r = simulate(g, duration_s=1.0, seed=1, driver=driver)
    assert _delivered(r) == [0.04431]
    assert _station(r, "link:p->broker")["control_packets"] == 3


def test_hop_qos_is_the_lower_of_publish_and_granted(driver):
    # publish QoS 2, granted QoS 1: downlink runs QoS 1 (1000 B, delivered on PUBLISH)
    # broker: 2 ms + (3 inbound + 1 outbound) x 0.1 ms = 2.4 ms: 31.012 -> 33.412
    # downlink 1 ms -> 34.412, +10 -> 44.412
    g = _star(_schedule([0.0], 992, qos=2), SubscriberParams(subscriptions=("a",), qos=1), ack_cost_s=1e-4)
    r = simulate(g, duration_s=1.0, seed=1, driver=driver)
    assert _delivered(r) == [0.044412]
    assert _station(r, "link:broker->s")["control_packets"] == 1


def test_the_copies_packets_cost_copy_ack_cost_s_where_it_is_set(driver):
    # as above, the copy's PUBACK at 0.05 ms: 2 ms + 3 x 0.1 + 1 x 0.05 = 2.35 ms: 31.012 -> 33.362
    # downlink 1 ms -> 34.362, +10 -> 44.362
    sub = SubscriberParams(subscriptions=("a",), qos=1)
    g = _star(_schedule([0.0], 992, qos=2), sub, ack_cost_s=1e-4, copy_ack_cost_s=5e-5)
    r = simulate(g, duration_s=1.0, seed=1, driver=driver)
    assert _delivered(r) == [0.044362]
    assert BrokerParams(ack_cost_s=1e-4).copy_ack_s == 1e-4  # None: the copies pay ack_cost_s
    with pytest.raises(ConfigError) as err:
        BrokerParams(copy_ack_cost_s=-1e-6)
    assert err.value.field == "copy_ack_cost_s"


# --- in-flight window ---------------------------------------------------------
def test_window_hand_timeline(driver):
    # protocol none, acks of 0 bytes; 96 B at 10 kB/s = 9.6 ms; no uplink window.
    # uplink departs 9.6, 19.2, 28.8, 38.4, 48.0 ms -> broker (0 cost) 19.6, 29.2, 38.8, 48.4, 58.0
    # downlink, W = 2: m0 19.6->29.2, arrives 39.2, ack 49.2; m1 29.2->38.8, arr 48.8, ack 58.8
    # m2 waits for ack(m0) 49.2 -> 58.8, arr 68.8, ack 78.8; m3 waits for ack(m1) 58.8 -> 68.4, arr 78.4
    # m4 waits for ack(m2) 78.8 -> 88.4, arr 98.4
    link = LinkParams(latency_s=0.010, bandwidth_Bps=1e4)
    g = _star(
        _schedule([0.0] * 5, 96, qos=1, inflight_messages=0),
        SubscriberParams(subscriptions=("a",), qos=1),
        link=link,
        protocol="none",
        max_inflight_messages=2,
        ingress_cost_s=Constant(value=0.0),
    )
    r = simulate(g, duration_s=1.0, seed=1, driver=driver)
    assert _delivered(r) == [0.0392, 0.0488, 0.0688, 0.0784, 0.0984]


def test_window_caps_throughput_at_w_over_rtt():
    # downlink: service 1 ms, RTT 2 x 10 ms: W / (service + RTT) = 5 / 21 ms = 238 msg/s < 500 offered
    pub = PublisherParams(
        topics=("a",), arrival="constant", rate_per_s=500.0, size_bytes=Constant(value=1000), qos=1, inflight_messages=0
    )
    g = _star(
        pub,
        SubscriberParams(subscriptions=("a",), qos=1, inflight_messages=5),
        protocol="none",
        ingress_cost_s=Constant(value=0.0),
    )
    r = simulate(g, duration_s=20.0, warmup_s=2.0, seed=3)
    expected = theory.window_throughput_per_s(5, 1e-3, 0.020)
    assert r.summary()["egress_per_s"] == pytest.approx(expected, rel=0.01)
    # a wider window lets the offered load through
    g = _star(
        pub,
        SubscriberParams(subscriptions=("a",), qos=1, inflight_messages=20),
        protocol="none",
        ingress_cost_s=Constant(value=0.0),
    )
    assert simulate(g, duration_s=20.0, warmup_s=2.0, seed=3).summary()["egress_per_s"] == pytest.approx(500, rel=0.01)


def test_window_applies_to_qos1_not_qos0():
    pub = PublisherParams(topics=("a",), arrival="constant", rate_per_s=500.0, size_bytes=Constant(value=1000), qos=0)
    g = _star(
        pub,
        SubscriberParams(subscriptions=("a",), qos=1, inflight_messages=5),
        protocol="none",
        ingress_cost_s=Constant(value=0.0),
    )
    assert simulate(g, duration_s=10.0, warmup_s=1.0, seed=3).summary()["egress_per_s"] == pytest.approx(500, rel=0.01)


def test_full_client_queue_drops_qos1_too():
    # Mosquitto drops messages beyond max_queued_messages whatever their QoS (R. Light, mosquitto-dev)
    pub = PublisherParams(
        topics=("a",), arrival="constant", rate_per_s=500.0, size_bytes=Constant(value=1000), qos=1, inflight_messages=0
    )
    g = _star(
        pub,
        SubscriberParams(subscriptions=("a",), qos=1, inflight_messages=5),
        protocol="none",
        ingress_cost_s=Constant(value=0.0),
        client_queue_messages=50,
    )
    s = simulate(g, duration_s=20.0, warmup_s=2.0, seed=3).summary()
    assert s["loss_rate_buffer_full"] == pytest.approx(1 - 238.1 / 500, abs=0.01)
    assert s["loss_rate_link_loss"] == 0


# --- resends and duplicates -----------------------------------------------------
def test_exchange_draws_match_closed_forms():
    rng = np.random.default_rng(7)
    p, n = 0.3, 400_000
    first, later, dups = exchange_draws(1 - rng.random(n), 1 - rng.random(n), lambda k: 1 - rng.random(k), p)
    assert first.min() == 1 and dups.min() == 0
    assert first.mean() == pytest.approx(theory.qos_first_arrival_attempts_mean(p), rel=0.01)
    assert dups.mean() == pytest.approx(theory.qos1_duplicates_mean(p), rel=0.02)
    assert (first + later).mean() == pytest.approx(theory.qos1_sends_mean(p), rel=0.01)
    assert np.mean(first + later == 1) == pytest.approx((1 - p) ** 2, abs=0.005)  # P(loss-free)


def _lossy(qos, p, seed, *, sub_qos=None, timeout=0.05):
    link = LinkParams(latency_s=0.001, bandwidth_Bps=1e7, loss_probability=p)
    pub = PublisherParams(
        topics=("a",),
        arrival="poisson",
        rate_per_s=2000.0,
        size_bytes=Constant(value=100),
        qos=qos,
        inflight_messages=0,
        retry_timeout_s=timeout,
    )
    sub = SubscriberParams(subscriptions=("a",), qos=qos if sub_qos is None else sub_qos, inflight_messages=0)
    g = _star(pub, sub, link=link, ingress_cost_s=Constant(value=0.0), retry_timeout_s=timeout, max_inflight_messages=0)
    return simulate(g, duration_s=5.0, warmup_s=0.5, cooldown_s=0.5, seed=seed)


def _ci_contains(values, target, level=0.99):
    values = np.asarray(values, float)
    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    assert abs(values.mean() - target) <= half, (values.mean(), half, target)


def test_qos1_resends_and_duplicates_against_theory():
    p = 0.2
    dup, resent, lost = [], [], []
    for seed in range(6):
        r = _lossy(1, p, seed)
        st = _station(r, "link:broker->s")
        dup.append(st["duplicates"] / st["arrivals"])
        resent.append(st["resent_packets"] / st["arrivals"])
        lost.append(r.summary()["loss_rate"])
    _ci_contains(dup, theory.qos1_duplicates_mean(p))
    _ci_contains(resent, theory.qos1_sends_mean(p) - 1)
    assert max(lost) == 0.0


def test_qos1_latency_grows_by_expected_timeouts():
    # no window, no queueing: latency = base + (first sends - 1) x timeout per hop, 2 hops
    p, timeout = 0.2, 0.05
    base = _lossy(1, 0.0, 1).summary()["latency_mean_s"]
    means = [_lossy(1, p, seed, timeout=timeout).summary()["latency_mean_s"] for seed in range(6)]
    extra = 2 * timeout * (theory.qos_first_arrival_attempts_mean(p) - 1)
    _ci_contains(np.asarray(means) - base, extra)


def test_qos_links_keep_no_per_batch_arrays_between_batches():
    """State held between batches is bounded by what is in flight, not by the batch size:
    a QoS link hands its per-message arrays over and keeps none (issue 17)."""
    r = _lossy(1, 0.2, 3)
    links = [st for st in r.network.stations if hasattr(st.discipline, "take_outcome")]
    assert len(links) == 2 and all(st.stats.arrivals > 5000 for st in links)
    for st in links:
        assert st._counts is None and st._window_inputs is None
        assert len(st.discipline.done) == len(st.discipline.rows) == len(st.discipline.codes) == 0


def test_qos2_has_no_duplicates_and_counts_handshakes():
    p = 0.2
    per_msg = []
    for seed in range(4):
        r = _lossy(2, p, seed)
        st = _station(r, "link:broker->s")
        assert r.summary()["duplicates"] == 0 and r.summary()["loss_rate"] == 0
        per_msg.append(st["control_packets"] / st["arrivals"])
    # PUBREC per PUBLISH arrival 1/(1-p), PUBREL sends 1/(1-p)^2, PUBCOMP per PUBREL arrival 1/(1-p)
    _ci_contains(per_msg, 2 * theory.qos_first_arrival_attempts_mean(p) + theory.qos1_sends_mean(p))


def test_qos0_keeps_link_loss_and_conservation():
    p = 0.1
    r = _lossy(0, p, 2)
    s = r.summary()
    assert s["duplicates"] == 0
    # two lossy hops: P(delivered) = (1-p)^2
    assert s["loss_rate_link_loss"] == pytest.approx(1 - (1 - p) ** 2, abs=0.01)
    lost = sum(v for k, v in r.sink.counts().items() if k.startswith("lost_"))
    assert s["delivered"] + lost == s["expected_deliveries"]


def test_mixed_qos_conservation():
    link = LinkParams(latency_s=0.001, bandwidth_Bps=1e7, loss_probability=0.1)
    pubs = {f"p{q}": PublisherParams(topics=("a",), rate_per_s=500.0, qos=q, retry_timeout_s=0.01) for q in (0, 1, 2)}
    subs = {f"s{q}": SubscriberParams(subscriptions=("a",), qos=q) for q in (0, 1, 2)}
    g = T.star(broker=BrokerParams(retry_timeout_s=0.01), publishers=pubs, subscribers=subs, link=link)
    r = simulate(g, duration_s=3.0, warmup_s=0.5, cooldown_s=0.5, seed=4)
    c = r.sink.counts()
    lost = sum(v for k, v in c.items() if k.startswith("lost_"))
    assert c["delivered"] + lost == c["expected_deliveries"]
    drops = r.drops()
    # only QoS 0 hops lose: p0's messages (hop QoS min(0, granted) = 0 everywhere) and s0's downlink
    assert set(drops["publisher"][drops["place"] != "link:broker->s0"]) == {"p0"}
    assert set(drops["publisher"][drops["place"] == "link:broker->s0"]) == {"p0", "p1", "p2"}
    assert r.summary()["duplicates"] > 0


# --- bad input ------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: PublisherParams(topics=("a",), rate_per_s=1.0, qos=3), "qos"),
        (lambda: SubscriberParams(subscriptions=("a",), qos=-1), "qos"),
        (lambda: SubscriberParams(subscriptions=("a",), qos=1, buffer_messages=5), "buffer_messages"),
        (
            lambda: _star(
                PublisherParams(topics=("a",), rate_per_s=1.0, qos=2),
                SubscriberParams(subscriptions=("a",)),
                protocol="amqp",
            ),
            "p.qos",
        ),
        (
            lambda: _star(
                PublisherParams(topics=("a",), rate_per_s=1.0),
                SubscriberParams(subscriptions=("a",), qos=1),
                protocol="zmq",
            ),
            "s.qos",
        ),
    ],
)
def test_bad_qos_is_a_one_line_error(make, field):
    with pytest.raises(ConfigError) as err:
        g = make()
        simulate(g, duration_s=0.1, seed=0)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_theory_rejects_bad_arguments():
    with pytest.raises(ConfigError):
        theory.qos1_duplicates_mean(1.0)
    with pytest.raises(ConfigError):
        theory.window_throughput_per_s(0, 1e-3, 0.01)


# --- AMQP prefetch flow control and the scenario files ---------------------------


def test_amqp_prefetch_loses_nothing_where_auto_ack_drops():
    from pubsim.scenario import load_scenario

    sc = load_scenario(ROOT / "experiments" / "amqp_flow_control.yaml")
    r = simulate(sc.topology, duration_s=2.0, warmup_s=0.5, seed=sc.seed)
    drops = r.drops()
    assert set(drops["place"]) == {"subscriber:autoack"}  # no drop at the broker (back-pressure) nor for "acked"
    st = _station(r, "link:broker->acked")
    assert st["mean_waiting"] > 100  # the backlog waits at the broker, beyond the prefetch window
    d = r.deliveries()
    late = d[d["publish_time_s"] > 1.5].groupby("subscriber", observed=True)["latency_s"].mean()
    early = d[d["publish_time_s"] < 1.0].groupby("subscriber", observed=True)["latency_s"].mean()
    assert late["acked"] > 1.5 * early["acked"]  # latency grows with the backlog


@pytest.mark.parametrize("name", ["qos_lossy_link", "amqp_flow_control"])
def test_qos_scenarios_run(name):
    from pubsim.scenario import load_scenario

    sc = load_scenario(ROOT / "experiments" / f"{name}.yaml")
    s = simulate(sc.topology, duration_s=3.0, warmup_s=0.5, seed=sc.seed).summary()
    assert s["delivered"] > 0
    if name == "qos_lossy_link":
        assert s["duplicates"] > 0 and 0 < s["loss_rate_link_loss"] < 0.0975


def test_qos_subscriber_at_a_restarting_broker_is_refused():
    with pytest.raises(ConfigError) as err:
        g = _star(
            PublisherParams(topics=("a",), rate_per_s=1.0),
            SubscriberParams(subscriptions=("a",), qos=1),
            restart_at_s=(0.5,),
        )
        simulate(g, duration_s=1.0, seed=0)
    assert err.value.field == "s.qos"


def test_qos_connection_on_a_priority_client_queue_is_refused():
    with pytest.raises(ConfigError) as err:
        g = _star(
            PublisherParams(topics=("a",), rate_per_s=1.0),
            SubscriberParams(subscriptions=("a",), qos=1),
            client_scheduling="priority",
        )
        simulate(g, duration_s=1.0, seed=0)
    assert err.value.field == "link:broker->s.overflow" and "\n" not in str(err.value)
