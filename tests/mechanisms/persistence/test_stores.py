"""Product store designs, send modes and read-back (models.mechanisms.persistence):
hand timelines per store, the disk as an M/G/1 queue, group commit capacity,
closed-loop producers (sync 1/(RTT + write + sync), confirms W/RTT,
transactions of N), read-back beyond memory, one-line errors."""

from __future__ import annotations

import math

import pytest

from pubsim.models import presets
from pubsim.models import topology as T
from pubsim.models.mechanisms.persistence.store import batch_rule, read_s, write_s
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.disk import DiskParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.models.params.store import StoreParams
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError

DRIVERS = ["batch", "reference"]


def _sched(times, size, **kw):
    return PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=tuple(times),
        schedule_size_bytes=(size,) * len(times),
        schedule_topic=("t",) * len(times),
        persistent=True,
        **kw,
    )


def _star(broker, publishers, latency_s=0.0, hosts=None):
    g = T.star(
        broker=broker,
        publishers=publishers,
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(latency_s=latency_s),
        protocol="none",
    )
    if hosts is not None:  # everything on the first host
        g.graph[T.HOSTS] = hosts
        for n in g.nodes:
            g.nodes[n][T.HOST] = next(iter(hosts))
    return g


def _times(r):
    return [round(x, 9) for x in r.deliveries().sort_values("publish_time_s")["delivery_time_s"]]


# --- the store arithmetic --------------------------------------------------------------------


def test_write_time_counts_operations_overhead_ack_record_and_large_files():
    disk = DiskParams(sync_latency_s=0.01, bandwidth_Bps=1000.0, op_latency_s=0.1)
    store = StoreParams(
        message_ops=2, overhead_bytes=100, ack_bytes=50, ack_ops=1, large_message_bytes=1000, large_message_ops=2
    )
    # 3 ops x 0.1 + (200 + 100 + 50) / 1000 = 0.65; large (1000 B): + 2 x 0.1 + 0.01 sync, writes 1150 B
    assert write_s(disk, store, [200, 1000]).tolist() == pytest.approx([0.65, 0.3 + 1.15 + 0.2 + 0.01])
    assert batch_rule(disk, store) == (1, 0.01)  # batch_max_messages 1 by default
    assert batch_rule(disk, StoreParams(sync="none", sync_delay_s=0.002)) == (1, 0.002)
    assert batch_rule(DiskParams(batch_max_messages=8, sync_latency_s=0.01), StoreParams(sync="message")) == (1, 0.01)
    assert read_s(DiskParams(op_latency_s=0.1, read_bandwidth_Bps=100.0), StoreParams(read_ops=2), 50) == 0.7
    assert write_s(disk, None, [500]).tolist() == [0.5]  # no store: the payload at the bandwidth, as before


@pytest.mark.parametrize("driver", DRIVERS)
def test_group_commit_with_flush_timer_hand_timeline(driver):
    # sync 0.2 + timer 0.05 per batch; per message 1 op x 0.1 + (100 + 100 overhead) / 1000 = 0.3; at most 2 per batch
    # 0.0 alone: 0 -> 0.25 + 0.3 = 0.55; 0.1, 0.2 wait: 0.55 -> 0.55 + 0.25 + 0.6 = 1.4; 0.3: 1.4 -> 1.95
    disk = DiskParams(sync_latency_s=0.2, bandwidth_Bps=1000.0, batch_max_messages=2, op_latency_s=0.1)
    store = StoreParams(message_ops=1, overhead_bytes=100, sync="group", sync_delay_s=0.05)
    g = _star(BrokerParams(disk=disk, store=store), {"p": _sched([0.0, 0.1, 0.2, 0.3], 100)})
    assert _times(simulate(g, duration_s=3.0, seed=1, driver=driver)) == [0.55, 1.4, 1.4, 1.95]


@pytest.mark.parametrize("driver", DRIVERS)
def test_sync_per_message_and_large_message_files_hand_timeline(driver):
    # sync per message (batches of one): 0.2 + 0.1 = 0.3 each for 100 B; the 1000 B message is a large
    # message: 1.0 transfer + 2 ops x 0.1 + its own sync 0.2 + the batch's sync 0.2 = 1.6
    disk = DiskParams(sync_latency_s=0.2, bandwidth_Bps=1000.0, batch_max_messages=8, op_latency_s=0.1)
    store = StoreParams(message_ops=0, sync="message", large_message_bytes=1000, large_message_ops=2)
    pubs = {"p": _sched([0.0, 0.1], 100), "q": _sched([0.05], 1000)}
    r = simulate(_star(BrokerParams(disk=disk, store=store), pubs), duration_s=4.0, seed=1, driver=driver)
    # 0.0: 0 -> 0.3; 0.05 (large) waits: 0.3 -> 1.9; 0.1 waits: 1.9 -> 2.2
    assert _times(r) == [0.3, 1.9, 2.2]


def test_kahadb_batch_bytes_bound_the_group_commit_capacity():
    # saturated disk, batches limited to 4 messages by bytes: capacity B / (sync + B x per-message)
    disk = DiskParams(sync_latency_s=2e-3, bandwidth_Bps=100e6, batch_max_messages=256, op_latency_s=1e-4)
    store = StoreParams(message_ops=1, sync="group", batch_max_bytes=40_000)
    per = 1e-4 + 10_000 / 100e6
    bound = 4 / (2e-3 + 4 * per)
    pubs = {
        f"p{i}": PublisherParams(
            topics=("t",), rate_per_s=bound / 2, persistent=True, size_bytes=Constant(value=10_000)
        )
        for i in range(4)
    }
    g = _star(BrokerParams(ingress_cost_s=Constant(value=1e-6), disk=disk, store=store), pubs)
    r = simulate(g, duration_s=3.0, warmup_s=1.0, seed=4, drain=False)
    served = r.stations().set_index("station").loc["disk:broker", "served"]
    assert served / 2.0 == pytest.approx(bound, rel=0.01)


def test_disk_with_a_sync_per_message_is_an_mg1_queue():
    # Poisson arrivals, exponential sizes: S = sync + op + size / bandwidth, E[S] = a + m, Var S = m^2
    a, m, lam = 1e-3, 1e-3, 250.0
    disk = DiskParams(sync_latency_s=0.9e-3, bandwidth_Bps=10e6, op_latency_s=0.1e-3)
    store = StoreParams(message_ops=1, sync="message")
    pub = PublisherParams(topics=("t",), rate_per_s=lam, persistent=True, size_bytes=Exponential(mean_value=m * 10e6))
    r = simulate(_star(BrokerParams(disk=disk, store=store), {"p": pub}), duration_s=200.0, warmup_s=5.0, seed=7)
    mean_s, scv = a + m, (m / (a + m)) ** 2
    expected = theory.mg1_sojourn_mean_s(lam, mean_s, scv)
    assert r.deliveries()["latency_s"].mean() == pytest.approx(expected, rel=0.05)


# --- send modes ------------------------------------------------------------------------------


def _producer(mode, window=1, n=1, size=100_000, **kw):
    return PublisherParams(
        topics=("t",),
        arrival="closed_loop",
        send_mode=mode,
        window_requests=window,
        transaction_messages=n,
        persistent=True,
        size_bytes=Constant(value=size),
        **kw,
    )


_DISK = DiskParams(sync_latency_s=1e-3, bandwidth_Bps=500e6, batch_max_messages=256, op_latency_s=1e-4)
_STORE = StoreParams(message_ops=1, overhead_bytes=0, sync="group")


@pytest.mark.parametrize("driver", DRIVERS)
def test_sync_producer_sends_one_per_round_trip_plus_write_and_sync(driver):
    lat, cost, size = 5e-4, 2e-5, 100_000
    broker = BrokerParams(ingress_cost_s=Constant(value=cost), disk=_DISK, store=_STORE)
    r = simulate(_star(broker, {"p": _producer("sync")}, latency_s=lat), duration_s=2.0, seed=1, driver=driver)
    cycle = 2 * lat + cost + _DISK.sync_latency_s + 1e-4 + size / 500e6
    d = r.deliveries()
    assert d["latency_s"].to_numpy() == pytest.approx(cycle)  # one at a time: never waits
    assert len(d) == math.ceil(2.0 / cycle)


def test_confirms_window_limits_throughput_to_w_over_rtt():
    # a 2 ms round trip dominates; writes are short (no sync): W / RTT
    lat, w = 1e-3, 5
    disk = DiskParams(bandwidth_Bps=1e12, op_latency_s=1e-6)
    store = StoreParams(message_ops=1, sync="none")
    broker = BrokerParams(ingress_cost_s=Constant(value=1e-6), disk=disk, store=store)
    r = simulate(
        _star(broker, {"p": _producer("confirms", window=w, size=1000)}, latency_s=lat), duration_s=2.0, seed=1
    )
    rtt = 2 * lat + 1e-6 + 1e-6 + 1000 / 1e12
    assert len(r.deliveries()) / 2.0 == pytest.approx(w / rtt, rel=0.01)
    assert theory.window_throughput_per_s(w, 1e-9, rtt) == pytest.approx(w / rtt, rel=1e-6)


def _sent(r):
    """Messages the producers sent over the whole run."""
    return int(r.summary()["offered_per_s"] * r.duration_s + 0.5)


@pytest.mark.parametrize("driver", DRIVERS)
def test_sync_producer_without_a_consumer_is_confirmed_at_its_sync(driver):
    # no subscriber at all: uplink 0.5 ms (and 100 kB at 1 Gbit/s), broker 20 us, disk alone:
    # sync 1 ms + op 100 us + 100 kB / 500 MB/s; the confirm returns over the uplink's 0.5 ms
    lat, cost, size, bw = 5e-4, 2e-5, 100_000, 125e6
    broker = BrokerParams(ingress_cost_s=Constant(value=cost), disk=_DISK, store=_STORE)
    g = T.star(
        broker=broker,
        publishers={"p": _producer("sync", size=size)},
        subscribers={},
        link=LinkParams(latency_s=lat, bandwidth_Bps=bw),
        protocol="none",
    )
    r = simulate(g, duration_s=1.0, seed=1, driver=driver)
    cycle = (size / bw + lat) + cost + (1e-3 + 1e-4 + size / 500e6) + lat  # 2.82 ms
    assert cycle == pytest.approx(3.12e-3)
    assert _sent(r) == math.ceil(1.0 / cycle)  # 321 sends, one per cycle from t = 0
    assert len(r.deliveries()) == 0


def test_a_slow_consumer_does_not_slow_a_confirms_producer():
    # the producer's rate is set by its window and the disk; a consumer taking 20 ms a message falls behind
    def run(processing_s):
        broker = BrokerParams(ingress_cost_s=Constant(value=2e-5), disk=_DISK, store=_STORE)
        sub = SubscriberParams(subscriptions=("t",), processing_s=Constant(value=processing_s))
        g = T.star(
            broker=broker,
            publishers={"p": _producer("confirms", window=4)},
            subscribers={"s": sub},
            link=LinkParams(latency_s=5e-4),
            protocol="none",
        )
        return simulate(g, duration_s=1.0, seed=1)

    fast, slow = run(0.0), run(0.02)
    assert _sent(fast) == _sent(slow) > 1000  # the producer does not see the consumer
    in_time = [int((r.deliveries()["delivery_time_s"] <= 1.0).sum()) for r in (fast, slow)]
    # while the consumer falls behind: the first copy reaches it at 0.5 + 0.02 + 1.3 + 0.5 ms = 2.32 ms,
    # then one per 20 ms: 2.32 ms + 20 ms x k <= 1 s for k = 0..48
    assert in_time[1] == 49 < 0.1 * in_time[0]


@pytest.mark.parametrize("subscribed", [True, False])
def test_confirms_window_without_a_consumer_is_w_over_rtt(subscribed):
    lat, w = 1e-3, 5
    disk = DiskParams(bandwidth_Bps=1e12, op_latency_s=1e-6)
    store = StoreParams(message_ops=1, sync="none")
    broker = BrokerParams(ingress_cost_s=Constant(value=1e-6), disk=disk, store=store)
    g = T.star(
        broker=broker,
        publishers={"p": _producer("confirms", window=w, size=1000)},
        subscribers={"s": SubscriberParams(subscriptions=("t",))} if subscribed else {},
        link=LinkParams(latency_s=lat),
        protocol="none",
    )
    r = simulate(g, duration_s=2.0, seed=1)
    rtt = 2 * lat + 1e-6 + 1e-6 + 1000 / 1e12  # uplink, broker, disk, confirm back over the uplink
    assert _sent(r) / 2.0 == pytest.approx(w / rtt, rel=0.01)


@pytest.mark.parametrize("driver", DRIVERS)
def test_transactions_of_n_commit_together(driver):
    # N = 4 sent at once: the first finds the disk idle (alone: sync + write), the other 3 share the next sync;
    # the next transaction starts when the last is confirmed
    lat, size, n = 5e-4, 100_000, 4
    w = 1e-4 + size / 500e6
    broker = BrokerParams(disk=_DISK, store=_STORE)
    r = simulate(
        _star(broker, {"p": _producer("transactions", n=n)}, latency_s=lat), duration_s=1.0, seed=1, driver=driver
    )
    cycle = lat + (1e-3 + w) + (1e-3 + (n - 1) * w) + lat
    d = r.deliveries().sort_values("publish_time_s")
    starts = sorted(set(round(t, 9) for t in d["publish_time_s"]))
    assert starts[:3] == pytest.approx([0.0, cycle, 2 * cycle])
    assert (d.groupby("publish_time_s").size().iloc[:-1] == n).all()


# --- read-back ------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_preloaded_backlog_beyond_memory_is_read_back(driver):
    # 5 stored messages of 100 B published at 0; the broker takes 1 s each; memory holds 250 B.
    # Message k arrives at the read stage at k + 1 with k x 100 B stored ahead of it: k = 3, 4 are read back
    # (1 op x 0.1 + 100 B / 500 B/s = 0.3 s) and the ack record (10 B at 100 B/s) costs each 0.1 s.
    disk = DiskParams(bandwidth_Bps=100.0, read_bandwidth_Bps=500.0, op_latency_s=0.1)
    store = StoreParams(memory_bytes=250, ack_bytes=10, read_ops=1)
    broker = BrokerParams(ingress_cost_s=Constant(value=1.0), disk=disk, store=store)
    r = simulate(_star(broker, {"p": _sched([0.0] * 5, 100, preloaded=True)}), duration_s=8.0, seed=1, driver=driver)
    assert _times(r) == [1.1, 2.1, 3.1, 4.4, 5.4]
    assert r.stations().set_index("station").loc["disk:broker", "served"] == 0  # preloaded: no write


def test_memory_counts_the_hosts_page_cache():
    store = StoreParams(memory_bytes=100, memory_fraction=0.1, page_cache_fraction=0.2)
    assert store.resident_bytes(1000) == pytest.approx(400)
    assert store.resident_bytes(None) == math.inf  # a share of an unstated machine does not bind
    assert StoreParams(memory_bytes=100, page_cache_fraction=0.2).resident_bytes(None) == 100
    assert StoreParams().resident_bytes(1000) == math.inf


def test_read_stage_takes_its_memory_from_the_host():
    disk = DiskParams(bandwidth_Bps=100.0, read_bandwidth_Bps=500.0, op_latency_s=0.1)
    store = StoreParams(memory_bytes=0, page_cache_fraction=0.5)
    broker = BrokerParams(ingress_cost_s=Constant(value=1.0), disk=disk, store=store)
    hosts = {"h": HostParams(memory_bytes=500)}  # 250 B resident: as above
    r = simulate(_star(broker, {"p": _sched([0.0] * 5, 100, preloaded=True)}, hosts=hosts), duration_s=8.0, seed=1)
    assert _times(r) == [1.0, 2.0, 3.0, 4.3, 5.3]


def test_a_store_with_unlimited_memory_adds_no_stage_to_written_messages():
    broker = BrokerParams(disk=_DISK, store=_STORE)
    r = simulate(_star(broker, {"p": _sched([0.0, 0.5], 100)}), duration_s=1.0, seed=1)
    st = r.stations().set_index("station")
    assert st.loc["read:broker", "served"] == 0 and st.loc["disk:broker", "served"] == 2


# --- presets and errors ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rabbitmq-msg-store", "activemq-kahadb", "artemis-journal"])
def test_store_presets_build_and_state_their_sources(name):
    spec = presets.load("store", name)
    store = from_mapping(StoreParams, presets.apply("store", {"preset": name}), name)
    assert store.product and spec["provenance"]["reference"] and spec["provenance"]["note"]


def test_products_differ_on_500kB_messages():
    disk = from_mapping(DiskParams, presets.apply("disk", {"preset": "ssd-disk"}), "ssd")
    t = {
        n: float(write_s(disk, from_mapping(StoreParams, presets.apply("store", {"preset": n}), n), 500_000))
        for n in ("rabbitmq-msg-store", "activemq-kahadb", "artemis-journal")
    }
    assert t["artemis-journal"] > t["rabbitmq-msg-store"] > t["activemq-kahadb"]  # own file + sync > 2 ops > 1 op


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: BrokerParams(store=StoreParams()), "store"),
        (lambda: PublisherParams(topics=("t",), rate_per_s=1.0, send_mode="sync"), "arrival"),
        (lambda: _producer("sync", window=2), "window_requests"),
        (lambda: _producer("transactions", window=2, n=3), "window_requests"),
        (lambda: _producer("transactions", n=3, request_timeout_s=1.0), "request_timeout_s"),
        (lambda: PublisherParams(topics=("t",), rate_per_s=1.0, transaction_messages=3), "transaction_messages"),
        (lambda: PublisherParams(topics=("t",), rate_per_s=1.0, preloaded=True), "preloaded"),
        (lambda: StoreParams(sync="sometimes"), "sync"),
        (lambda: StoreParams(large_message_bytes=0), "large_message_bytes"),
        (lambda: DiskParams(read_bandwidth_Bps=0.0), "read_bandwidth_Bps"),
    ],
)
def test_bad_combinations_are_one_line_errors(build, field):
    with pytest.raises(ConfigError) as err:
        build()
    assert err.value.field == field and "\n" not in str(err.value)
