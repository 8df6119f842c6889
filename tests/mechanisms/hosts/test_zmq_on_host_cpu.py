"""ZeroMQ sockets on a shared host's CPU (models.mechanisms.hosts.cpu, .pool): a socket's
work is its context's one I/O thread on the host's cores, written in batches; the
host's CPU % never exceeds 100 %."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.mechanisms.hosts.pool import CappedPoolDiscipline
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.serialization import SerializationParams
from pubsim.models.params.zmq import ZmqSocketParams
from pubsim.run import simulate
from pubsim.sim import kernels as K
from pubsim.sim.disciplines import BatchDiscipline
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError
from pubsim.sim.packets import Packets

ZERO = Constant(value=0.0)


def _offer(disc, t, service, size, horizon, prio=None):
    n = len(t)
    packets = Packets(t, np.arange(n), np.zeros(n), size, t)
    pr = np.zeros(n, dtype=np.int64) if prio is None else prio
    return disc.run(packets, service, size.astype(float), horizon, pr)


@pytest.mark.parametrize("max_bytes", [np.inf, 900.0])
def test_one_batched_process_on_one_core_is_the_batch_discipline(max_bytes):
    """A batched class alone on one core gives BatchDiscipline's records exactly
    (same batches, shares, departures), fed in several calls."""
    rng = np.random.default_rng(4)
    n = 3000
    t = np.cumsum(rng.exponential(1e-4, n))
    service = rng.exponential(6e-5, n)
    size = rng.integers(50, 400, n)
    rule = dict(batch_max_messages=7, batch_max_bytes=max_bytes, batch_fixed_cost_s=3e-5, idle_extra_s=1e-5)
    ref = BatchDiscipline(**rule)
    pool = CappedPoolDiscipline(
        servers=1, caps=[1], limits=[None], idle=[1e-5], batches=[(7, max_bytes, 3e-5)], idle_extra_s=0.0
    )
    cuts = [0, 700, 701, 1900, n]
    got, want = [], []
    for a, b in zip(cuts, cuts[1:]):
        horizon = t[b - 1] if b < n else np.inf
        for disc, out in ((ref, want), (pool, got)):
            s = _offer(disc, t[a:b], service[a:b], size[a:b], horizon)
            out.append(np.column_stack([s.packets.msg, s.admit, s.start, s.service_end, s.depart]))
    got, want = np.concatenate(got), np.concatenate(want)
    assert len(got) == n
    order = np.argsort(got[:, 0], kind="stable"), np.argsort(want[:, 0], kind="stable")
    np.testing.assert_array_equal(got[order[0]], want[order[1]])
    assert ref.batches_total < n / 1.5  # batches formed


def _two_sockets(times_p, times_q, *, cores=1):
    """Publishers p and q on host h, each with a ZeroMQ socket (send 0.1 ms, 20 us per
    write, 10 us wake-up, up to 8 messages a write); subscriber s on host y, 1 ms away."""
    sock = ZmqSocketParams(
        send_cost_s=Constant(value=1e-4), idle_wakeup_cost_s=1e-5, batch_max_messages=8, batch_fixed_cost_s=2e-5
    )

    def sched(times):
        n = len(times)
        return PublisherParams(
            topics=("t",),
            arrival="schedule",
            schedule_time_s=tuple(times),
            schedule_size_bytes=(100,) * n,
            schedule_topic=("t",) * n,
        )

    return T.brokerless(
        publishers={"p": sched(times_p), "q": sched(times_q)},
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        socket=sock,
        link=LinkParams(latency_s=1e-3),
        protocol="none",
        hosts={"h": HostParams(cores=cores), "y": HostParams()},
        placement={"p": "h", "q": "h", "s": "y"},
    )


@pytest.mark.parametrize(
    "cores, expected_us",
    [(1, [130, 240, 420, 410]), (2, [130, 130, 300, 290])],
)
def test_hand_timeline_two_sockets_on_one_core(cores, expected_us):
    """p sends at 0, 50 and 60 us, q at 10 us. One core: p's write of one message
    0-130 us (20 write + 10 wake-up + 100); q's 130-250 us (it waited for the core;
    no wake-up); p's two waiting messages in one write 250-470 us (20 + 2 x 100).
    Latencies (+1 ms link): p 130, 420, 410 us, q 240 us. On two cores each I/O
    thread has its own core: q 10-140 us; p's batch 130-350 us (it waited for
    p's own thread only)."""
    g = _two_sockets([0.0, 5e-5, 6e-5], [1e-5], cores=cores)
    res = simulate(g, duration_s=0.01, seed=1)
    d = res.deliveries().sort_values(["publish_time_s", "publisher"])
    lat_us = (d["latency_s"].to_numpy() - 1e-3) * 1e6
    p_first, q_first, p_2, p_3 = lat_us
    assert [p_first, q_first, p_2, p_3] == pytest.approx(expected_us, abs=1e-6)
    st = res.stations().set_index("station")
    assert st.loc["cpu:h", "served"] == 4 and st.loc["socket:p.sock", "utilization"] == 0.0


def test_separate_hosts_keep_the_sockets_own_servers():
    """The same schedule with q elsewhere: p's socket alone on h keeps its own batched
    server (as before hosts): p 130, then one write of two 130-350 us; q 130 us."""
    g = _two_sockets([0.0, 5e-5, 6e-5], [1e-5])
    g.graph[T.HOSTS]["z"] = HostParams()
    g.nodes["q"][T.HOST] = "z"
    res = simulate(g, duration_s=0.01, seed=1)
    d = res.deliveries().sort_values(["publish_time_s", "publisher"])
    lat_us = (d["latency_s"].to_numpy() - 1e-3) * 1e6
    assert lat_us == pytest.approx([130, 130, 300, 290], abs=1e-6)
    assert "cpu:h" not in set(res.stations().station)


def _busy_host(rate_per_s, cores=1, publishers=2):
    """Publishers with an encode stage and a ZeroMQ socket (the zmq-pub preset's batching)
    and a subscriber with exponential processing, all on host h."""
    codec = SerializationParams(encode_cost_s=1e-4)
    sock = ZmqSocketParams(
        send_cost_s=Exponential(mean_value=2e-4),
        copy_cost_s=Constant(value=2e-5),
        per_byte_cost_s=1e-9,
        idle_wakeup_cost_s=6e-6,
        batch_max_messages=8192,
        batch_max_bytes=8192,
        batch_fixed_cost_s=2e-5,
    )
    pubs = {
        f"p{i}": PublisherParams(topics=("t",), rate_per_s=rate_per_s, serialization=codec) for i in range(publishers)
    }
    return T.brokerless(
        publishers=pubs,
        subscribers={
            "s": SubscriberParams(subscriptions=("t",), processing_s=Exponential(mean_value=1e-4)),
            "far": SubscriberParams(subscriptions=("t",)),
        },
        socket=sock,
        link=LinkParams(latency_s=1e-4, queue_messages=50),
        handoff=LinkParams(latency_s=2e-6),
        protocol="zmq",
        hosts={"h": HostParams(cores=cores, loopback_latency_s=2.7e-5), "y": HostParams()},
        placement={**{p: "h" for p in pubs}, "s": "h", "far": "y"},
    )


@pytest.mark.parametrize("cores", [1, 2])
def test_host_with_zeromq_processes_never_exceeds_100_percent(cores):
    """Offered about 1.3 cores' worth of work per core (encode 0.1 ms, socket about
    0.24 ms, subscriber 0.1 ms per message): the host runs at 100 %, never more (each
    socket kept its own server before); each process's share adds up to the host's."""
    g = _busy_host(rate_per_s=1500.0 * cores, cores=cores)
    res = simulate(g, duration_s=2, warmup_s=0.3, seed=3)
    h = res.hosts().query("host == 'h'").set_index(["process", "measure"])["value"]
    st = res.stations().set_index("station")
    # busy time is summed per stage in 2^-32 s ticks, each rounded (constant costs round
    # the same way every time): at most half a tick per stage over the 1.7 s window
    rounding_pct = 100.0 * (st.loc["cpu:h", "served"] + 2) * 0.5 / K.TICKS_PER_S / 1.7 / cores
    assert h[("host", "cpu_pct_of_host")] <= 100.0 + rounding_pct
    assert h[("host", "cpu_pct_of_host")] == pytest.approx(100.0, abs=1.0)
    socks = [p for p in h.index.get_level_values(0).unique() if p.startswith("socket:")]
    assert len(socks) == 2 and all(h[(p, "cpu_cores")] > 0.2 for p in socks)
    parts = h.xs("cpu_cores", level="measure").drop("host").sum()
    assert parts == pytest.approx(h[("host", "cpu_cores")], rel=1e-9)
    assert st.loc["cpu:h", "mean_in_service"] == pytest.approx(h[("host", "cpu_cores")], rel=1e-9)


def test_socket_share_counts_its_writes():
    """A socket's CPU is its stages' demand plus its writes' fixed and wake-up times:
    one publisher at 200/s, no queueing (every message a write of its own):
    200 x (0.2 ms send + 20 us copy x 2 peers + 100 B x 1 ns x 2 + 20 us write + 6 us wake-up)."""
    g = _busy_host(rate_per_s=200.0, publishers=1)
    sock = g.nodes["p0.sock"][T.PARAMS]
    g.nodes["p0.sock"][T.PARAMS] = dataclasses.replace(sock, send_cost_s=Constant(value=2e-4))
    g.graph[T.HOSTS]["h"] = HostParams(cores=4, loopback_latency_s=2.7e-5)
    res = simulate(g, duration_s=20, warmup_s=1, seed=5)
    h = res.hosts().query("host == 'h'").set_index(["process", "measure"])["value"]
    size = res.deliveries()["size_bytes"].mean()
    expected = 200.0 * (2e-4 + 2 * 2e-5 + 2 * size * 1e-9 + 2e-5 + 6e-6)
    assert h[("socket:p0.sock", "cpu_cores")] == pytest.approx(expected, rel=0.03)


def test_encode_and_socket_without_delay_refused_in_one_line():
    """An encode stage, a zero-latency hand-off and a socket whose send may take no
    time, on one shared CPU: a cycle with zero delay; the error names the hand-off."""
    g = _busy_host(rate_per_s=100.0)
    for p in ("p0", "p1"):
        g.edges[p, f"{p}.sock"][T.PARAMS] = LinkParams()
    with pytest.raises(ConfigError) as err:
        simulate(g, duration_s=0.01, seed=1)
    assert (err.value.field, err.value.value) == ("handoff.latency_s", 0.0)
    assert "\n" not in str(err.value)
