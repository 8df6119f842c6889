"""A wake-up priced by the idle time before it (models.params.idle.WakeCurveParams, sim.kernels.wake_extra_s)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.idle import WakeCurveParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.run import simulate
from pubsim.sim import kernels as K
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError

CURVE = WakeCurveParams(idle_s=(1e-3, 1e-2), share=(0.2, 1.0), work_share=0.5)


def _fs(curve=CURVE, extra=1e-4):
    fs = np.zeros(K.FS_LEN)
    fs[K.IDLE_EXTRA] = extra
    if curve is not None:
        K.set_wake_curve(fs, *curve.curve)
    return fs


@pytest.mark.parametrize(
    ("idle", "work", "expect"),
    [
        # share(idle) x (1e-4 + 0.5 x work): through (0, 0), linear between the points, flat after
        (0.0, 2e-4, 0.0),
        (5e-4, 2e-4, 0.1 * 2e-4),
        (1e-3, 0.0, 0.2 * 1e-4),
        (5.5e-3, 2e-4, 0.6 * 2e-4),
        (1e-2, 6e-4, 1.0 * 4e-4),
        (1.0, 2e-4, 1.0 * 2e-4),
    ],
)
def test_wake_extra_by_hand(idle, work, expect):
    assert K.wake_extra_s(_fs(), idle, work) == pytest.approx(expect, abs=1e-18)


def test_without_a_curve_every_wake_up_costs_the_idle_extra():
    fs = _fs(curve=None)
    assert [K.wake_extra_s(fs, t, 1e-3) for t in (0.0, 1e-3, 1.0)] == [1e-4] * 3
    assert K.plain_wakes(fs) and not K.plain_wakes(_fs())


@given(st.floats(min_value=0.0, max_value=0.1), st.floats(min_value=0.0, max_value=1e-2))
def test_kernel_curve_is_the_parameters_interpolation(idle, work):
    want = float(CURVE.share_at(idle)) * (1e-4 + CURVE.work_share * work)
    assert K.wake_extra_s(_fs(), idle, work) == pytest.approx(want, rel=1e-12, abs=1e-18)


def test_scenario_mapping_reads_durations_and_shares():
    p = from_mapping(WakeCurveParams, {"idle_s": ["0.2ms", "5ms"], "share": [0.3, 1], "work_share": 0.25}, "w")
    assert p.idle_s == (2e-4, 5e-3) and p.share == (0.3, 1.0) and p.work_share == 0.25
    b = from_mapping(BrokerParams, {"wake_curve": {"idle_s": ["1ms"], "share": [1.0]}}, "broker")
    assert b.wake_curve.share == (1.0,) and b.wake_curve.work_share == 0.0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"idle_s": [], "share": []}, "broker.wake_curve.idle_s"),
        ({"idle_s": ["1ms", "0.5ms"], "share": [0.5, 1]}, "broker.wake_curve.idle_s"),
        ({"idle_s": [0.0, 1e-3], "share": [0, 1]}, "broker.wake_curve.idle_s"),
        ({"idle_s": ["1ms"], "share": [0.5, 1]}, "broker.wake_curve.share"),
        ({"idle_s": ["1ms"], "share": [-0.1]}, "broker.wake_curve.share"),
        ({"idle_s": ["1ms"], "share": ["half"]}, "broker.wake_curve.share"),
        ({"idle_s": ["1ms"], "share": 1.0}, "broker.wake_curve.share"),
        ({"idle_s": ["1ms"], "share": [1.0], "work_share": -1}, "broker.wake_curve.work_share"),
        ({"idle_s": [f"{k}ms" for k in range(1, 10)], "share": [1.0] * 9}, "broker.wake_curve.idle_s"),
    ],
)
def test_bad_curves_are_refused_naming_the_field(fields, field):
    with pytest.raises(ConfigError) as err:
        from_mapping(BrokerParams, {"wake_curve": fields}, "broker")
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_io_cycles_take_the_wake_curve():
    # own cost 1, cycle cost 3, wake-up 2 with share 0.5 after 4 s of idle (flat after), work share 1:
    # 0 finds the server idle since 0: share 0, no extra: 0->1, its cycle's cost after it (1->4);
    # 10 finds it idle since 4 (6 s): 0.5 x (2 + 1 x 1) = 1.5 more: 10->12.5
    from pubsim.models.mechanisms.iothreads.discipline import CycleDiscipline
    from pubsim.sim.packets import Packets

    disc = CycleDiscipline(idle_extra_s=2.0)
    K.set_wake_curve(disc.fs, (4.0,), (0.5,), 1.0)
    t = np.array([0.0, 10.0])
    disc.set_cycle_cost(np.full(2, 3.0))
    served = disc.run(
        Packets(t, np.arange(2), np.zeros(2, np.int64), np.full(2, 1), t), np.ones(2), np.zeros(2), np.inf
    )
    assert served.start.tolist() == [0.0, 10.0]
    assert served.depart.tolist() == [1.0, 12.5]
    assert disc.work_s == pytest.approx(1.0 + 2.5 + 2 * 3.0)  # the wake-up is work
    BrokerParams(wake_curve=CURVE, io=IoParams(cycle_cost_s=1e-5))  # combines


def _star(wake_curve, rate_per_s, io=None):
    return T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=1e-4), idle_wakeup_cost_s=2e-4, wake_curve=wake_curve, io=io),
        publishers={"p": PublisherParams(topics=("a",), rate_per_s=rate_per_s, arrival="constant")},
        subscribers={"s": SubscriberParams(subscriptions=("a",))},
        link=LinkParams(latency_s=5e-5),
    )


@pytest.mark.parametrize("io", [None, IoParams(cycle_cost_s=1e-6, cycle_max_per_connection=1)])
def test_cpu_per_message_falls_with_the_idle_time_as_the_curve_says(io):
    """One evenly paced publisher: every message wakes the broker after the gap less its own work x,
    so x = 1e-4 + share(1 / rate - x) x (2e-4 + 0.5 x 1e-4), solved here by iteration (the I/O
    cycles' cost, 1 us a pass, comes after the message and adds to its work)."""
    flat = WakeCurveParams(idle_s=(1e-9,), share=(1.0,))  # a full wake-up after any idle
    cycle = 0.0 if io is None else 1e-6
    for rate in (50.0, 1000.0):
        plain, curved = (
            simulate(_star(w, rate, io), duration_s=2.0, warmup_s=0.2, seed=2).stations().set_index("station")
            for w in (flat, CURVE)
        )
        busy = [s.loc["broker:broker", "utilization"] / rate - cycle for s in (plain, curved)]
        x = 1e-4
        for _ in range(50):
            x = 1e-4 + float(CURVE.share_at(1 / rate - x - cycle)) * (2e-4 + 0.5 * 1e-4)
        assert busy[0] == pytest.approx(3e-4, rel=1e-6)
        assert busy[1] == pytest.approx(x, rel=1e-6)
    assert x < 1.6e-4  # at 1,000 msg/s the wake-ups come after 0.85 ms and cost a fifth of a full one
