"""The one table of refused feature combinations (models.params.features, models.assembly.features)
and `pubsim features`."""

import pytest

from pubsim.cli import main
from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network
from pubsim.models.assembly.features import check_features, features
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.features import REFUSED, Feature, object_features
from pubsim.models.params.host import HostParams
from pubsim.models.params.idle import IdleExitParams, WakeCurveParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.zmq import ZmqSocketParams
from pubsim.sim.errors import ConfigError

F = Feature


def _star(broker=None, sub=None, link=None):
    return T.star(
        broker=broker or BrokerParams(),
        publishers={"p": PublisherParams(topics=("a",), rate_per_s=10.0)},
        subscribers={"s": sub or SubscriberParams(subscriptions=("a",))},
        link=link or LinkParams(),
    )


def _framed(**fields):
    """A broker whose per-client queues are YAMI4 frame channels."""
    return BrokerParams(client_frame_bytes=4096, client_send_window_bytes=16384, **fields)


def _qos_sub():
    return SubscriberParams(subscriptions=("a",), qos=1)


#: For every refused pair: what builds it (a parameter object, or a small topology
#: for connections) and the field its error names.
_EXIT = IdleExitParams(idle_s=(1e-3,), exit_s=(2e-5,))
_WAKE = WakeCurveParams(idle_s=(1e-3,), share=(1.0,))

CASES = {
    ("broker", F.IDLE_EXIT, F.BATCHING): (
        lambda: BrokerParams(idle_exit=_EXIT, batch_max_messages=4),
        "batch_max_messages",
    ),
    ("broker", F.IDLE_EXIT, F.RESTART): (lambda: BrokerParams(idle_exit=_EXIT, restart_at_s=(1.0,)), "restart_at_s"),
    ("broker", F.IDLE_EXIT, F.PRIORITY): (lambda: BrokerParams(idle_exit=_EXIT, scheduling="priority"), "scheduling"),
    ("broker", F.IDLE_EXIT, F.EVENT_QUEUE): (lambda: BrokerParams(idle_exit=_EXIT, overflow="ring"), "overflow"),
    ("broker", F.SLEEP_ENTRY, F.BATCHING): (
        lambda: BrokerParams(sleep_entry_s=1e-5, batch_max_messages=4),
        "batch_max_messages",
    ),
    ("broker", F.SLEEP_ENTRY, F.RESTART): (
        lambda: BrokerParams(sleep_entry_s=1e-5, restart_at_s=(1.0,)),
        "restart_at_s",
    ),
    ("broker", F.SLEEP_ENTRY, F.PRIORITY): (
        lambda: BrokerParams(sleep_entry_s=1e-5, scheduling="priority"),
        "scheduling",
    ),
    ("broker", F.SLEEP_ENTRY, F.EVENT_QUEUE): (lambda: BrokerParams(sleep_entry_s=1e-5, overflow="ring"), "overflow"),
    ("broker", F.WAKE_CURVE, F.BATCHING): (
        lambda: BrokerParams(wake_curve=_WAKE, batch_max_messages=4),
        "batch_max_messages",
    ),
    ("broker", F.WAKE_CURVE, F.RESTART): (lambda: BrokerParams(wake_curve=_WAKE, restart_at_s=(1.0,)), "restart_at_s"),
    ("broker", F.WAKE_CURVE, F.PRIORITY): (lambda: BrokerParams(wake_curve=_WAKE, scheduling="priority"), "scheduling"),
    ("broker", F.WAKE_CURVE, F.EVENT_QUEUE): (lambda: BrokerParams(wake_curve=_WAKE, overflow="ring"), "overflow"),
    ("broker", F.SPEED_DRIFT, F.BATCHING): (
        lambda: BrokerParams(speed_drift_log_sd=0.1, batch_max_messages=4),
        "batch_max_messages",
    ),
    ("broker", F.SPEED_DRIFT, F.RESTART): (
        lambda: BrokerParams(speed_drift_log_sd=0.1, restart_at_s=(1.0,)),
        "restart_at_s",
    ),
    ("broker", F.SPEED_DRIFT, F.PRIORITY): (
        lambda: BrokerParams(speed_drift_log_sd=0.1, scheduling="priority"),
        "scheduling",
    ),
    ("broker", F.SPEED_DRIFT, F.EVENT_QUEUE): (
        lambda: BrokerParams(speed_drift_log_sd=0.1, overflow="ring"),
        "overflow",
    ),
    ("broker", F.QUOTA_TICK, F.WORKERS): (lambda: BrokerParams(cpu_tick_s=0.004, workers=2), "cpu_tick_s"),
    ("broker", F.BATCHING, F.WORKERS): (lambda: BrokerParams(batch_max_messages=4, workers=2), "workers"),
    ("broker", F.BATCHING, F.CPU_QUOTA): (lambda: BrokerParams(batch_max_messages=4, cpu_fraction=0.5), "cpu_fraction"),
    ("broker", F.BATCHING, F.PRIORITY): (
        lambda: BrokerParams(batch_max_messages=4, scheduling="priority"),
        "scheduling",
    ),
    ("broker", F.BATCHING, F.QUEUE_POLICY): (
        lambda: BrokerParams(batch_max_messages=4, overflow="drop_oldest"),
        "overflow",
    ),
    ("broker", F.RESTART, F.BATCHING): (
        lambda: BrokerParams(restart_at_s=(1.0,), batch_max_messages=4),
        "batch_max_messages",
    ),
    ("broker", F.RESTART, F.CPU_QUOTA): (lambda: BrokerParams(restart_at_s=(1.0,), cpu_fraction=0.5), "cpu_fraction"),
    ("broker", F.RESTART, F.BACKPRESSURE): (
        lambda: BrokerParams(restart_at_s=(1.0,), overflow="backpressure"),
        "overflow",
    ),
    ("broker", F.CPU_QUOTA, F.PRIORITY): (
        lambda: BrokerParams(cpu_fraction=0.5, scheduling="priority"),
        "cpu_fraction",
    ),
    ("broker", F.CPU_QUOTA, F.EVENT_QUEUE): (lambda: BrokerParams(cpu_fraction=0.5, overflow="ring"), "cpu_fraction"),
    ("broker", F.PRIORITY, F.BACKPRESSURE): (
        lambda: BrokerParams(scheduling="priority", overflow="backpressure"),
        "overflow",
    ),
    ("broker", F.CLIENT_PRIORITY, F.CLIENT_BACKPRESSURE): (
        lambda: BrokerParams(client_scheduling="priority", client_overflow="backpressure"),
        "client_overflow",
    ),
    ("link", F.PRIORITY, F.BACKPRESSURE): (
        lambda: LinkParams(scheduling="priority", overflow="backpressure"),
        "overflow",
    ),
    ("publisher", F.ROUND_ROBIN, F.SCHEDULE): (
        lambda: PublisherParams(
            topics=("a", "b"),
            topic_choice="round_robin",
            arrival="schedule",
            schedule_time_s=(0.0,),
            schedule_size_bytes=(10,),
            schedule_topic=("a",),
        ),
        "topic_choice",
    ),
    ("publisher", F.ROUND_ROBIN, F.TOPIC_WEIGHTS): (
        lambda: PublisherParams(
            topics=("a", "b"), rate_per_s=1.0, topic_choice="round_robin", topic_weights=(1.0, 2.0)
        ),
        "topic_choice",
    ),
    ("publisher", F.SEND_MODE, F.WILL): (
        lambda: PublisherParams(
            topics=("a",), arrival="closed_loop", send_mode="sync", offline_s=((1.0, 2.0),), will_topic="w"
        ),
        "send_mode",
    ),
    ("publisher", F.PRELOADED, F.SEND_MODE): (
        lambda: PublisherParams(
            topics=("a",), arrival="closed_loop", send_mode="confirms", persistent=True, preloaded=True
        ),
        "send_mode",
    ),
    ("subscriber", F.QOS, F.BUFFER): (
        lambda: SubscriberParams(subscriptions=("a",), qos=1, buffer_messages=5),
        "buffer_messages",
    ),
    ("subscriber", F.CHURN, F.SCHEDULE): (
        lambda: SubscriberParams(
            subscriptions=("a",), online_s=((0.0, 1.0),), churn_online_mean_s=1.0, churn_offline_mean_s=1.0
        ),
        "online_s",
    ),
    ("subscriber", F.SHARED, F.SESSIONS): (
        lambda: SubscriberParams(subscriptions=("$share/g/a",), online_s=((0.0, 1.0),)),
        "subscriptions",
    ),
    ("connection", F.SHARED, F.BROKERLESS): (
        lambda: T.brokerless(
            publishers={"p": PublisherParams(topics=("a",), rate_per_s=10.0)},
            subscribers={"s": SubscriberParams(subscriptions=("$share/g/a",))},
            socket=ZmqSocketParams(),
            link=LinkParams(),
        ),
        "s.subscriptions",
    ),
    ("connection", F.QOS, F.RESTART): (lambda: _star(BrokerParams(restart_at_s=(0.5,)), _qos_sub()), "s.qos"),
    ("connection", F.RESTART, F.BACKPRESSURE): (
        lambda: _star(BrokerParams(restart_at_s=(0.5,), client_overflow="backpressure")),
        "link:broker->s.overflow",
    ),
    ("connection", F.PRIORITY, F.BACKPRESSURE): (
        lambda: _star(BrokerParams(client_scheduling="priority"), link=LinkParams(overflow="backpressure")),
        "link:broker->s.overflow",
    ),
    ("connection", F.QOS, F.PRIORITY): (
        lambda: _star(BrokerParams(client_scheduling="priority"), _qos_sub()),
        "link:broker->s.overflow",
    ),
    ("connection", F.QOS, F.QUEUE_POLICY): (
        lambda: _star(BrokerParams(client_overflow="drop_oldest"), _qos_sub()),
        "link:broker->s.overflow",
    ),
    ("connection", F.QOS, F.CARD): (
        lambda: T.place(_star(sub=_qos_sub()), {"h": HostParams(card_Bps=1e6)}, {"s": "h"}),
        "link:broker->s.qos",
    ),
    ("connection", F.FRAMES, F.QOS): (lambda: _star(_framed(), _qos_sub()), "s.qos"),
    ("connection", F.FRAMES, F.CARD): (
        lambda: T.place(_star(_framed()), {"h": HostParams(card_Bps=1e6)}, {"s": "h"}),
        "s.host",
    ),
    ("connection", F.FRAMES, F.SHARED): (
        lambda: _star(_framed(), SubscriberParams(subscriptions=("$share/g/a",))),
        "s.subscriptions",
    ),
    ("connection", F.FRAMES, F.RESTART): (
        lambda: _star(_framed(restart_at_s=(0.5,))),
        "link:broker->s.restart_at_s",
    ),
    ("connection", F.FRAMES, F.QUEUE_POLICY): (
        lambda: _star(_framed(client_overflow="update")),
        "link:broker->s.overflow",
    ),
    ("connection", F.FRAMES, F.BACKPRESSURE): (
        lambda: _star(_framed(), link=LinkParams(overflow="backpressure")),
        "link:broker->s.overflow",
    ),
    ("connection", F.FRAMES, F.LOSSY): (
        lambda: _star(_framed(), link=LinkParams(loss_probability=0.01)),
        "link:broker->s.loss_probability",
    ),
    ("connection", F.FRAMES, F.IDLE_RECEIVER): (
        lambda: _star(_framed(), link=LinkParams(jitter_on="idle_receiver")),
        "link:broker->s.jitter_on",
    ),
    ("connection", F.QOS, F.IDLE_RECEIVER): (
        lambda: _star(sub=_qos_sub(), link=LinkParams(jitter_s=1e-4, jitter_on="idle_receiver")),
        "link:broker->s.jitter_on",
    ),
    ("connection", F.FRAMES, F.SESSIONS): (
        lambda: _star(_framed(), SubscriberParams(subscriptions=("a",), online_s=((0.0, 1.0),))),
        "s.online_s",
    ),
    ("connection", F.FRAMES, F.BUFFER): (
        lambda: _star(_framed(), SubscriberParams(subscriptions=("a",), buffer_messages=3)),
        "s.buffer_messages",
    ),
}


def _key(r):
    return (r.scope, r.first, r.second)


def test_every_refused_pair_has_a_case():
    assert sorted(CASES, key=str) == sorted(map(_key, REFUSED), key=str)
    assert len(set(map(_key, REFUSED))) == len(REFUSED)


@pytest.mark.parametrize("refusal", REFUSED, ids=lambda r: f"{r.scope}-{r.first.value}-{r.second.value}")
def test_refused_pair_is_refused_with_its_reason(refusal):
    make, field = CASES[_key(refusal)]
    if refusal.scope != "connection":  # refused when the parameter object is built
        with pytest.raises(ConfigError) as err:
            make()
        assert err.value.field == field
        assert "\n" not in str(err.value)
        assert err.value.expected.startswith(refusal.reason.split("{")[0])
        return
    g = make()
    used = features(g)
    assert refusal.first in used and refusal.second in used
    with pytest.raises(ConfigError) as err:
        check_features(g)
    assert err.value.field == field
    assert err.value.expected == refusal.reason
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError) as built:  # the compiler checks in the same place
        build_network(g, seed=0)
    assert str(built.value) == str(err.value)


def test_features_combine_otherwise():
    g = _star(BrokerParams(restart_at_s=(0.5,), client_scheduling="priority"))
    check_features(g)
    assert {F.RESTART, F.PRIORITY, F.CLIENT_PRIORITY} <= set(features(g))
    build_network(g, seed=0)
    assert object_features(BrokerParams(batch_max_messages=4), "broker") == {F.BATCHING}
    framed = _star(_framed(client_scheduling="priority"), link=LinkParams(jitter_s=0.001))  # constant jitter
    check_features(framed)
    assert {F.FRAMES, F.PRIORITY} <= set(features(framed)) and F.LOSSY not in features(framed)
    build_network(framed, seed=0)


def test_cli_prints_the_table(capsys):
    assert main(["features"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for r in REFUSED:
        assert r.first.value in out and r.second.value in out
        assert r.reason.split(" (")[0].split(" {")[0][:30] in out
