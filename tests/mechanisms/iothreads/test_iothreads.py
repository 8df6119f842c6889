"""I/O cycles (models.mechanisms.iothreads): hand timelines, CPU per message against the
arrival rate, the busy-server closed form, bad input, the calibrator on a known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.iofit import IoCycleCalibrator, cycles_per_ingress
from pubsim.models import topology as T
from pubsim.models.mechanisms.iothreads.discipline import CycleDiscipline
from pubsim.models.mechanisms.iothreads.passes import PassDiscipline
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim import kernels as K
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from pubsim.sim.packets import Packets


def _serve(disc, times, cost, cycle_cost, *, one_by_one=False):
    n = len(times)
    pk = Packets(times, np.arange(n), np.zeros(n, np.int64), np.full(n, 100), times)
    parts = [slice(i, i + 1) for i in range(n)] if one_by_one else [slice(None)]
    dep = []
    for part in parts:
        sub = pk.take(part)
        disc.set_cycle_cost(np.full(len(sub), cycle_cost))
        dep.extend(disc.run(sub, np.full(len(sub), cost), np.zeros(len(sub)), np.inf).depart.tolist())
    return dep


@pytest.mark.parametrize("one_by_one", [False, True])
def test_hand_timeline(one_by_one):
    # own cost 1, cycle cost 3 served after the cycle's last member:
    # 0 opens (0-1); the other 0 joins (1-2); 2 opens: the first cycle's cost runs 2-5,
    # then 5-6; 2.5 arrived before that cycle began: joins (6-7); 10 opens: cost 7-10, 10-11
    disc = CycleDiscipline()
    dep = _serve(disc, [0.0, 0.0, 2.0, 2.5, 10.0], 1.0, 3.0, one_by_one=one_by_one)
    assert dep == [1.0, 2.0, 6.0, 7.0, 11.0]
    assert disc.cycles_total == 3
    assert disc.work_s == pytest.approx(5 * 1.0 + 3 * 3.0)


def test_most_members_per_cycle():
    # at most 2 messages per cycle: the third of a burst opens the next cycle
    # 0 opens (0-1); 0 joins (1-2); 0 opens: cost 2-5, then 5-6; 0 joins (6-7)
    disc = CycleDiscipline(max_members=2)
    assert _serve(disc, [0.0] * 4, 1.0, 3.0) == [1.0, 2.0, 6.0, 7.0]
    assert disc.cycles_total == 2
    with pytest.raises(ConfigError) as err:
        IoParams(cycle_max_messages=0)
    assert err.value.field == "cycle_max_messages"


def _serve_sized(disc, times, sizes, cost, cycle_cost, *, one_by_one=False):
    """Departures of messages of ``sizes`` bytes (the discipline reads sizes, not payloads)."""
    n = len(times)
    t, size = np.asarray(times, float), np.asarray(sizes, float)
    pk = Packets(t, np.arange(n), np.zeros(n, np.int64), size.astype(np.int64), t)
    parts = [slice(i, i + 1) for i in range(n)] if one_by_one else [slice(None)]
    dep = []
    for part in parts:
        sub = pk.take(part)
        disc.set_cycle_cost(np.full(len(sub), cycle_cost))
        dep.extend(disc.run(sub, np.full(len(sub), cost), size[part], np.inf).depart.tolist())
    return dep


@pytest.mark.parametrize("one_by_one", [False, True])
def test_most_bytes_per_cycle(one_by_one):
    # at most 250 B per cycle, 20 B of framing per message: two 100 B messages (240 B) share a
    # cycle, a third opens the next, as max_members=2 does: 0-1, 1-2, cost 2-5, 5-6, 6-7
    disc = CycleDiscipline(max_bytes=250.0, overhead_bytes=20.0)
    assert _serve_sized(disc, [0.0] * 4, [100] * 4, 1.0, 3.0, one_by_one=one_by_one) == [1.0, 2.0, 6.0, 7.0]
    assert disc.cycles_total == 2
    # a message larger than the limit is read alone, and the next opens a cycle: 0-1, cost 1-4, 4-5
    disc = CycleDiscipline(max_bytes=250.0, overhead_bytes=20.0)
    assert _serve_sized(disc, [0.0, 0.0], [300, 10], 1.0, 3.0, one_by_one=one_by_one) == [1.0, 5.0]
    assert disc.cycles_total == 2
    # bytes and members both limit: whichever is reached first ends the cycle
    disc = CycleDiscipline(max_members=3, max_bytes=1000.0)
    _serve_sized(disc, [0.0] * 7, [100] * 7, 1.0, 3.0, one_by_one=one_by_one)
    assert disc.cycles_total == 3


def test_most_bytes_bad_input():
    with pytest.raises(ConfigError) as err:
        IoParams(cycle_max_bytes=0)
    assert err.value.field == "cycle_max_bytes"
    with pytest.raises(ConfigError) as err:
        IoParams(cycle_max_bytes=65536, cycle_max_per_connection=1)
    assert err.value.field == "cycle_max_bytes" and "\n" not in str(err.value)
    assert IoParams(cycle_max_bytes="64 KiB").cycle_max_bytes == 65536


def test_messages_per_read_follow_the_payload_in_the_simulated_broker():
    # a broker reading at most 64 KiB per cycle, fed far past its limit: messages per cycle are
    # 64 KiB over payload + framing (21 B), as nats-server's reads past its limit were measured
    io = IoParams(cycle_cost_s=20e-6, cycle_max_bytes=65536, message_overhead_bytes=21)
    per_cycle = {}
    for size in (64, 1024):
        b = BrokerParams(ingress_cost_s=Constant(value=5e-6), io=io, overflow="backpressure")
        n = 40_000
        times = tuple(np.arange(n) / 400_000.0)  # twice its limit: a backlog from the first ms on
        pubs = {
            "p": PublisherParams(
                topics=("t",),
                arrival="schedule",
                schedule_time_s=times,
                schedule_size_bytes=(size,) * n,
                schedule_topic=("t",) * n,
            )
        }
        top = T.star(
            broker=b,
            publishers=pubs,
            subscribers={"s": SubscriberParams(subscriptions=("t",))},
            link=LinkParams(latency_s=1e-4),
        )
        st = simulate(top, duration_s=0.1, warmup_s=0.02, seed=0).stations().set_index("station").loc["broker:broker"]
        per_cycle[size] = st["served"] / st["cycles"]
    assert per_cycle[64] == pytest.approx(65536 // 85, rel=0.02)
    assert per_cycle[1024] == pytest.approx(65536 // 1045, rel=0.02)


def _serve_keys(disc, times, keys, cost, cycle_cost, *, one_by_one=False):
    """Departures by message; one by one: each arrival in its own call with the horizon at its
    time, and calls with no arrival at the discipline's wake times, as the reference driver."""
    n = len(times)
    t = np.asarray(times, float)
    pk = Packets(t, np.arange(n), np.zeros(n, np.int64), np.full(n, 100), t)
    parts = [slice(i, i + 1) for i in range(n)] if one_by_one else [slice(None)]
    dep = {}

    def run(sub, ks, horizon):
        disc.set_cycle_cost(np.full(len(sub), cycle_cost))
        disc.set_connections(ks)
        out = disc.run(sub, np.full(len(sub), cost), np.zeros(len(sub)), horizon)
        dep.update(zip(out.packets.msg.tolist(), out.depart.tolist()))

    for part in parts:
        run(pk.take(part), np.asarray(keys)[part], t[part.start] if one_by_one else np.inf)
        later = t[part.start + 1] if one_by_one and part.start + 1 < n else np.inf
        while one_by_one and (w := disc.next_wake()) is not None and w < later:
            run(Packets.empty(), np.empty(0, np.int64), w)
    return [dep[i] for i in range(n)]


@pytest.mark.parametrize("one_by_one", [False, True])
def test_one_message_per_connection_per_pass(one_by_one):
    # own cost 1, pass cost 3, one message per connection per pass (Mosquitto's loop):
    # the pass opened by A at 0 reads A (0-1) and B, ready at its start (1-2); the
    # second A waits for the next pass: cost 2-5, then 5-6 (B leaves before it)
    disc = PassDiscipline(max_per_connection=1)
    assert _serve_keys(disc, [0.0, 0.0, 0.0], [0, 0, 1], 1.0, 3.0, one_by_one=one_by_one) == [1.0, 6.0, 2.0]
    assert disc.cycles_total == 2
    assert disc.work_s == pytest.approx(3 * 1.0 + 2 * 3.0)
    assert CycleDiscipline().cycles_total == 0


@pytest.mark.parametrize("one_by_one", [False, True])
def test_a_pass_reads_what_arrived_by_its_start(one_by_one):
    # own cost 1, pass cost 3, one per connection: A0 at 0 opens pass 1 (0-1); A1 and
    # B at 0.5 arrive after its start: pass 2 opens when it ends (cost 1-4) and reads
    # A1 (4-5) and B (5-6); C at 4.5 arrived after pass 2 began: pass 3 (cost 6-9, 9-10)
    disc = PassDiscipline(max_per_connection=1)
    dep = _serve_keys(disc, [0.0, 0.5, 0.5, 4.5], [0, 0, 1, 2], 1.0, 3.0, one_by_one=one_by_one)
    assert dep == [1.0, 5.0, 6.0, 10.0]
    assert disc.cycles_total == 3


@pytest.mark.parametrize(
    "keys, limit, cycles",
    [
        (np.zeros(64, int), 1, 64),
        (np.arange(64) % 8, 1, 8),
        (np.repeat(np.arange(8), 8), 1, 8),  # eight at a time from each: still one pass per round
        (np.arange(64) % 8, 2, 4),
        (np.arange(64) % 8, None, 1),
        (np.arange(64), 1, 1),
    ],
)
def test_backlog_shares_passes_by_connection(keys, limit, cycles):
    # 64 messages waiting at once: a pass takes `limit` messages of every connection,
    # in whatever order they arrived (none: one cycle reads all)
    if limit is None:
        disc = CycleDiscipline()
        disc.set_cycle_cost(np.full(64, 3.0))
        pk = Packets(np.zeros(64), np.arange(64), np.zeros(64, np.int64), np.full(64, 100), np.zeros(64))
        disc.run(pk, np.ones(64), np.zeros(64), np.inf)
    else:
        disc = PassDiscipline(max_per_connection=limit)
        dep = _serve_keys(disc, np.zeros(64), keys, 1.0, 3.0)
        for k in set(keys.tolist()):  # each connection's messages leave in order
            assert np.all(np.diff([dep[i] for i in np.flatnonzero(keys == k)]) > 0)
    assert disc.cycles_total == cycles
    assert disc.work_s == pytest.approx(64 * 1.0 + cycles * 3.0)


def test_connections_must_match_the_batch():
    disc = PassDiscipline(max_per_connection=1)
    disc.set_cycle_cost(np.zeros(2))
    pk = Packets(np.zeros(2), np.arange(2), np.zeros(2, np.int64), np.full(2, 100), np.zeros(2))
    with pytest.raises(ValueError, match="connections for 0 messages, 2 offered"):
        disc.run(pk, np.ones(2), np.zeros(2), np.inf)
    with pytest.raises(ConfigError) as err:
        IoParams(cycle_max_per_connection=0)
    assert err.value.field == "cycle_max_per_connection"


def _publishers(k, rate_per_s, n_total):
    """k publishers on one topic sharing ``n_total`` messages at ``rate_per_s`` together, interleaved."""
    times = np.arange(n_total) / rate_per_s
    return {
        f"p{j}": PublisherParams(
            topics=("t",),
            arrival="schedule",
            schedule_time_s=tuple(times[j::k]),
            schedule_size_bytes=(64,) * len(times[j::k]),
            schedule_topic=("t",) * len(times[j::k]),
        )
        for j in range(k)
    }


@pytest.mark.parametrize("per_connection", [1, None])
def test_passes_shared_by_publishers_in_the_simulated_broker(per_connection):
    # 60k msg/s into a broker of 10 us own cost and a 10 us pass: one publisher
    # pays a pass per message (20 us: overloaded, 50k msg/s at most); eight
    # publishers share each pass once it backs up (the limit rises towards 100k)
    io = IoParams(cycle_cost_s=10e-6, cycle_max_per_connection=per_connection)
    b = BrokerParams(ingress_cost_s=Constant(value=10e-6), io=io, overflow="backpressure")
    out = {}
    for k in (1, 8):
        top = T.star(
            broker=b,
            publishers=_publishers(k, 60_000.0, 12_000),
            subscribers={"s": SubscriberParams(subscriptions=("t",))},
            link=LinkParams(latency_s=1e-4),
        )
        r = simulate(top, duration_s=0.2, warmup_s=0.02, seed=3)
        broker = r.stations().set_index("station").loc["broker:broker"]
        out[k] = r.deliveries()["latency_s"].max(), broker["cycles"] / broker["served"]
    if per_connection is None:  # a read takes everything buffered: the connection count does not matter
        assert out[1] == pytest.approx(out[8], rel=0.05)
        assert out[1][1] < 0.7
    else:  # one publisher: a pass per message, the queue grows through the run; eight: it stays short
        assert out[1][0] > 0.03 and out[1][1] == 1.0
        assert out[8][0] < 0.003 and out[8][1] < 0.7


def test_hand_timeline_under_quota():
    # quota 0.5 per period 1: 0 runs 0-0.2; 0.3 opens a cycle, so the first cycle's cost 0.5
    # runs 0.2-0.5, stalls, 1.0-1.2, then 1.2-1.4; 1.5 opens one: cost 1.4-1.5, stall,
    # 2.0-2.4, then 2.4-2.5 (period 2's quota spent), stall, 3.0-3.1
    disc = CycleDiscipline(cpu_quota_s=0.5, cpu_period_s=1.0)
    assert _serve(disc, [0.0, 0.3, 1.5], 0.2, 0.5) == pytest.approx([0.2, 1.4, 3.1])


def _cpu_per_message(interval_s, cost=10e-6, cycle=50e-6, n=4000):
    disc = CycleDiscipline()
    _serve(disc, list(np.arange(n) * interval_s), cost, cycle)
    return disc.work_s / n


def test_cpu_per_message_falls_with_rate():
    rates = [500, 2000, 10_000, 20_000, 40_000, 80_000]
    cpu = [_cpu_per_message(1.0 / r) for r in rates]
    assert all(a >= b for a, b in zip(cpu, cpu[1:]))
    assert cpu[0] == pytest.approx(60e-6)  # every message its own cycle: cost + cycle
    assert cpu[-1] < 15e-6  # cycles shared by many messages


@pytest.mark.parametrize("interval_s", [20e-6, 40e-6])
def test_busy_closed_form(interval_s):
    # c < T < c + f: cycles of B = f / (T - c) messages keep the server always busy,
    # so the CPU per message is the interval T (utilization 1)
    assert _cpu_per_message(interval_s) == pytest.approx(interval_s, rel=0.02)


def paced_star(io, **broker):
    """A broker (own cost 10 us, `io` cycles or None) fed 2,000 msg/s evenly paced, three subscribers."""
    b = BrokerParams(ingress_cost_s=Constant(value=10e-6), io=io, overflow="backpressure", **broker)
    times = tuple(np.arange(1000) * 0.5e-3)  # 2000 msg/s, evenly paced
    pubs = {
        "p": PublisherParams(
            topics=("t",),
            arrival="schedule",
            schedule_time_s=times,
            schedule_size_bytes=(64,) * 1000,
            schedule_topic=("t",) * 1000,
        )
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("t",)) for i in range(3)}
    return T.star(broker=b, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4))


def test_cycle_cost_counts_connections_and_shows_in_cpu():
    plain = simulate(paced_star(None), duration_s=0.5, warmup_s=0.1, seed=1)
    io = simulate(paced_star(IoParams(cycle_cost_s=40e-6, flush_cost_s=10e-6)), duration_s=0.5, warmup_s=0.1, seed=1)
    util = [r.stations().set_index("station").loc["broker:broker", "utilization"] for r in (plain, io)]
    # 2000 msg/s, each its own cycle: 10 us own + 40 + 3 x 10 us per cycle
    assert util[0] == pytest.approx(2000 * 10e-6, rel=0.05)
    assert util[1] == pytest.approx(2000 * 80e-6, rel=0.05)
    # the cycle's cost is off the opener's path: same latency at this light load
    assert io.deliveries()["latency_s"].median() == pytest.approx(plain.deliveries()["latency_s"].median())


@pytest.mark.parametrize(
    "broker, field",
    [
        ({"workers": 2}, "broker.workers"),
        ({"queue_messages": 5}, "broker.queue_messages"),
        ({"batch_max_messages": 4}, "broker.batch_max_messages"),
    ],
)
def test_bad_combinations(broker, field):
    with pytest.raises(ConfigError) as err:
        simulate(paced_star(IoParams(cycle_cost_s=1e-5), **broker), duration_s=0.1, seed=0)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def _synthetic(truth):
    rows = []
    for config, payload, fanout in [("a", 64, 1), ("b", 1024, 1), ("c", 64, 4), ("d", 256, 2)]:
        for rate in [200.0, 1000.0, 4000.0, 20_000.0, 80_000.0]:
            x = min(1.0, 1000.0 / rate)  # cycles per message
            d = (
                truth["ingress_cost_s"]
                + fanout * truth["delivery_cost_s"]
                + payload * (1 + fanout) * truth["per_byte_cost_s"]
                + x * (truth["cycle_cost_s"] + fanout * truth["flush_cost_s"])
                + truth["background_cpu_fraction"] / rate
            )
            rows.append(
                {
                    "config": config,
                    "payload_bytes": payload,
                    "fanout": fanout,
                    "ingress_rate_per_s": rate,
                    "demand_s_per_ingress": d,
                    "wakeups_per_ingress": 3.0 * x,
                }
            )
    return pd.DataFrame(rows)


def test_calibrator_recovers_known_parameters():
    truth = {
        "ingress_cost_s": 1e-6,
        "delivery_cost_s": 0.5e-6,
        "per_byte_cost_s": 1e-9,
        "cycle_cost_s": 30e-6,
        "flush_cost_s": 8e-6,
        "background_cpu_fraction": 0.01,
    }
    m = _synthetic(truth)
    assert cycles_per_ingress(m)[:5] == pytest.approx([1.0, 1.0, 0.25, 0.05, 0.0125])
    cal = IoCycleCalibrator().fit(m)
    for k, v in truth.items():
        assert cal.params_[k] == pytest.approx(v, rel=1e-6), k
    assert np.abs(cal.residuals_).max() < 1e-12
    assert cal.params_["cycle_max_messages"] == 80  # 1 / x at the highest load of every configuration


@pytest.mark.parametrize("one_by_one", [False, True])
@pytest.mark.parametrize("per_connection", [None, 1])
def test_hand_timeline_with_sleep_entry(per_connection, one_by_one):
    # own cost 1, pass cost 3, wake-up 2, sleep entry 1.5: 10 wakes the loop (10-13, its wake-up
    # included) and its pass's cost runs 13-16; 17 comes 1 after the loop ran out of work, within
    # the sleep entry: read at once without a wake-up (17-18), its pass's cost 18-21; 23 comes 2
    # after: it wakes the loop (23-26)
    common = {"idle_extra_s": 2.0, "sleep_entry_s": 1.5}
    times = [10.0, 17.0, 23.0]
    disc = CycleDiscipline(**common) if per_connection is None else PassDiscipline(max_per_connection=1, **common)
    K.set_throttle_window(disc.fs, 12.0, 30.0)  # counts the wake-ups starting in [12, 30): 23's, not 10's
    if per_connection is None:
        dep = _serve(disc, times, 1.0, 3.0, one_by_one=one_by_one)
    else:
        dep = _serve_keys(disc, times, [0, 0, 0], 1.0, 3.0, one_by_one=one_by_one)
    assert dep == [13.0, 18.0, 26.0]
    assert disc.work_s == pytest.approx(3 * 1.0 + 3 * 3.0 + 2 * 2.0)  # two wake-ups paid, not three
    assert disc.fs[K.WOKE_N] == 1


def test_sleep_entry_counts_the_wakeups_paid():
    # 2,000 msg/s evenly paced (0.5 ms apart), own cost 10 us, a 40 us pass, a 30 us wake-up: the
    # loop runs out of work 420 us before the next message (450 us if it did not wake), so a sleep
    # entry of 0.5 ms spares every wake-up after the first (before the window) and one of 0.4 ms none
    runs = {
        s: simulate(
            paced_star(
                IoParams(cycle_cost_s=40e-6, cycle_max_per_connection=1), idle_wakeup_cost_s=30e-6, sleep_entry_s=s
            ),
            duration_s=0.5,
            warmup_s=0.1,
            seed=1,
        )
        for s in (0.0, 0.4e-3, 0.5e-3)
    }
    rec = {s: r.stations().set_index("station").loc["broker:broker"] for s, r in runs.items()}
    served = rec[0.0]["served"]
    assert rec[0.0]["wakeups"] == served == rec[0.4e-3]["wakeups"]
    assert rec[0.5e-3]["wakeups"] == 0  # the first message came before the window
    cpu = {s: r["utilization"] for s, r in rec.items()}
    assert cpu[0.5e-3] == pytest.approx(cpu[0.0] * 50 / 80, rel=0.01)  # 10 + 40 us a message instead of 80


def test_the_fit_takes_natss_read_buffer_from_its_source():
    # NATS, its reads counted: a cycle ends at 64 KiB read (nats-server's maxBufSize), not at a
    # fitted message count; without counted reads, or for a broker whose source gives no read
    # limit, cycles are wake-ups with the fitted count
    from pubsim.calibration.iofit import _read_limit, _read_limit_note, reads_buffer

    rows = pd.DataFrame({"broker_reads_per_ingress": [2.0, 0.01]})
    buf = reads_buffer("nats", rows)
    fitted = {"cycle_max_messages": 80, "idle_wakeup_cost_s": 7e-5}
    assert _read_limit(buf, fitted) == {"cycle_max_bytes": 65536, "message_overhead_bytes": 21}
    assert "maxBufSize" in _read_limit_note(buf, fitted) and "70.0 us" in _read_limit_note(buf, fitted)
    assert reads_buffer("zmq-proxy", rows) is None
    assert reads_buffer("nats", rows.assign(broker_reads_per_ingress=[2.0, np.nan])) is None
    assert reads_buffer("nats", pd.DataFrame({"x": [1]})) is None
    assert _read_limit(None, fitted) == {"cycle_max_messages": 80}
    assert IoParams(cycle_cost_s=1e-5, **_read_limit(buf, fitted)).cycle_max_bytes == 65536


def test_calibrator_with_counted_reads_recovers_known_parameters():
    # reads per message: one that returned data per cycle, one empty read per wake-up; the
    # cycles here are the wake-ups at light load and buffers of 64 KiB once they are rare
    truth = {
        "ingress_cost_s": 1e-6,
        "delivery_cost_s": 0.5e-6,
        "per_byte_cost_s": 1e-9,
        "cycle_cost_s": 5e-6,
        "flush_cost_s": 20e-6,
        "background_cpu_fraction": 0.01,
        "idle_wakeup_cost_s": 70e-6,
    }
    buf = {"cycle_max_bytes": 65536, "message_overhead_bytes": 21}
    m = _synthetic(truth)
    wake = cycles_per_ingress(m)
    full = (m["payload_bytes"] + 21) / 65536
    reads = np.maximum(np.minimum(1.0, 2.0 * wake), full)  # a read per wake-up, more near the limit
    m["broker_reads_per_ingress"] = reads + wake
    m["demand_s_per_ingress"] = (
        truth["ingress_cost_s"]
        + m.fanout * truth["delivery_cost_s"]
        + m.payload_bytes * (1 + m.fanout) * truth["per_byte_cost_s"]
        + reads * (truth["cycle_cost_s"] + m.fanout * truth["flush_cost_s"])
        + wake * truth["idle_wakeup_cost_s"]
        + truth["background_cpu_fraction"] / m.ingress_rate_per_s
    )
    cal = IoCycleCalibrator(read_buffer=buf).fit(m)
    assert cal.reads_per_ingress(m) == pytest.approx(reads)
    for k, v in truth.items():
        assert cal.params_[k] == pytest.approx(v, rel=1e-6), k
    assert IoCycleCalibrator().fit(m).params_["idle_wakeup_cost_s"] == 0.0  # cycles are wake-ups there
    with pytest.raises(ConfigError) as err:
        IoCycleCalibrator(read_buffer=buf).fit(m.drop(columns="broker_reads_per_ingress"))
    assert err.value.field == "measurements.broker_reads_per_ingress"
