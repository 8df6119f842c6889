"""Request/reply clients on a shared host's CPU (models.mechanisms.hosts.cpu): a client's
encode stage and its reply's processing run on its host's cores, and a round trip that
visits one host's CPU twice is a cycle the closed-loop rounds advance conservatively
(sim.closed_loop, sim.drivers). Checked against Mean Value Analysis, by hand, and by the
drivers' agreement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network
from pubsim.models.mechanisms.patterns.reqrep import request_reply
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.serialization import SerializationParams
from pubsim.run import simulate
from pubsim.scenario import load_scenario
from pubsim.sim import theory
from pubsim.sim.closed_kernel import eligible
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def _clients(n, codec=None):
    return {
        f"c{i}": PublisherParams(topics=("x",), arrival="closed_loop", window_requests=1, serialization=codec)
        for i in range(n)
    }


def one_host_loop(n, demand_s, loopback_s):
    """``n`` one-request clients and their server on one 1-core host: the server's work
    Exp(demand) and each reply's processing Exp(demand) share the core; loopback delays."""
    g = request_reply(
        server=BrokerParams(ingress_cost_s=Exponential(mean_value=demand_s)),
        link=LinkParams(latency_s=1e-3),
        clients=_clients(n),
        reply_processing=SubscriberParams(subscriptions=("x",), processing_s=Exponential(mean_value=demand_s)),
    )
    return T.place(g, {"h": HostParams(loopback_latency_s=loopback_s)}, {node: "h" for node in g})


def clients_host(n, reply_s, server_s, latency_s):
    """``n`` one-request clients on 1-core host ``a`` (their replies' processing Exp(reply_s)
    shares its core); the server, Exp(server_s), alone on host ``b``."""
    g = request_reply(
        server=BrokerParams(ingress_cost_s=Exponential(mean_value=server_s)),
        link=LinkParams(latency_s=latency_s),
        clients=_clients(n),
        reply_processing=SubscriberParams(subscriptions=("x",), processing_s=Exponential(mean_value=reply_s)),
    )
    return T.place(g, {"a": HostParams(), "b": HostParams()}, {node: "b" if node == "broker" else "a" for node in g})


def _cycle_times(g, reps, duration_s=4.0, warmup_s=0.5):
    out = []
    for r in range(reps):
        d = simulate(g, duration_s=duration_s, warmup_s=warmup_s, seed=29, replication=r).deliveries()
        out.append(d["latency_s"].mean())
    return np.array(out)


@pytest.mark.parametrize(
    "build, demands_s, delay_s",
    [
        # each client's round trip visits the host's one core twice (server, reply): one
        # FCFS exponential queue with demand 2 x 0.5 ms per cycle; 2 x 1 ms loopback delay
        (lambda: one_host_loop(4, 5e-4, 1e-3), [1e-3], 2e-3),
        # replies share the clients' core (0.6 ms), the server has its own (0.4 ms); 2 x 0.5 ms links
        (lambda: clients_host(3, 6e-4, 4e-4, 5e-4), [6e-4, 4e-4], 1e-3),
    ],
    ids=["server-and-clients-on-one-core", "clients-share-a-core"],
)
def test_closed_network_on_a_shared_cpu_is_mva(build, demands_s, delay_s):
    """Mean round trip of one-request clients = MVA's cycle time (Reiser & Lavenberg 1980)
    for the closed product-form network (FCFS exponential queues, constant delays)."""
    g = build()
    n = sum(1 for node in g if g.nodes[node][T.KIND] == T.NodeKind.PUBLISHER)
    expected = theory.mva(demands_s, delay_s, n)["cycle_s"]
    values = _cycle_times(g, reps=4)
    half = stats.t.ppf(0.995, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    err = abs(values.mean() - expected)
    assert err <= max(half, 0.01 * expected), f"{expected} vs {values.mean()} ± {half}"
    assert err <= 0.04 * expected


def test_a_round_trip_through_one_cpu_runs_in_rounds():
    """The loop of one_host_loop is a cycle through cpu:h (not the compiled closed loop):
    the batch driver's rounds run it; its CPU is the host's only station that takes time."""
    g = one_host_loop(2, 5e-4, 1e-3)
    assert not eligible(build_network(g, seed=1))
    res = simulate(g, duration_s=1, warmup_s=0.1, seed=2)
    st = res.stations().set_index("station")
    parts = sum(st.loc[s, "served"] for s in ("broker:broker", "subscriber:c0.reply", "subscriber:c1.reply"))
    assert st.loc["cpu:h", "served"] == pytest.approx(parts, abs=2)  # (stages across the window's ends)
    assert st.loc["broker:broker", "utilization"] == 0.0 and len(res.deliveries()) > 300


def test_hand_timeline_two_clients_on_one_core():
    """Clients c0 and c1 on one core: encode 0.2 ms, reply processing 0.3 ms; server
    0.1 ms on its own host, 1 ms links. At 0 both send: encodes 0-0.2 and 0.2-0.4 ms;
    the server 1.2-1.3 and 1.4-1.5; the replies reach the core at 2.3 and 2.5: processed
    2.3-2.6 and 2.6-2.9 ms (round trips 2.6, 2.9). The first client sends again at 2.6 and
    waits for the core (the other's reply, 2.6-2.9): encode 2.9-3.1, server 4.1-4.2, reply
    5.2-5.5 (2.9 ms); the second's 2.9: encode 3.1-3.3, server 4.3-4.4, reply waits for
    the core 5.5-5.8 (2.9 ms)."""
    codec = SerializationParams(encode_cost_s=2e-4)
    g = request_reply(
        server=BrokerParams(ingress_cost_s=Constant(value=1e-4)),
        link=LinkParams(latency_s=1e-3),
        clients=_clients(2, codec),
        reply_processing=SubscriberParams(subscriptions=("x",), processing_s=Constant(value=3e-4)),
    )
    g = T.place(g, {"h": HostParams(), "srv": HostParams()}, {n: "srv" if n == "broker" else "h" for n in g})
    for driver in ("batch", "reference"):
        d = simulate(g, duration_s=6e-3, seed=1, driver=driver).deliveries().sort_values("publish_time_s")
        ms = d["latency_s"].to_numpy()[:4] * 1e3
        assert sorted(ms[:2]) == pytest.approx([2.6, 2.9], abs=1e-9)
        assert ms[2:] == pytest.approx([2.9, 2.9], abs=1e-9)
        assert d["publish_time_s"].to_numpy()[2:4] * 1e3 == pytest.approx([2.6, 2.9], abs=1e-9)


def test_request_on_a_cpu_without_least_cost_refused_in_one_line():
    """Clients that encode their requests and process their replies on one CPU whose
    costs may be 0 (exponential): no lookahead for the closed-loop rounds."""
    codec = SerializationParams(encode_cost_s=2e-4)
    g = request_reply(
        server=BrokerParams(ingress_cost_s=Constant(value=1e-4)),
        link=LinkParams(latency_s=1e-3),
        clients=_clients(2, codec),
        reply_processing=SubscriberParams(subscriptions=("x",), processing_s=Exponential(mean_value=3e-4)),
    )
    g = T.place(g, {"h": HostParams(), "srv": HostParams()}, {n: "srv" if n == "broker" else "h" for n in g})
    with pytest.raises(ConfigError) as err:
        simulate(g, duration_s=0.01, seed=1)
    assert (err.value.field, err.value.value) == ("host 'h'", "CPU costs with a least value of 0")
    assert "\n" not in str(err.value)


def test_smart_grid_request_reply_shares_the_senders_pi():
    """The smart-grid pair's sender encodes its requests and decodes the replies on one
    Raspberry Pi: its CPU station runs both (one request outstanding: they never overlap)."""
    res = load_scenario(ROOT / "experiments/papers/smart-grid-pair/reqrep.yaml").simulate(duration_s=0.3, warmup_s=0.05)
    st = res.stations().set_index("station")
    parts = st.loc["encode:sender", "served"] + st.loc["subscriber:sender.reply", "served"]
    assert st.loc["cpu:pi-a", "served"] == pytest.approx(parts, abs=2)
    assert st.loc["cpu:pi-a", "mean_waiting"] == 0.0
    assert len(res.deliveries()) > 10


def _two_way_with_a_client(bridge_latency_s):
    """A closed-loop client at b0 beside copies flowing both ways between b0 and b1 (a
    station cycle b0 -> bridge -> b1 -> bridge -> b0), exponential broker costs."""
    brokers = {b: BrokerParams(ingress_cost_s=Exponential(mean_value=1e-4)) for b in ("b0", "b1")}
    pubs = {
        "c": ("b0", PublisherParams(topics=("rr/c",), arrival="closed_loop", window_requests=2)),
        "o": ("b1", PublisherParams(topics=("rr/o",), rate_per_s=800.0)),
    }
    subs = {
        "c.reply": ("b0", SubscriberParams(subscriptions=("rr/c",))),
        "watch0": ("b0", SubscriberParams(subscriptions=("rr/#",))),
        "watch1": ("b1", SubscriberParams(subscriptions=("rr/#",))),
    }
    return T.chain(
        brokers=brokers,
        bridge=LinkParams(latency_s=bridge_latency_s),
        link=LinkParams(latency_s=2e-4),
        publishers=pubs,
        subscribers=subs,
    )


def test_closed_loop_beside_a_cycle_of_brokers_runs_and_the_drivers_agree():
    """Closed loops used to need an acyclic route graph; a cycle with a delay around it is
    now advanced inside each round (the same conservative rounds, per-member bounds)."""
    g = _two_way_with_a_client(3e-4)
    fast = simulate(g, duration_s=0.3, warmup_s=0.05, seed=7, driver="batch")
    ref = simulate(g, duration_s=0.3, warmup_s=0.05, seed=7, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations()), (ref.deliveries(), ref.drops(), ref.stations())
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    d = fast.deliveries()
    assert (d["subscriber"] == "c.reply").sum() > 100 and (d["subscriber"] == "watch0").sum() > 100


def test_closed_loop_cycle_without_delay_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        simulate(_two_way_with_a_client(0.0), duration_s=0.01, seed=1)
    assert err.value.field == "topology" and "zero delay" in str(err.value)
    assert "\n" not in str(err.value)
