"""Every process of a host shares its cores (models.mechanisms.hosts.cpu): one
multi-server FIFO per shared host, checked against closed forms (Pollaczek-Khinchine
for two kinds of processes on one core, Erlang C on two cores), a hand timeline,
the drivers' agreement and what monitoring shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.serialization import SerializationParams
from pubsim.models.params.zmq import ZmqSocketParams
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError

FREE = LinkParams()
ZERO = Constant(value=0.0)


def _two_kinds(*, broker_cost, sub_cost, lam_broker, lam_sub, host, pub=None, sub=None):
    """Host ``h`` runs broker b0's work (fed by p0 from host ``x``, delivered to s0 on
    ``y``) and subscriber s1's work (fed through b1 on ``z``, which takes no time, so
    its copies arrive as p1's Poisson stream). Free links: a delivery's latency is
    its sojourn at ``h``'s CPU."""
    pub = pub or {}
    sub = sub or {}
    return T.chain(
        brokers={"b0": BrokerParams(ingress_cost_s=broker_cost), "b1": BrokerParams(ingress_cost_s=ZERO)},
        bridge=FREE,
        link=FREE,
        publishers={
            "p0": ("b0", PublisherParams(topics=("a",), rate_per_s=lam_broker, **pub.get("p0", {}))),
            "p1": ("b1", PublisherParams(topics=("b",), rate_per_s=lam_sub, **pub.get("p1", {}))),
        },
        subscribers={
            "s0": ("b0", SubscriberParams(subscriptions=("a",))),
            "s1": ("b1", SubscriberParams(subscriptions=("b",), processing_s=sub_cost, **sub)),
        },
        protocol="none",
        hosts={"h": host, "x": HostParams(), "y": HostParams(), "z": HostParams()},
        placement={"b0": "h", "s1": "h", "p0": "x", "p1": "x", "s0": "y", "b1": "z"},
    )


def _latency_by_subscriber(g, reps, duration_s=16.0, warmup_s=2.0, seed=91):
    rows = []
    for r in range(reps):
        d = simulate(g, duration_s=duration_s, warmup_s=warmup_s, seed=seed, replication=r).deliveries()
        rows.append(d.groupby("subscriber")["latency_s"].mean())
    return pd.DataFrame(rows)


def _check(values, expected):
    half = stats.t.ppf(0.995, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    err = abs(values.mean() - expected)
    assert err <= max(half, 0.01 * expected), f"{expected} vs {values.mean()} ± {half}"
    assert err <= 0.05 * expected
    return err / expected


def test_two_kinds_of_processes_on_one_core_are_one_mg1_fifo():
    """Broker Exp(0.3 ms) at 1000/s and subscriber D(0.5 ms) at 800/s on one core:
    one M/G/1 FIFO queue with the mixed demand (Pollaczek-Khinchine): wait
    W = lam E[S^2] / (2 (1 - rho)), each kind's sojourn W + its mean demand."""
    lam0, m0, lam1, d1 = 1000.0, 3e-4, 800.0, 5e-4
    g = _two_kinds(
        broker_cost=Exponential(mean_value=m0),
        sub_cost=Constant(value=d1),
        lam_broker=lam0,
        lam_sub=lam1,
        host=HostParams(cores=1),
    )
    lam, rho = lam0 + lam1, lam0 * m0 + lam1 * d1
    wait = (lam0 * 2 * m0**2 + lam1 * d1**2) / (2 * (1 - rho))
    table = _latency_by_subscriber(g, reps=6)
    _check(table["s0"].to_numpy(), wait + m0)
    _check(table["s1"].to_numpy(), wait + d1)
    assert lam == 1800.0


def test_two_brokers_on_two_cores_are_mmc():
    """Two brokers of 2 workers each, Exp(0.5 ms) at 1600/s each, on a 2-core host: one
    M/M/2 queue (Erlang C) with the summed arrival rate, rho 0.8; each sees its sojourn."""
    lam, m = 1600.0, 5e-4
    g = _two_kinds(
        broker_cost=Exponential(mean_value=m), sub_cost=ZERO, lam_broker=lam, lam_sub=lam, host=HostParams(cores=2)
    )
    for b in ("b0", "b1"):
        g.nodes[b][T.PARAMS] = BrokerParams(workers=2, ingress_cost_s=Exponential(mean_value=m))
    g.nodes["b1"][T.HOST], g.nodes["s1"][T.HOST] = "h", "y"
    expected = theory.mmc_sojourn_mean_s(2, 2 * lam, 1 / m)
    table = _latency_by_subscriber(g, reps=6)
    _check(table.to_numpy().mean(axis=1), expected)
    _check(table["s1"].to_numpy(), expected)


def test_single_threaded_processes_on_two_cores_do_not_queue_for_each_other():
    """A one-worker broker and a subscriber, Exp(0.5 ms) at 1600/s each, on 2 cores: each
    runs on its own thread, so each is an M/M/1 queue (sojourn m / (1 - rho) = 2.5 ms),
    not M/M/2 (1.39 ms): a process uses at most its own threads."""
    lam, m = 1600.0, 5e-4
    g = _two_kinds(
        broker_cost=Exponential(mean_value=m),
        sub_cost=Exponential(mean_value=m),
        lam_broker=lam,
        lam_sub=lam,
        host=HostParams(cores=2),
    )
    table = _latency_by_subscriber(g, reps=6)
    _check(table["s0"].to_numpy(), m / (1 - lam * m))
    _check(table["s1"].to_numpy(), m / (1 - lam * m))


def test_cpu_of_each_process_on_a_capped_pool():
    """One-thread broker Exp(0.5 ms) at 1600/s and subscriber D(0.25 ms) at 2000/s on
    2 cores (event-driven pool, stages held across calls): each process's CPU is its
    offered load, 0.8 and 0.5 cores; the host's their sum."""
    g = _two_kinds(
        broker_cost=Exponential(mean_value=5e-4),
        sub_cost=Constant(value=2.5e-4),
        lam_broker=1600.0,
        lam_sub=2000.0,
        host=HostParams(cores=2),
    )
    res = simulate(g, duration_s=6, warmup_s=1, seed=8)
    h = res.hosts().query("host == 'h'").set_index(["process", "measure"])["value"]
    assert h[("broker:b0", "cpu_cores")] == pytest.approx(0.8, rel=0.03)
    assert h[("subscriber:s1", "cpu_cores")] == pytest.approx(0.5, rel=0.03)
    assert h[("host", "cpu_cores")] == pytest.approx(1.3, rel=0.03)


def _schedule(times):
    return {
        "arrival": "schedule",
        "schedule_time_s": tuple(times),
        "schedule_size_bytes": (100,) * len(times),
        "schedule_topic": ("a",) * len(times),
    }


@pytest.mark.parametrize(
    "shared, cores, expected_ms",
    [(True, 1, [1.0, 1.2, 1.9, 1.7]), (False, 1, [1.0, 0.4, 1.5, 0.4]), (True, 2, [1.0, 0.4, 1.5, 0.4])],
)
def test_hand_timeline_two_processes_on_one_core(shared, cores, expected_ms):
    """Broker work 1 ms (messages A at 0, C at 0.5 ms) and subscriber work 0.4 ms
    (B at 0.2 ms, D at 1.1 ms). One core, FIFO: A 0-1.0, B 1.0-1.4, C 1.4-2.4,
    D 2.4-2.8 ms; latencies 1.0, 1.2, 1.9, 1.7 ms. On separate hosts: 1.0, 0.4, 1.5, 0.4.
    On two cores the one-threaded processes never wait for each other (B starts at
    0.2 while C waits for the broker's thread): as on separate hosts."""
    pub = {"p0": _schedule([0.0, 5e-4]), "p1": _schedule([2e-4, 1.1e-3]) | {"schedule_topic": ("b", "b")}}
    g = _two_kinds(
        broker_cost=Constant(value=1e-3),
        sub_cost=Constant(value=4e-4),
        lam_broker=1.0,
        lam_sub=1.0,
        host=HostParams(cores=cores),
        pub=pub,
    )
    if not shared:
        g.nodes["s1"][T.HOST] = "y"
    d = simulate(g, duration_s=0.01, seed=1).deliveries().sort_values("publish_time_s")
    assert d["latency_s"].to_numpy() * 1e3 == pytest.approx(expected_ms, abs=1e-9)
    assert ("cpu:h" in set(simulate(g, duration_s=0.01, seed=1).stations().station)) == shared


def desktop(rate_per_s=400.0, *, driver_test=False):
    """The seed-000 rig: a publisher (with a JSON encode stage), a broker and a
    subscriber on one 2-core desktop, loopback connections."""
    codec = SerializationParams(format="json", size_ratio=2.0, encode_cost_s=2e-4, decode_cost_s=1e-4)
    return T.star(
        broker=BrokerParams(ingress_cost_s=Exponential(mean_value=4e-4), delivery_cost_s=Constant(value=5e-5)),
        publishers={"p": PublisherParams(topics=("t",), rate_per_s=rate_per_s, serialization=codec)},
        subscribers={
            "s": SubscriberParams(subscriptions=("t",), processing_s=Exponential(mean_value=3e-4), serialization=codec),
            **({"far": SubscriberParams(subscriptions=("t",))} if driver_test else {}),
        },
        link=LinkParams(latency_s=1e-4),
        protocol="mqtt",
        hosts={"desk": HostParams(cores=2, loopback_latency_s=2.7e-5), "other": HostParams(card_Bps=2e6)},
        placement={"p": "desk", "broker": "desk", "s": "desk", **({"far": "other"} if driver_test else {})},
    )


def test_desktop_rig_is_one_host_sharing_two_cores():
    res = simulate(desktop(), duration_s=4, warmup_s=0.5, seed=5)
    st = res.stations().set_index("station")
    assert "cpu:desk" in st.index
    assert st.loc["cpu:desk", "served"] == pytest.approx(3 * st.loc["broker:broker", "served"], rel=1e-3)
    assert st.loc["broker:broker", "utilization"] == 0.0  # its work is on the host's CPU
    h = res.hosts().query("host == 'desk'").set_index(["process", "measure"])["value"]
    parts = sum(h[(p, "cpu_cores")] for p in ("broker:broker", "encode:p", "subscriber:s"))
    assert h[("host", "cpu_cores")] == pytest.approx(parts, rel=1e-9)
    assert h[("host", "cpu_cores")] == pytest.approx(st.loc["cpu:desk", "mean_in_service"], rel=1e-9)
    assert h[("encode:p", "cpu_cores")] == pytest.approx(400 * 2e-4, rel=0.05)  # lam x encode demand


def test_drivers_agree_on_a_shared_host():
    g = desktop(rate_per_s=900.0, driver_test=True)
    fast = simulate(g, duration_s=0.4, warmup_s=0.05, seed=17, driver="batch")
    ref = simulate(g, duration_s=0.4, warmup_s=0.05, seed=17, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations(), fast.hosts()),
        (ref.deliveries(), ref.drops(), ref.stations(), ref.hosts()),
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)
    assert len(fast.deliveries()) > 500


def test_drivers_agree_with_two_kinds_and_a_queue_limit():
    g = _two_kinds(
        broker_cost=Exponential(mean_value=6e-4),
        sub_cost=Exponential(mean_value=5e-4),
        lam_broker=1200.0,
        lam_sub=900.0,
        host=HostParams(cores=1),
    )
    g.nodes["b0"][T.PARAMS] = BrokerParams(ingress_cost_s=Exponential(mean_value=6e-4), queue_messages=4)
    fast = simulate(g, duration_s=0.5, warmup_s=0.05, seed=23, driver="batch")
    ref = simulate(g, duration_s=0.5, warmup_s=0.05, seed=23, driver="reference")
    for a, b in zip((fast.deliveries(), fast.drops()), (ref.deliveries(), ref.drops())):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(fast.drops()) > 0  # overloaded: the host's waiting room (the broker's limit) overflows


@pytest.mark.parametrize("cores", [1, 2])
def test_host_cpu_never_exceeds_the_host(cores):
    """Offered 2.4 cores' worth of work: the host runs at (at most) 100 %."""
    g = _two_kinds(
        broker_cost=Constant(value=1e-3),
        sub_cost=Constant(value=1e-3),
        lam_broker=1200.0 * cores,
        lam_sub=1200.0 * cores,
        host=HostParams(cores=cores),
    )
    g.nodes["b0"][T.PARAMS] = BrokerParams(ingress_cost_s=Constant(value=1e-3), queue_messages=20)
    h = simulate(g, duration_s=3, warmup_s=0.5, seed=3).hosts().set_index(["host", "process", "measure"])["value"]
    assert h[("h", "host", "cpu_pct_of_host")] <= 100.0 + 1e-9
    assert h[("h", "host", "cpu_pct_of_host")] == pytest.approx(100.0, abs=1.0)
    assert h[("h", "broker:b0", "cpu_cores")] + h[("h", "subscriber:s1", "cpu_cores")] == pytest.approx(cores)


def test_background_load_takes_the_hosts_capacity():
    """Background 0.5 of 2 servers: every demand on the host stretched by 1 / (1 - 0.25)."""
    pub = {"p0": _schedule([0.0]), "p1": _schedule([0.5]) | {"schedule_topic": ("b",)}}
    g = _two_kinds(
        broker_cost=Constant(value=1e-3),
        sub_cost=Constant(value=2e-3),
        lam_broker=1.0,
        lam_sub=1.0,
        host=HostParams(cores=2),
        pub=pub,
    )
    g.nodes["b0"][T.PARAMS] = BrokerParams(ingress_cost_s=Constant(value=1e-3), background_cpu_fraction=0.5)
    lat = simulate(g, duration_s=1, seed=1).deliveries().sort_values("publish_time_s")["latency_s"].to_numpy()
    assert lat == pytest.approx([1e-3 / 0.75, 2e-3 / 0.75], rel=1e-9)


def test_encode_stage_runs_at_the_hosts_speed():
    """A 1 ms encode stage on a host of speed 0.5 takes 2 ms (item 2); its decode too."""
    codec = SerializationParams(encode_cost_s=1e-3, decode_cost_s=3e-4)
    g = T.star(
        broker=BrokerParams(ingress_cost_s=ZERO),
        publishers={"p": PublisherParams(topics=("t",), rate_per_s=5.0, serialization=codec)},
        subscribers={"s": SubscriberParams(subscriptions=("t",), serialization=codec)},
        link=FREE,
        protocol="none",
        hosts={"slow": HostParams(speed=0.5), "fast": HostParams()},
        placement={"p": "slow", "broker": "fast", "s": "slow"},
    )
    lat = simulate(g, duration_s=20, seed=2).deliveries()["latency_s"].to_numpy()
    assert lat.min() == pytest.approx(2e-3 + 6e-4, rel=1e-9)
    assert g.nodes["p"][T.PARAMS].serialization.encode_cost_s == 1e-3  # the graph keeps its own


def _error(g):
    with pytest.raises(ConfigError) as err:
        simulate(g, duration_s=0.01, seed=1)
    assert "\n" not in str(err.value)
    return err.value


@pytest.mark.parametrize(
    "broker, field, value",
    [
        (BrokerParams(cpu_fraction=0.5), "node 'b0'.cpu_fraction", 0.5),
        (BrokerParams(batch_max_messages=4), "node 'b0'.batch_max_messages", 4),
        (BrokerParams(scheduling="priority"), "node 'b0'.scheduling", "priority"),
    ],
)
def test_shared_broker_settings_refused_in_one_line(broker, field, value):
    g = _two_kinds(broker_cost=ZERO, sub_cost=Constant(value=1e-4), lam_broker=5, lam_sub=5, host=HostParams())
    g.nodes["b0"][T.PARAMS] = broker
    err = _error(g)
    assert (err.field, err.value) == (field, value)


def test_background_above_the_shared_cpu_refused_in_one_line():
    """Two brokers of 2 workers with 1.5 cores of background each on a 2-core host: 3 >= 2."""
    g = _two_kinds(broker_cost=ZERO, sub_cost=ZERO, lam_broker=5, lam_sub=5, host=HostParams(cores=2))
    for b in ("b0", "b1"):
        g.nodes[b][T.PARAMS] = BrokerParams(workers=2, background_cpu_fraction=1.5)
    g.nodes["b1"][T.HOST] = "h"
    err = _error(g)
    assert (err.field, err.value) == ("host 'h'.background_cpu_fraction", 3.0)


def test_loopback_without_latency_on_a_shared_host_refused_in_one_line():
    """Broker and subscriber on one host talking over loopback: two CPU stages per message,
    a zero-delay cycle without a loopback latency."""
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Exponential(mean_value=2e-4)),
        publishers={"p": PublisherParams(topics=("t",), rate_per_s=100.0)},
        subscribers={"s": SubscriberParams(subscriptions=("t",), processing_s=Exponential(mean_value=2e-4))},
        link=FREE,
        protocol="none",
        hosts={"h": HostParams()},
        placement={"p": "h", "broker": "h", "s": "h"},
    )
    err = _error(g)
    assert (err.field, err.value) == ("host 'h'.loopback_latency_s", 0.0)
    g.graph[T.HOSTS] = {"h": HostParams(loopback_latency_s=1e-6)}
    assert len(simulate(g, duration_s=0.5, seed=1).deliveries()) > 20


def test_shared_subscriber_buffer_refused_in_one_line():
    g = _two_kinds(
        broker_cost=ZERO,
        sub_cost=Constant(value=1e-4),
        lam_broker=5,
        lam_sub=5,
        host=HostParams(),
        sub={"buffer_messages": 3},
    )
    err = _error(g)
    assert (err.field, err.value) == ("node 's1'.buffer_messages", 3)


def test_a_socket_runs_on_the_shared_cpu():
    """Publisher (encode 0.2 ms), its ZeroMQ socket (send 0.1 ms: its I/O thread) and a
    subscriber (0.3 ms) share host h's CPU: three stages per message on cpu:h."""
    codec = SerializationParams(encode_cost_s=2e-4)
    g = T.brokerless(
        publishers={"p": PublisherParams(topics=("t",), rate_per_s=100.0, serialization=codec)},
        subscribers={"s": SubscriberParams(subscriptions=("t",), processing_s=Constant(value=3e-4))},
        socket=ZmqSocketParams(send_cost_s=Constant(value=1e-4), copy_cost_s=ZERO),
        link=LinkParams(latency_s=1e-4),
        hosts={"h": HostParams(loopback_latency_s=1e-5)},
        placement={"p": "h", "s": "h"},
    )
    res = simulate(g, duration_s=2, seed=1)
    st = res.stations().set_index("station")
    assert st.loc["cpu:h", "served"] == pytest.approx(3 * st.loc["socket:p.sock", "served"], abs=3)
    assert st.loc["socket:p.sock", "served"] > 150 and st.loc["socket:p.sock", "utilization"] == 0.0
    lat = res.deliveries()["latency_s"].to_numpy()
    assert lat.min() == pytest.approx(2e-4 + 1e-4 + 1e-5 + 3e-4, rel=1e-9)  # encode, socket, loopback, processing


def test_a_lone_process_keeps_its_own_servers():
    """A host with one CPU-spending process has no CPU station (today's model)."""
    g = _two_kinds(broker_cost=ZERO, sub_cost=ZERO, lam_broker=5, lam_sub=5, host=HostParams())
    names = set(simulate(g, duration_s=0.1, seed=1).stations().station)
    assert not any(n.startswith("cpu:") for n in names)
