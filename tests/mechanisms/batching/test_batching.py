"""Automatic batching (sim.kernels batch kernel, BatchDiscipline, broker batch_* fields).

Hand timelines, the saturation closed form B / (F + B c), and the rule that
batch_max_messages = 1 is exactly the FIFO broker.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.stations.core import BrokerStation
from pubsim.run import simulate
from pubsim.sim.disciplines import BatchDiscipline, FifoDiscipline
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError
from pubsim.sim.packets import Packets


def _packets(times):
    n = len(times)
    return Packets(times, np.arange(n), np.zeros(n, np.int64), np.full(n, 100), times)


def _serve(disc, times, cost, *, horizon=np.inf, one_by_one=False):
    """Departure time per message id (dropped ones: None)."""
    pk = _packets(times)
    out = {}
    parts = [slice(i, i + 1) for i in range(len(times))] if one_by_one else [slice(None)]
    for part in parts:
        sub = pk.take(part)
        h = float(sub.t[-1]) if one_by_one else horizon
        served = disc.run(sub, np.full(len(sub), cost), np.full(len(sub), 100.0), h)
        out.update(zip(served.packets.msg.tolist(), served.depart.tolist()))
    if one_by_one:  # let the last batches start
        served = disc.run(_packets([]), np.empty(0), np.empty(0), np.inf)
        out.update(zip(served.packets.msg.tolist(), served.depart.tolist()))
    return [out.get(i) for i in range(len(times))]


@pytest.mark.parametrize("one_by_one", [False, True])
def test_hand_timeline_arrivals_while_busy_are_batched(one_by_one):
    # F = 1, c = 0.5. t=0 idle: batch {0} 0 -> 1.5. 0.25, 0.5, 0.75 wait; at 1.5
    # batch of 3: 1.5 + 1 + 1.5 = 4.0. 2.5 waits; at 4.0 batch {2.5}: 5.5.
    d = BatchDiscipline(batch_max_messages=10, batch_fixed_cost_s=1.0)
    assert _serve(d, [0.0, 0.25, 0.5, 0.75, 2.5], 0.5, one_by_one=one_by_one) == [1.5, 4.0, 4.0, 4.0, 5.5]
    assert d.batches_total == 3 and d.served_total == 5
    assert d.work_s == pytest.approx(1.5 + 2.5 + 1.5)


def test_hand_timeline_batch_size_limit():
    # B = 2: {0} -> 1.5; {0.25, 0.5} 1.5 -> 3.5; {0.75, 2.5} 3.5 -> 5.5
    d = BatchDiscipline(batch_max_messages=2, batch_fixed_cost_s=1.0)
    assert _serve(d, [0.0, 0.25, 0.5, 0.75, 2.5], 0.5) == [1.5, 3.5, 3.5, 5.5, 5.5]


def test_hand_timeline_byte_limit_and_idle_extra():
    # 100 B each, at most 250 B per batch -> 2 per batch; idle extra 0.25 on the first batch only
    d = BatchDiscipline(batch_max_messages=10, batch_max_bytes=250, batch_fixed_cost_s=1.0, idle_extra_s=0.25)
    assert _serve(d, [0.0, 0.25, 0.5, 0.75], 0.5) == [1.75, 3.75, 3.75, 5.25]


def test_horizon_holds_a_batch_until_its_members_are_known():
    d = BatchDiscipline(batch_max_messages=10, batch_fixed_cost_s=1.0)
    pk = _packets([0.0, 0.25])
    served = d.run(pk, np.full(2, 0.5), np.full(2, 100.0), 1.0)
    assert served.packets.msg.tolist() == [0] and d.next_wake() == 1.5
    served = d.run(_packets([]), np.empty(0), np.empty(0), 1.5)
    assert served.packets.msg.tolist() == [1] and served.depart.tolist() == [3.0]
    assert d.next_wake() is None


def test_finite_buffer_drops_newest_and_backpressure_holds():
    # capacity 2 messages (waiting + in a batch); F = 1, c = 0.5
    drop = BatchDiscipline(capacity_messages=2, batch_max_messages=10, batch_fixed_cost_s=1.0)
    # 0: batch 0 -> 1.5; 0.25 waits; 0.5 finds 2 inside: dropped; 1.75: batch {0.25} 1.5->3.0 + it waits
    assert _serve(drop, [0.0, 0.25, 0.5, 1.75], 0.5) == [1.5, 3.0, None, 4.5]
    bp = BatchDiscipline(capacity_messages=2, overflow="backpressure", batch_max_messages=10, batch_fixed_cost_s=1.0)
    # 0.5 is held until 1.5 (message 0 leaves); at 1.5 batch {0.25} started, 0.5 admitted
    # at 1.5 and waits for the batch at 3.0 -> 4.5
    pk = _packets([0.0, 0.25, 0.5])
    s = bp.run(pk, np.full(3, 0.5), np.full(3, 100.0), np.inf)
    assert s.depart.tolist() == [1.5, 3.0, 4.5]
    assert s.admit.tolist() == [0.0, 0.25, 1.5]


def _star(rate, *, batch, fixed, cost, driver="batch", duration=1.0, queue=None, n_pub=4, arrival="poisson"):
    broker = BrokerParams(
        ingress_cost_s=Constant(value=cost), batch_max_messages=batch, batch_fixed_cost_s=fixed, queue_messages=queue
    )
    pubs = {
        f"p{i}": PublisherParams(topics=("t",), rate_per_s=rate / n_pub, arrival=arrival, size_bytes=Constant(value=32))
        for i in range(n_pub)
    }
    g = T.star(
        broker=broker,
        publishers=pubs,
        subscribers={"s": SubscriberParams(subscriptions=("t",))},
        link=LinkParams(),
        protocol="none",
    )
    return simulate(g, duration_s=duration, warmup_s=0.2, seed=3, driver=driver)


@pytest.mark.parametrize("batch", [2, 10, 50])
def test_saturation_throughput_matches_closed_form(batch):
    fixed, cost = 100e-6, 10e-6
    capacity = batch / (fixed + batch * cost)
    r = _star(3 * capacity, batch=batch, fixed=fixed, cost=cost, queue=5000)
    st = r.stations().set_index("station").loc["broker:broker"]
    assert st["served"] / 0.8 == pytest.approx(capacity, rel=0.01)
    assert st["utilization"] == pytest.approx(1.0, abs=1e-3)


def test_per_message_cost_falls_as_load_rises():
    fixed, cost = 100e-6, 10e-6
    per_msg = []
    for rate in (500.0, 4000.0, 8000.0):
        r = _star(rate, batch=50, fixed=fixed, cost=cost, duration=2.0)
        st = r.stations().set_index("station").loc["broker:broker"]
        per_msg.append(st["utilization"] * 1.8 / st["served"])
    assert per_msg[0] == pytest.approx(fixed + cost, rel=0.1)  # nearly every message alone
    assert per_msg[0] > per_msg[1] > per_msg[2] > cost


def test_batch_one_is_exactly_the_fifo_broker():
    params = BrokerParams(ingress_cost_s=Exponential(mean_value=1e-4))
    assert BrokerParams(batch_max_messages=1, batch_fixed_cost_s=1e-3).batch_max_messages == 1
    from pubsim.sim.rng import StreamFactory

    st = BrokerStation("b", params, filters=1, streams=StreamFactory(1, 0), window=(0, 1))
    assert isinstance(st.discipline, FifoDiscipline)
    a = _star(8000.0, batch=1, fixed=0.0, cost=1e-4)
    b = _star(8000.0, batch=1, fixed=5e-3, cost=1e-4)  # fixed cost ignored without batching
    pd.testing.assert_frame_equal(a.deliveries(), b.deliveries(), check_exact=True)


@pytest.mark.parametrize("kw", [{"workers": 2}, {"cpu_fraction": 0.5}, {"overflow": "drop_oldest"}])
def test_batching_rejects_unsupported_combinations(kw):
    with pytest.raises(ConfigError) as err:
        BrokerParams(batch_max_messages=4, **kw)
    assert str(next(iter(kw))) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("queue,arrival", [(None, "poisson"), (30, "poisson"), (30, "constant")])
def test_drivers_agree_with_batching(queue, arrival):
    runs = [
        _star(30000.0, batch=8, fixed=50e-6, cost=20e-6, driver=d, duration=0.3, queue=queue, arrival=arrival)
        for d in ("batch", "reference")
    ]
    for a, b in zip(
        (runs[0].deliveries(), runs[0].drops(), runs[0].stations()),
        (runs[1].deliveries(), runs[1].drops(), runs[1].stations()),
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(runs[0].deliveries()) > 1000


def test_drivers_agree_on_a_two_way_chain_of_batching_brokers():
    # copies flow both ways between brokers (a cycle of stations: conservative horizons)
    brokers = {
        f"b{i}": BrokerParams(
            ingress_cost_s=Exponential(mean_value=6e-5),
            batch_max_messages=5,
            batch_fixed_cost_s=8e-5,
            queue_messages=40,
        )
        for i in range(3)
    }
    pubs = {
        "left": ("b0", PublisherParams(topics=("x/1", "x/2"), rate_per_s=4000.0)),
        "right": ("b2", PublisherParams(topics=("x/1",), rate_per_s=4000.0)),
    }
    subs = {
        "s0": ("b0", SubscriberParams(subscriptions=("x/1",))),
        "s1": ("b1", SubscriberParams(subscriptions=("x/#",))),
        "s2": ("b2", SubscriberParams(subscriptions=("x/2",))),
    }
    g = T.chain(
        brokers=brokers,
        bridge=LinkParams(latency_s=3e-4, bandwidth_Bps=1e6),
        link=LinkParams(),
        publishers=pubs,
        subscribers=subs,
        forwarding="flood",
    )
    runs = [simulate(g, duration_s=0.3, warmup_s=0.05, seed=8, driver=d) for d in ("batch", "reference")]
    for a, b in zip(
        (runs[0].deliveries(), runs[0].drops(), runs[0].stations()),
        (runs[1].deliveries(), runs[1].drops(), runs[1].stations()),
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(runs[0].deliveries()) > 1000
