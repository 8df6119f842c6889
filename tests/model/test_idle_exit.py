"""The idle-exit curve of a broker's core (models.params.idle, sim.kernels.idle_exit_s)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.idle import IdleExitParams, WakeCurveParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.run import simulate
from pubsim.sim import kernels as K
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError

EXIT = IdleExitParams(idle_s=(1e-4, 1e-3, 5e-3), exit_s=(5e-6, 2e-5, 6e-5))


def _fs(curve):
    fs = np.zeros(K.FS_LEN)
    K.set_idle_exit(fs, *curve.curve)
    return fs


@pytest.mark.parametrize(
    ("idle", "expect"),
    [(0.0, 0.0), (5e-5, 2.5e-6), (1e-4, 5e-6), (5.5e-4, 1.25e-5), (3e-3, 4e-5), (5e-3, 6e-5), (1.0, 6e-5)],
)
def test_curve_by_hand(idle, expect):
    # through (0, 0), linear between the points, flat after the last
    assert K.idle_exit_s(_fs(EXIT), idle) == pytest.approx(expect)
    assert EXIT.exit_at(idle) == pytest.approx(expect)


@given(st.floats(min_value=0.0, max_value=0.1))
def test_kernel_curve_is_the_parameters_interpolation(idle):
    assert K.idle_exit_s(_fs(EXIT), idle) == pytest.approx(float(EXIT.exit_at(idle)), abs=1e-15)


def test_no_curve_is_no_exit():
    assert K.idle_exit_s(np.zeros(K.FS_LEN), 1.0) == 0.0


def test_scenario_mapping_reads_durations():
    p = from_mapping(IdleExitParams, {"idle_s": ["0.1ms", "1ms"], "exit_s": ["2us", 1.5e-5]}, "broker.idle_exit")
    assert p.idle_s == (1e-4, 1e-3) and p.exit_s == (2e-6, 1.5e-5)
    b = from_mapping(BrokerParams, {"idle_exit": {"idle_s": ["1ms"], "exit_s": ["20us"]}}, "broker")
    assert b.idle_exit.exit_s == (2e-5,)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"idle_s": [], "exit_s": []}, "broker.idle_exit.idle_s"),
        ({"idle_s": ["1ms", "0.5ms"], "exit_s": ["1us", "2us"]}, "broker.idle_exit.idle_s"),
        ({"idle_s": [0.0, 1e-3], "exit_s": [0, 1e-6]}, "broker.idle_exit.idle_s"),
        ({"idle_s": ["1ms"], "exit_s": ["1us", "2us"]}, "broker.idle_exit.exit_s"),
        ({"idle_s": ["1ms"], "exit_s": ["-1us"]}, "broker.idle_exit.exit_s"),
        ({"idle_s": "1ms", "exit_s": ["1us"]}, "broker.idle_exit.idle_s"),
        ({"idle_s": [f"{k}ms" for k in range(1, 10)], "exit_s": ["1us"] * 9}, "broker.idle_exit.idle_s"),
    ],
)
def test_bad_curves_are_refused_naming_the_field(fields, field):
    with pytest.raises(ConfigError) as err:
        from_mapping(BrokerParams, {"idle_exit": fields}, "broker")
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_io_cycles_take_the_exit_of_an_idle_server():
    # own cost 1, cycle cost 3, exit 0.5 after an idle of at least 1 (EXIT-like curve):
    # 0 finds the server idle since 0: exit(0); 10 finds it idle since 4: starts 10.5
    from pubsim.models.mechanisms.iothreads.discipline import CycleDiscipline
    from pubsim.sim.packets import Packets

    disc = CycleDiscipline(idle_exit=((1.0,), (0.5,)))
    t = np.array([0.0, 10.0])
    disc.set_cycle_cost(np.full(2, 3.0))
    served = disc.run(
        Packets(t, np.arange(2), np.zeros(2, np.int64), np.full(2, 1), t), np.ones(2), np.zeros(2), np.inf
    )
    assert served.start.tolist() == [0.0, 10.5]
    assert served.depart.tolist() == [1.0, 11.5]
    assert disc.work_s == pytest.approx(2 * 1.0 + 2 * 3.0)  # the exit uses no CPU
    BrokerParams(idle_exit=EXIT, io=IoParams(cycle_cost_s=1e-5))  # combines


@pytest.mark.parametrize(
    ("broker", "field"),
    [
        ({"idle_exit": EXIT}, "idle_exit"),
        ({"sleep_entry_s": 2e-5}, "sleep_entry_s"),
        ({"wake_curve": WakeCurveParams(idle_s=(1e-3,), share=(1.0,))}, "wake_curve"),
    ],
)
def test_refused_on_a_host_cpu_shared_with_other_processes(broker, field):
    from pubsim.models.assembly.build import build_network

    g = T.star(
        broker=BrokerParams(**broker),
        publishers={"p": PublisherParams(topics=("a",), rate_per_s=10.0)},
        subscribers={"s": SubscriberParams(subscriptions=("a",), processing_s=Constant(value=1e-4))},
        link=LinkParams(),
        hosts={"h": HostParams(cores=1)},
        placement={"broker": "h", "s": "h"},
    )
    with pytest.raises(ConfigError) as err:
        build_network(g, seed=0)
    assert err.value.field == f"broker 'broker'.{field}"


def test_exit_delays_idle_messages_without_using_cpu():
    """The same star with and without an exit: later deliveries, the same broker work."""

    def run(idle_exit):
        g = T.star(
            broker=BrokerParams(ingress_cost_s=Constant(value=2e-5), idle_exit=idle_exit),
            publishers={f"p{i}": PublisherParams(topics=("a",), rate_per_s=300.0) for i in range(3)},
            subscribers={"s": SubscriberParams(subscriptions=("a",))},
            link=LinkParams(latency_s=5e-5),
        )
        return simulate(g, duration_s=2.0, warmup_s=0.2, seed=3)

    plain, exits = run(None), run(EXIT)
    lat_plain, lat_exit = plain.deliveries()["latency_s"], exits.deliveries()["latency_s"]
    assert len(lat_plain) == len(lat_exit)
    # 900 msg/s in all: idle about 1.1 ms on average, so most messages pay 20-60 us
    assert 1.5e-5 < lat_exit.mean() - lat_plain.mean() < 6e-5
    util = [r.stations().set_index("station").loc["broker:broker", "utilization"] for r in (plain, exits)]
    assert util[1] == pytest.approx(util[0], rel=0.01)
