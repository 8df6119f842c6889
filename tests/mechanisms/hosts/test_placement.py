"""Placing processes on hosts: scenario files, GraphML, presets and one-line errors."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from pubsim.models import presets
from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.models.params.relay import RelayParams
from pubsim.scenario import load_scenario, parse_scenario
from pubsim.sim.errors import ConfigError

from .helpers import mixed_hosts

SCENARIO = """
name: hosted
run: {duration: 1s}
hosts:
  srv: {preset: cloud-vm-4core}
  pi: {preset: raspberry-pi-3, card_latency_s: 20us}
topology:
  builder: chain
  brokers:
    - {name: b0, host: srv, workers: 4, relay: {relay_cost_s: 10us}}
    - {name: b1, host: pi}
  bridge: {preset: gigabit-lan}
  link: {preset: gigabit-lan}
  publishers:
    - {name: "p{i}", count: 2, broker: b0, host: srv, topics: [t], rate_per_s: 100/s}
  subscribers:
    - {name: s, broker: b1, host: pi, subscriptions: [t]}
"""


def _scenario(text=SCENARIO):
    return parse_scenario(yaml.safe_load(textwrap.dedent(text)))


def test_scenario_hosts_and_placement():
    g = _scenario().topology
    table = T.hosts(g)
    assert table["srv"].cores == 4 and table["pi"].speed == pytest.approx(0.17)
    assert table["pi"].card_latency_s == pytest.approx(20e-6) and table["pi"].card_Bps == pytest.approx(12.5e6)
    assert [T.host_of(g, n) for n in ("b0", "b1", "p0", "p1", "s")] == ["srv", "pi", "srv", "srv", "pi"]


def test_scenario_runs_with_cards_and_loopback():
    r = _scenario().simulate()
    roles = set(r.stations()["role"])
    assert {"card_tx", "card_rx"} <= roles
    assert len(r.deliveries()) > 100


def test_graphml_round_trip_keeps_hosts(tmp_path):
    g = mixed_hosts()
    path = tmp_path / "h.graphml"
    T.write_graphml(g, path)
    back = T.read_graphml(path)
    assert T.hosts(back) == T.hosts(g)
    assert {n: T.host_of(back, n) for n in back} == {n: T.host_of(g, n) for n in g}


def test_every_host_preset_states_provenance():
    for name in presets.names("host"):
        p = from_mapping(HostParams, presets.load("host", name), name)
        assert p.provenance.reference and p.provenance.note
    assert from_mapping(HostParams, presets.load("host", "calibration-vm"), "x").speed == 1.0


def test_the_calibration_machine_loopback_is_the_calibrated_link_mean():
    # calibration-vm's loopback latency is the mean one-way latency of the shipped loopback-mosquitto
    # link (fixed part plus mean jitter); a refit of that link must carry it (to the microsecond)
    host = from_mapping(HostParams, presets.load("host", "calibration-vm"), "x")
    link = from_mapping(LinkParams, presets.load("link", "loopback-mosquitto"), "link")
    assert host.loopback_latency_s == pytest.approx(link.latency_s + link.jitter_s.mean, abs=0.5e-6)


@pytest.mark.parametrize(
    "edit, field, value",
    [
        ("    - {name: b1, host: pi}", "node 'b1'.host", "nowhere"),
        ("    - {name: b0, host: srv, workers: 4, relay: {relay_cost_s: 10us}}", "node 'b0'.workers", 8),
    ],
)
def test_bad_placement_is_one_line(edit, field, value):
    text = SCENARIO.replace(edit, edit.replace("host: pi", "host: nowhere").replace("workers: 4", "workers: 8"))
    with pytest.raises(ConfigError) as err:
        _scenario(text)
    assert err.value.field == field and err.value.value == value
    assert "\n" not in str(err.value)


def test_host_with_zero_cores_is_refused():
    with pytest.raises(ConfigError) as err:
        _scenario(SCENARIO.replace("srv: {preset: cloud-vm-4core}", "srv: {preset: cloud-vm-4core, cores: 0}"))
    assert err.value.field == "hosts.srv.cores" and err.value.value == 0


def test_quota_and_background_above_the_host_are_refused():
    g = _scenario().topology
    g.nodes["b1"][T.PARAMS] = BrokerParams(background_cpu_fraction=0.5)
    T.validate(g)
    one = {"pi": HostParams(cores=1), "srv": T.hosts(g)["srv"]}
    g.graph[T.HOSTS] = one
    g.nodes["b0"][T.RELAY] = RelayParams()
    g.nodes["b1"][T.PARAMS] = BrokerParams(workers=2)
    with pytest.raises(ConfigError) as err:
        T.validate(g)
    assert (err.value.field, err.value.value) == ("node 'b1'.workers", 2)
    g.nodes["b1"][T.PARAMS] = BrokerParams()
    g.nodes["b0"][T.RELAY] = RelayParams(workers=5)
    with pytest.raises(ConfigError) as err:
        T.validate(g)
    assert (err.value.field, err.value.value) == ("node 'b0'.relay.workers", 5)


def test_unknown_host_in_topology_api():
    g = mixed_hosts()
    with pytest.raises(ConfigError) as err:
        T.place(g, {}, {"all": "moon"})
    assert err.value.field == "node 'all'.host" and err.value.value == "moon"


def test_example_loads(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    assert load_scenario(path).name == "hosted"
