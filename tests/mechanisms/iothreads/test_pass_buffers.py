"""Event-loop passes behind bounded socket buffers (``io`` passes with ``overload``): hand
timelines of the pass kernel's admission, a simulated broker past its limit, and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.mechanisms.iothreads.passes import PassDiscipline
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.overload import OverloadParams
from pubsim.run import simulate
from pubsim.sim import kernels as K
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from pubsim.sim.packets import Packets


def _serve(disc, times, sizes, *, one_by_one, cost=1.0, cycle_cost=0.0):
    """``{msg: (admit, depart)}`` and ``{msg: drop time}``, all on connection 0; one by one as the
    reference driver calls (each arrival alone with the horizon at its time, then the wake times)."""
    n = len(times)
    t = np.asarray(times, float)
    size = np.asarray(sizes, float)
    pk = Packets(t, np.arange(n), np.zeros(n, np.int64), size.astype(np.int64), t)
    served, dropped = {}, {}

    def run(part, horizon):
        sub = pk.take(part)
        disc.set_cycle_cost(np.full(len(sub), cycle_cost))
        disc.set_connections(np.zeros(len(sub), np.int64))
        out = disc.run(sub, np.full(len(sub), cost), size[part], horizon)
        served.update(zip(out.packets.msg.tolist(), zip(out.admit.tolist(), out.depart.tolist())))
        dropped.update(zip(out.dropped.msg.tolist(), out.drop_t.tolist()))
        assert (out.drop_code == K.DROP_BYTES).all()

    if not one_by_one:
        run(np.arange(n), np.inf)
        return served, dropped
    for i in range(n):
        run(np.arange(i, i + 1), t[i])
        later = t[i + 1] if i + 1 < n else np.inf
        while (w := disc.next_wake()) is not None and w < later:
            run(np.arange(0), w)
    return served, dropped


@pytest.mark.parametrize("one_by_one", [False, True])
def test_a_held_message_is_admitted_when_a_departure_makes_room(one_by_one):
    # 2 bytes of buffer, 1-byte messages, one connection read one message per pass, own cost 1:
    # 0 is read at once (0-1); the second 0 fits (2 bytes) and waits for the next pass; the third
    # does not fit until 0 leaves at 1, the fourth until the second leaves at 2. Passes at 0, 1, 2, 3.
    disc = PassDiscipline(max_per_connection=1, capacity_bytes=2)
    served, dropped = _serve(disc, [0.0] * 4, [1] * 4, one_by_one=one_by_one)
    assert served == {0: (0.0, 1.0), 1: (0.0, 2.0), 2: (1.0, 3.0), 3: (2.0, 4.0)}
    assert dropped == {}
    unbounded = PassDiscipline(max_per_connection=1)
    assert _serve(unbounded, [0.0] * 4, [1] * 4, one_by_one=one_by_one)[0] == {i: (0.0, float(i + 1)) for i in range(4)}


@pytest.mark.parametrize("one_by_one", [False, True])
def test_a_held_message_waits_for_messages_still_waiting_for_their_pass(one_by_one):
    # 2 bytes: 0 (1 B) read at once (0-1), the second 0 (1 B) waits for the next pass, the 2-byte
    # message fits only in an empty station: 0 leaves at 1, the waiting one is read by the pass
    # opened at 1 and leaves at 2; admitted then, it opens the pass at 2 (2-3)
    disc = PassDiscipline(max_per_connection=1, capacity_bytes=2)
    served, _ = _serve(disc, [0.0] * 3, [1, 1, 2], one_by_one=one_by_one)
    assert served == {0: (0.0, 1.0), 1: (0.0, 2.0), 2: (2.0, 3.0)}


@pytest.mark.parametrize("one_by_one", [False, True])
def test_a_message_larger_than_the_buffer_is_dropped_and_changes_nothing(one_by_one):
    disc = PassDiscipline(max_per_connection=1, capacity_bytes=2)
    served, dropped = _serve(disc, [0.0, 0.5, 0.5, 0.7], [1, 3, 1, 1], one_by_one=one_by_one)
    assert dropped == {1: 0.5}
    # 0 is read at once (0-1); the 3-byte message is dropped on arrival; the 1-byte one at 0.5 fits
    # and opens the pass at 1 (1-2); the one at 0.7 finds 2 bytes held, is admitted when 0 leaves
    # at 1, too late to join that pass's one read of the connection, and is read at 2 (2-3)
    assert served == {0: (0.0, 1.0), 2: (0.5, 2.0), 3: (1.0, 3.0)}


@pytest.mark.parametrize("one_by_one", [False, True])
def test_flow_control_charges_messages_admitted_above_the_window(one_by_one):
    # as the first timeline, but a message admitted while the station holds more than 0.5 B costs
    # 0.5 more: the second 0 (1 B held) is read 1-2.5, the third (admitted at 1) 2.5-4, the fourth
    # (admitted when the second leaves, 2.5) 4-5.5
    disc = PassDiscipline(max_per_connection=1, capacity_bytes=2)
    disc.flow_control(window_bytes=0.5, fixed_s=0.5, per_byte_s=0.0)
    served, _ = _serve(disc, [0.0] * 4, [1] * 4, one_by_one=one_by_one)
    assert served == {0: (0.0, 1.0), 1: (0.0, 2.5), 2: (1.0, 4.0), 3: (2.5, 5.5)}
    assert disc.work_s == pytest.approx(1.0 + 3 * 1.5)
    with pytest.raises(ValueError, match="byte capacity"):
        PassDiscipline(max_per_connection=1).flow_control(window_bytes=1, fixed_s=1, per_byte_s=0)


def test_many_held_messages_grow_the_heap_and_slots():
    # 300 messages at once through a 1-message buffer: each is admitted when the one before leaves
    disc = PassDiscipline(max_per_connection=1, capacity_bytes=1)
    served, _ = _serve(disc, [0.0] * 300, [1] * 300, one_by_one=False)
    assert served == {i: (float(i), float(i + 1)) for i in range(300)}


def _star(io, overload, *, rate_per_s=40_000.0):
    broker = BrokerParams(
        ingress_cost_s=Constant(value=10e-6), delivery_cost_s=Constant(value=5e-6), io=io, overload=overload
    )
    pubs = {
        f"p{i}": PublisherParams(topics=(f"t{i}",), rate_per_s=rate_per_s, size_bytes=Constant(value=1000))
        for i in range(2)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=(f"t{i}",)) for i in range(2)}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4))


def test_a_broker_with_passes_past_its_limit_holds_its_publishers_back():
    # two publishers at 40k msg/s each into a broker that serves 93,750 msg/s with its passes (15 us
    # per message, a 2 us pass per message: one connection's message per pass each): with 100 kB of
    # buffer per connection, ingress falls to what it serves, nothing is lost, and the station holds
    # about the two buffers' worth of 1,025-byte messages (195), instead of a backlog growing with
    # the run
    io = IoParams(cycle_cost_s=2e-6, cycle_max_per_connection=1)
    overload = OverloadParams(socket_buffer_bytes=100_000, message_overhead_bytes=25)
    res = simulate(_star(io, overload), duration_s=2.0, warmup_s=0.5, seed=1)
    plain = simulate(_star(io, None), duration_s=2.0, warmup_s=0.5, seed=1)
    b = res.stations().set_index("station").loc["broker:broker"]
    p = plain.stations().set_index("station").loc["broker:broker"]
    assert b.served == pytest.approx(93_750, rel=0.01) and b.served == pytest.approx(p.served, rel=0.01)
    assert b.arrivals == pytest.approx(b.served, abs=200)
    assert p.arrivals > 1.25 * p.served
    assert b.mean_waiting == pytest.approx(200_000 / 1025, abs=2)
    assert p.mean_waiting > 50 * b.mean_waiting
    assert sum(v for k, v in b.items() if str(k).startswith("drops_")) == 0


def test_below_its_limit_the_buffers_change_nothing():
    io = IoParams(cycle_cost_s=2e-6, cycle_max_per_connection=1)
    overload = OverloadParams(socket_buffer_bytes=100_000, message_overhead_bytes=25)
    a = simulate(_star(io, overload, rate_per_s=20_000), duration_s=1.0, warmup_s=0.2, seed=3)
    b = simulate(_star(io, None, rate_per_s=20_000), duration_s=1.0, warmup_s=0.2, seed=3)
    assert a.summary() == b.summary()


def test_overload_needs_passes_not_whole_buffer_cycles():
    io = IoParams(cycle_cost_s=2e-6)  # cycles without a per-connection limit: NATS, the ZeroMQ proxy
    with pytest.raises(ConfigError) as err:
        simulate(_star(io, OverloadParams(socket_buffer_bytes=100_000)), duration_s=0.1, seed=1)
    assert err.value.field == "broker.io.cycle_max_per_connection"
    assert "\n" not in str(err.value)
