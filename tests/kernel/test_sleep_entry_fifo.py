"""The sleep entry of the plain FIFO worker (``BrokerParams.sleep_entry_s``) and its charged wake-ups."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.idle import IdleExitParams
from pubsim.run import simulate
from pubsim.sim import kernels as K
from pubsim.sim.disciplines import FifoDiscipline, Overflow
from pubsim.sim.errors import ConfigError
from pubsim.sim.packets import Packets
from tests.mechanisms.iothreads.test_iothreads import paced_star

# each form reaches another path of pubsim.sim.kernels.fifo_run: _open_run (no limit, no quota),
# _ring_run (a message limit), _ring_offer (a message limit and a quota that never binds) and
# fifo_offer's heap (back-pressure on a byte limit)
FORMS = {
    "open": {},
    "ring": {"capacity_messages": 10},
    "ring-quota": {"capacity_messages": 10, "cpu_quota_s": 1e6, "cpu_period_s": 1e3},
    "heap-backpressure": {"capacity_bytes": 1e9, "overflow": Overflow.BACKPRESSURE},
}


def _serve(disc, times, cost, *, one_by_one):
    n = len(times)
    pk = Packets(np.asarray(times), np.arange(n), np.zeros(n, np.int64), np.full(n, 100), np.asarray(times))
    parts = [slice(i, i + 1) for i in range(n)] if one_by_one else [slice(None)]
    out = []
    for part in parts:
        sub = pk.take(part)
        served = disc.run(sub, np.full(len(sub), cost), np.full(len(sub), 100.0), np.inf)
        out.extend(zip(served.start.tolist(), served.depart.tolist()))
    return out


@pytest.mark.parametrize("one_by_one", [False, True])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_hand_timeline(form, one_by_one):
    # own cost 1, wake-up 2, sleep entry 1.5: 10 wakes the worker (10-13, its wake-up included);
    # 14 comes 1 after the worker ran out of work, within the sleep entry: served at once without a
    # wake-up (14-15); 17 comes 2 after: it wakes the worker (17-20); 19 queues behind it (20-21)
    disc = FifoDiscipline(idle_extra_s=2.0, sleep_entry_s=1.5, **FORMS[form])
    K.set_throttle_window(disc.fs, 0.0, 100.0)
    out = _serve(disc, [10.0, 14.0, 17.0, 19.0], 1.0, one_by_one=one_by_one)
    assert out == [(10.0, 13.0), (14.0, 15.0), (17.0, 20.0), (20.0, 21.0)]
    assert disc.work_s == pytest.approx(4 * 1.0 + 2 * 2.0)  # two wake-ups paid
    assert disc.fs[K.WOKE_N] == 2


@pytest.mark.parametrize("form", sorted(FORMS))
def test_within_the_sleep_entry_there_is_no_exit_latency(form):
    # an idle exit of 0.5 after 1 idle (linear from 0): 10 wakes after idling 10 (exit 0.5: 10.5-13.5);
    # 14 comes 0.5 after, within the sleep entry: no exit latency; 17 comes 2 after: exit 0.5
    disc = FifoDiscipline(idle_extra_s=2.0, sleep_entry_s=1.0, idle_exit=((1.0,), (0.5,)), **FORMS[form])
    K.set_throttle_window(disc.fs, 0.0, 17.0)  # the wake-up starting at 17.5 is after the window
    out = _serve(disc, [10.0, 14.0, 17.0], 1.0, one_by_one=False)
    assert out == [(10.5, 13.5), (14.0, 15.0), (17.5, 20.5)]
    assert disc.fs[K.WOKE_N] == 1


def _broker_row(**broker):
    g = paced_star(None, idle_wakeup_cost_s=30e-6, **broker)  # the plain worker, 10 us a message
    run = simulate(g, duration_s=0.5, warmup_s=0.1, seed=1)
    return run.stations().set_index("station").loc["broker:broker"]


def test_the_wakeups_are_the_charged_ones():
    # 0.5 ms apart, 40 us of work each: the worker has idled 460 us when the next message comes, so
    # a sleep entry of 0.5 ms spares every wake-up after the first (before the window), 0.4 ms none
    rows = {s: _broker_row(sleep_entry_s=s) for s in (0.0, 0.4e-3, 0.5e-3)}
    served = rows[0.0]["served"]
    assert served > 700
    assert rows[0.0]["wakeups"] == served == rows[0.4e-3]["wakeups"]
    assert rows[0.5e-3]["wakeups"] == 0
    cpu = {s: r["utilization"] for s, r in rows.items()}
    assert cpu[0.5e-3] == pytest.approx(cpu[0.0] * 10 / 40, rel=0.01)


def test_wakeups_delayed_by_an_idle_exit_are_counted():
    # with an idle exit every message still wakes the worker, but starts after its arrival: the
    # count is the wake-ups charged, not the messages that started the moment they came
    curve = IdleExitParams(idle_s=(1e-3,), exit_s=(20e-6,))
    row = _broker_row(idle_exit=curve)
    assert row["served"] > 700 and row["wakeups"] == row["served"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"scheduling": "priority"}, "scheduling"),
        ({"overflow": Overflow.DROP_OLDEST}, "overflow"),
        ({"batch_max_messages": 4}, "batch_max_messages"),
    ],
)
def test_refused_where_the_fifo_kernel_does_not_run(extra, field):
    with pytest.raises(ConfigError, match=field):
        BrokerParams(sleep_entry_s=1e-5, **extra)
