"""The broker registry (brokers.REGISTRY): one complete BrokerKind per kind, and the old tables are views of it."""

from __future__ import annotations

import dataclasses

import pytest

from pubsim.calibration.harness import brokers as B
from pubsim.calibration.harness.brokers import REGISTRY, BrokerKind, BrokerSpec

EXPECTED = {
    "mosquitto": "mqtt",
    "nats": "nats",
    "rabbitmq-mqtt": "mqtt",
    "zmq-proxy": "zmq",
    "activemq-mqtt": "mqtt",
    "ejabberd-mqtt": "mqtt",
}


def test_one_entry_per_kind():
    assert dict(B.PROTOCOLS) == EXPECTED and B.KINDS == tuple(EXPECTED)
    assert all(isinstance(k, BrokerKind) and k.name == name for name, k in REGISTRY.items())
    with pytest.raises(TypeError):
        REGISTRY["new"] = REGISTRY["nats"]  # read-only
    with pytest.raises(dataclasses.FrozenInstanceError):
        REGISTRY["nats"].start_timeout_s = 1.0


@pytest.mark.parametrize("name", list(EXPECTED))
def test_entry_is_complete(name):
    k = REGISTRY[name]
    assert k.protocol == EXPECTED[name]
    assert callable(k.plan) and callable(k.version)
    assert k.binary is None if name == "zmq-proxy" else isinstance(k.binary, str) and k.binary
    assert k.ports_needed >= (2 if k.split_ports else 1)
    assert k.split_ports == (name == "zmq-proxy")
    assert 0 < k.start_timeout_s <= 120
    assert k.install_hint.startswith("scripts/install_brokers.sh")
    if name in ("rabbitmq-mqtt", "activemq-mqtt", "ejabberd-mqtt"):  # a VM does the work; dpkg tells the version
        assert k.work_comm in ("beam.smp", "java") and k.debian_package
        assert k.start_timeout_s >= 60
    else:
        assert k.work_comm is None and k.debian_package is None
    assert (k.mqtt_credentials is not None) == (name == "ejabberd-mqtt")
    assert B.START_TIMEOUT_S[name] == k.start_timeout_s
    assert B.MQTT_CREDENTIALS.get(name) == k.mqtt_credentials


@pytest.mark.parametrize(
    "name, conf, line",
    [
        ("mosquitto", "mosquitto.conf", "listener 5555 127.0.0.1"),
        ("nats", "nats.conf", "logtime: true"),
        ("zmq-proxy", "zmq-proxy.args", "--xpub"),
    ],
)
def test_plan_writes_the_configuration(name, conf, line, tmp_path):
    if REGISTRY[name].binary is not None and not B.shutil.which(REGISTRY[name].binary):
        pytest.skip(f"{REGISTRY[name].binary} not installed")
    spec = BrokerSpec(kind=name, port=5555)
    plan = REGISTRY[name].plan(spec, tmp_path, [5555, 5556, 5557][: REGISTRY[name].ports_needed])
    assert plan.config_path == tmp_path / conf and line in plan.config_path.read_text()
    assert plan.ports[0] == 5555 and len(plan.ports) == (2 if REGISTRY[name].split_ports else 1)


def test_unknown_kind_is_refused():
    with pytest.raises(Exception, match="one of mosquitto, nats"):
        BrokerSpec(kind="kafka")
