"""Cyclic components (copies flowing both ways between brokers): the compiled
event loop (:mod:`pubsim.sim.cycle_kernel`), the optimistic solver
(:mod:`pubsim.sim.optimistic`), its bounded fallback and the conservative
rounds all give the reference driver's records, record for record."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.relay import RelayParams
from pubsim.run import simulate
from pubsim.scenario import parse_scenario
from pubsim.sim.distributions import Constant, Exponential, Uniform
from tests.oracles.test_drivers_agree import qos_chain, relay_chain, two_way_chain

ILDM = Path(__file__).resolve().parents[2] / "experiments" / "ildm"


def _frames(result):
    return result.deliveries(), result.drops(), result.stations()


def _same(a, b):
    for x, y in zip(_frames(a), _frames(b)):
        pd.testing.assert_frame_equal(x, y, check_exact=True)


def _cycle_stats(result):
    stats = list(result.driver.cycle_stats.values())
    assert stats, "the case has no cyclic component handled by the optimistic solver"
    return stats[0]


def priority_restart_chain():
    """A two-way chain whose bridges are priority channels dropping the oldest
    waiting copy (event-driven queues with wake-ups in the cycle), with a
    restarting middle broker and per-publisher priorities."""
    g = two_way_chain("flood")
    bridge = LinkParams(
        latency_s=3e-4,
        bandwidth_Bps=1.2e5,
        jitter_s=Exponential(mean_value=5e-5),
        loss_probability=0.02,
        queue_messages=3,
        scheduling="priority",
        overflow="drop_oldest",
    )
    for a, b in T.broker_links(g):
        g.edges[a, b][T.PARAMS] = bridge
    prio = {"left": 2, "right": 0}
    for n, p in prio.items():
        g.nodes[n][T.PARAMS] = dataclasses.replace(g.nodes[n][T.PARAMS], priority=p)
    b1 = g.nodes["b1"][T.PARAMS]
    g.nodes["b1"][T.PARAMS] = dataclasses.replace(b1, restart_at_s=(0.12, 0.25), restart_downtime_s=0.01)
    return T.validate(g)


def busy_chain():
    """The flood chain near saturation: long busy periods alternate direction,
    so windows need many sweeps (the bound and the fallback are exercised)."""
    g = two_way_chain("flood")
    for i in range(3):
        g.nodes[f"b{i}"][T.PARAMS] = BrokerParams(ingress_cost_s=Exponential(mean_value=2.2e-4), queue_messages=5)
    for n in ("left", "right"):
        g.nodes[n][T.PARAMS] = dataclasses.replace(g.nodes[n][T.PARAMS], rate_per_s=2000.0)
    return g


# the optimistic solver (not the compiled loop), never leaving a window to the conservative rounds for density
OPTIMISTIC = {"cycles": "optimistic", "cycle_dense_arrivals": math.inf}

CYCLIC = {
    "chain-flood": (lambda: two_way_chain("flood"), 0.4),
    "relay-chain-drops": (relay_chain, 0.4),
    "qos-window-bridge": (qos_chain, 0.4),
    "priority-restart-chain": (priority_restart_chain, 0.35),
    "busy-chain": (busy_chain, 0.3),
}


@pytest.mark.parametrize("case", sorted(CYCLIC))
def test_optimistic_and_conservative_equal_reference(case):
    build, duration = CYCLIC[case]
    ref = simulate(build(), duration_s=duration, warmup_s=0.05, seed=3, driver="reference")
    fast = simulate(
        build(), duration_s=duration, warmup_s=0.05, seed=3, batch_options={"cycle_window_messages": 300, **OPTIMISTIC}
    )
    slow = simulate(build(), duration_s=duration, warmup_s=0.05, seed=3, batch_options={"cycles": "conservative"})
    _same(fast, ref)
    _same(slow, ref)
    stats = _cycle_stats(fast)
    assert stats.windows > 1 and len(fast.deliveries()) > 100


def test_cyclic_cases_exercise_what_they_claim():
    r = simulate(priority_restart_chain(), duration_s=0.35, warmup_s=0.05, seed=3)
    causes = set(r.drops()["cause"])
    assert {"dropped_oldest", "link_loss", "broker_restart"} <= causes
    assert any(p.startswith("link:b") and "->b" in p for p in r.drops()["place"])  # drops on a bridge, in the cycle
    r = simulate(qos_chain(), duration_s=0.4, seed=3)
    st = r.stations().set_index("station")
    assert st.filter(like="->b", axis=0)["control_packets"].sum() > 0  # windowed QoS 1 bridges
    r = simulate(relay_chain(), duration_s=0.4, seed=3)
    assert r.stations().set_index("station").loc["relay:b1", "drops_buffer_full"] > 0


def test_fallback_gives_the_same_records():
    """One sweep per window never converges: every window is halved down to
    the smallest, then advanced by the conservative rounds."""
    build, duration = CYCLIC["busy-chain"]
    opt = simulate(build(), duration_s=duration, seed=8, batch_options=OPTIMISTIC)
    forced = simulate(build(), duration_s=duration, seed=8, batch_options={"cycle_max_sweeps": 1, **OPTIMISTIC})
    _same(forced, opt)
    stats = _cycle_stats(forced)
    assert stats.fallback_windows > 0 and stats.split_windows > 0 and stats.sweeps == [1] * len(stats.sweeps)


@pytest.mark.parametrize("bound", [2, 4])
def test_sweeps_never_exceed_the_bound(bound):
    build, duration = CYCLIC["busy-chain"]
    r = simulate(build(), duration_s=duration, seed=8, batch_options={"cycle_max_sweeps": bound, **OPTIMISTIC})
    stats = _cycle_stats(r)
    assert stats.sweeps and max(stats.sweeps) <= bound
    free = simulate(build(), duration_s=duration, seed=8, batch_options={"cycle_max_sweeps": 1000, **OPTIMISTIC})
    assert max(_cycle_stats(free).sweeps) > bound  # the busy chain does need more sweeps than the bound
    _same(r, free)


def test_dense_windows_go_to_the_conservative_rounds():
    """With a density threshold of 0 every window is left to the conservative rounds; same records."""
    build, duration = CYCLIC["relay-chain-drops"]
    dense = simulate(build(), duration_s=duration, seed=4, batch_options={"cycle_dense_arrivals": 0.0})
    opt = simulate(build(), duration_s=duration, seed=4, batch_options=OPTIMISTIC)
    _same(dense, opt)
    stats = _cycle_stats(dense)
    assert stats.dense_windows > 0 and stats.windows == 0
    assert _cycle_stats(opt).windows > 0 and _cycle_stats(opt).dense_windows == 0


def _placement(name):
    return parse_scenario(yaml.safe_load((ILDM / f"{name}.yaml").read_text()), ILDM)


@pytest.mark.parametrize("name", ["placement_b_pf", "placement_b_sf", "placement_c_pf", "placement_c_sf"])
def test_ildm_placements_agree_with_reference(name):
    sc = _placement(name)
    fast = sc.simulate(
        duration_s=0.3, warmup_s=0.05, record="full", batch_options={"cycle_window_messages": 200, **OPTIMISTIC}
    )
    ref = sc.simulate(duration_s=0.3, warmup_s=0.05, record="full", driver="reference")
    _same(fast, ref)
    assert len(fast.deliveries()) > 500


def test_snapshot_restore_replays_the_same_draws():
    """A station rolled back to a snapshot serves the same batch identically."""
    r = simulate(relay_chain(), duration_s=0.05, seed=1)
    station = next(st for st in r.network.stations if st.name == "relay:b0")
    arrivals = r.network.publications(0.0)  # nothing new: build a batch by hand
    t = np.sort(np.random.default_rng(0).uniform(1.0, 1.01, 50))
    visit = np.full(50, int(np.flatnonzero(r.network.plan.station == station.index)[0]))
    batch = type(arrivals)(t, np.arange(50), visit, np.full(50, 32), t)
    snap = station.snapshot()
    first = station.process(batch, 2.0)
    stats_first = station.stats.record()
    station.restore(snap)
    second = station.process(batch, 2.0)
    assert np.array_equal(first.departed.t, second.departed.t) and stats_first == station.stats.record()
    third = station.process(batch.with_time(batch.t + 1.0), 3.0)  # draws move on after a restore
    assert not np.array_equal(third.departed.t - 1.0, first.departed.t)


def open_relay_chain(jitter=True, jitter_on="every_packet"):
    """ILDM relays without queue limits in a two-way chain (the compiled loop runs it): random relay
    costs, inter-subscription table costs (the per-visit load terms), plain bridges (hop QoS 0) with
    random jitter, payloads of many sizes."""
    g = two_way_chain("subscription")
    for i in range(3):
        g.nodes[f"b{i}"][T.RELAY] = RelayParams(
            relay_cost_s=Exponential(mean_value=2e-4),
            forward_cost_s=Exponential(mean_value=1e-5),
            control_cost_s=Constant(value=4e-6),
            hop_qos=0,
            table_entry_cost_s=3e-6,
            table_match_cost_s=7e-6,
        )
    bridge = LinkParams(
        latency_s=5e-4,
        bandwidth_Bps=1e6,
        jitter_s=Exponential(mean_value=5e-5) if jitter else Constant(value=2e-5),
        jitter_on=jitter_on,
    )
    for a, b in T.broker_links(g):
        g.edges[a, b][T.PARAMS] = bridge
    p = g.nodes["left"][T.PARAMS]
    g.nodes["left"][T.PARAMS] = dataclasses.replace(p, size_bytes=Uniform(low=20, high=400))
    return T.validate(g)


COMPILED = {
    "open-relay-chain": (open_relay_chain, 0.4),
    "open-relay-chain-constant-jitter": (lambda: open_relay_chain(jitter=False), 0.4),
    "open-relay-chain-idle-receiver": (lambda: open_relay_chain(jitter_on="idle_receiver"), 0.4),
    "open-relay-chain-constant-jitter-idle-receiver": (
        lambda: open_relay_chain(jitter=False, jitter_on="idle_receiver"),
        0.4,
    ),
}


@pytest.mark.parametrize("case", sorted(COMPILED))
def test_compiled_cycle_equals_reference_and_optimistic(case):
    build, duration = COMPILED[case]
    ref = simulate(build(), duration_s=duration, warmup_s=0.05, seed=3, driver="reference")
    fast = simulate(build(), duration_s=duration, warmup_s=0.05, seed=3, chunk_messages=200)  # several chunks
    opt = simulate(
        build(), duration_s=duration, warmup_s=0.05, seed=3, batch_options={"cycle_window_messages": 300, **OPTIMISTIC}
    )
    assert fast.driver.compiled_cycles and not opt.driver.compiled_cycles
    relays = [st for st in fast.network.stations if st.name.startswith("relay:")]
    assert relays and all(st.load is not None for st in relays)  # the per-visit load terms are exercised
    _same(fast, ref)
    _same(opt, ref)
    assert len(fast.deliveries()) > 500
    # tiny buffers: draws refilled, rows flushed and member queues moved and grown mid-call
    tiny = simulate(build(), duration_s=duration, warmup_s=0.05, seed=3, batch_options={"cycle_block": 16})
    _same(tiny, ref)


def test_compiled_cycle_is_not_used_where_a_member_does_not_qualify():
    """A relay with a queue limit (drops) is not compiled: the optimistic solver runs the component."""
    r = simulate(relay_chain(), duration_s=0.1, seed=3)
    assert not r.driver.compiled_cycles and r.driver.cycle_stats


@pytest.mark.parametrize("name", ["placement_b_sf", "placement_c_pf"])  # (placement C SF has no cycle)
def test_ildm_placements_compiled_agree_with_reference(name):
    sc = _placement(name)
    fast = sc.simulate(duration_s=0.3, warmup_s=0.05, record="full")
    ref = sc.simulate(duration_s=0.3, warmup_s=0.05, record="full", driver="reference")
    assert fast.driver.compiled_cycles
    _same(fast, ref)
