"""The one table of refused feature combinations (models.assembly.features) and `pubsim features`."""
import pytest

from pubsim.cli import main
from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network
from pubsim.models.assembly.features import REFUSED, Feature, check_features, features
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.sim.errors import ConfigError

F = Feature


def _star(broker=None, sub=None, link=None):
    return T.star(broker=broker or BrokerParams(),
                  publishers={"p": PublisherParams(topics=("a",), rate_per_s=10.0)},
                  subscribers={"s": sub or SubscriberParams(subscriptions=("a",))},
                  link=link or LinkParams())


QOS_SUB = SubscriberParams(subscriptions=("a",), qos=1)

#: A small topology using each refused pair, and the field its error names.
CASES = {
    (F.QOS, F.RESTART): (lambda: _star(BrokerParams(restart_at_s=(0.5,)), QOS_SUB), "s.qos"),
    (F.RESTART, F.BACKPRESSURE): (lambda: _star(BrokerParams(restart_at_s=(0.5,), client_overflow="backpressure")),
                                  "link:broker->s.overflow"),
    (F.PRIORITY, F.BACKPRESSURE): (lambda: _star(BrokerParams(client_scheduling="priority"),
                                                 link=LinkParams(overflow="backpressure")),
                                   "link:broker->s.overflow"),
    (F.QOS, F.PRIORITY): (lambda: _star(BrokerParams(client_scheduling="priority"), QOS_SUB),
                          "link:broker->s.overflow"),
    (F.QOS, F.QUEUE_POLICY): (lambda: _star(BrokerParams(client_overflow="drop_oldest"), QOS_SUB),
                              "link:broker->s.overflow"),
}


def test_every_refused_pair_has_a_case():
    assert set(CASES) == set(REFUSED)


@pytest.mark.parametrize("pair", list(REFUSED), ids=lambda p: f"{p[0].value}-{p[1].value}")
def test_refused_pair_is_refused_with_its_reason(pair):
    make, field = CASES[pair]
    g = make()
    used = features(g)
    assert pair[0] in used and pair[1] in used
    with pytest.raises(ConfigError) as err:
        check_features(g)
    assert err.value.field == field
    assert err.value.expected == REFUSED[pair].reason
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError) as built:  # the compiler checks in the same place
        build_network(g, seed=0)
    assert str(built.value) == str(err.value)


def test_features_combine_otherwise():
    g = _star(BrokerParams(restart_at_s=(0.5,), client_scheduling="priority"))
    check_features(g)
    assert {F.RESTART, F.PRIORITY} <= set(features(g))
    build_network(g, seed=0)


def test_cli_prints_the_table(capsys):
    assert main(["features"]) == 0
    out = capsys.readouterr().out
    for (a, b), refusal in REFUSED.items():
        assert a.value in out and b.value in out
        assert refusal.reason.split(" (")[0] in " ".join(out.split())
