"""Scenario files of the brokerless/persistence work: they load, run, and
the brokerless builder reads sockets, presets and ``connect`` lists."""

from __future__ import annotations

import pytest

from pubsim.models import topology as T
from pubsim.scenario import load_scenario, parse_scenario
from pubsim.sim.errors import ConfigError
from tests import ROOT


def _spec(**topo):
    base = {
        "builder": "brokerless",
        "socket": {"preset": "zmq-pub", "sndhwm": 10},
        "link": {"latency_s": "0.1ms"},
        "publishers": [{"name": "p{i}", "count": 3, "topics": ["t/{i}"], "rate_per_s": 100}],
        "subscribers": [{"name": "s{i}", "count": 2, "subscriptions": ["t/"]}],
    }
    base.update(topo)
    return {"run": {"duration": "1s"}, "topology": base}


def test_brokerless_builder_reads_presets_and_connect():
    subs = [
        {"name": "s{i}", "count": 2, "subscriptions": ["t/"], "connect": ["p0", "p2"]},
        {"name": "all", "subscriptions": ["t/1"]},
    ]
    g = parse_scenario(_spec(subscribers=subs)).topology
    assert T.sockets(g) == ["p0.sock", "p1.sock", "p2.sock"]
    sock = g.nodes["p0.sock"][T.PARAMS]
    assert sock.sndhwm == 10 and sock.batch_max_bytes == 8192 and "sndhwm" in sock.provenance.note
    assert sorted(g.neighbors("s0")) == ["p0.sock", "p2.sock"]
    assert sorted(g.neighbors("all")) == ["p0.sock", "p1.sock", "p2.sock"]


@pytest.mark.parametrize(
    "topo,field",
    [
        ({"socket": {"preset": "zmq-sub"}}, "topology.socket.preset"),
        ({"socket": {"sndhwm": "lots"}}, "topology.socket.sndhwm"),
        ({"broker": {}}, "topology.broker"),
        ({"subscribers": [{"name": "s", "subscriptions": ["t"], "connect": ["nobody"]}]}, "connect"),
    ],
)
def test_brokerless_builder_bad_input(topo, field):
    with pytest.raises(ConfigError) as err:
        parse_scenario(_spec(**topo))
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["zmq_direct.yaml", "zmq_proxy.yaml", "persistence.yaml"])
def test_experiment_files_run(name):
    sc = load_scenario(ROOT / "experiments" / name)
    r = sc.simulate(duration_s=0.3 if name != "persistence.yaml" else 7.0, warmup_s=0.05)
    s = r.summary()
    assert s["published"] > 1000 and s["delivered"] > 0
    if name == "persistence.yaml":
        assert s["loss_rate_broker_down"] > 0
        assert r.stations().set_index("station").loc["disk:broker", "served"] > 0
