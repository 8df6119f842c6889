"""Presets: every middleware family of SYSTEMS.md §1 is modelled, every preset
carries provenance, and ``pubsim presets`` lists them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from pubsim.models import presets
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.disk import DiskParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.models.params.serialization import SerializationParams
from pubsim.models.params.store import StoreParams
from pubsim.models.params.zmq import ZmqSocketParams
from pubsim.models.presets.families import FAMILIES
from tests import ROOT

# SYSTEMS.md §1, the table's first column and its examples (kept here by hand,
# so a family dropped from the registry makes this test fail)
SYSTEMS_FAMILIES = {
    "MQTT broker": ["Mosquitto", "HiveMQ", "EMQX", "Moquette", "ActiveMQ MQTT plug-in", "RabbitMQ MQTT plug-in"],
    "AMQP broker": ["RabbitMQ", "Apache Qpid", "ActiveMQ", "Artemis"],
    "brokerless": ["ZeroMQ XPUB/XSUB proxy", "ZeroMQ PUB/SUB, PUSH/PULL"],
    "brokered or brokerless with priorities": ["YAMI4"],
    "others named by the studies": ["NATS", "XMPP/ejabberd"],
}
# presets another branch adds (priority scheduling); present once merged
ELSEWHERE = {"YAMI4"}
CLASSES = {
    "broker": BrokerParams,
    "link": LinkParams,
    "serialization": SerializationParams,
    "socket": ZmqSocketParams,
    "disk": DiskParams,
    "host": HostParams,
    "store": StoreParams,
}


def test_registry_covers_every_family_and_example():
    assert {f: sorted(ex) for f, ex in FAMILIES.items()} == {f: sorted(ex) for f, ex in SYSTEMS_FAMILIES.items()}


@pytest.mark.parametrize("family,example", [(f, e) for f, exs in SYSTEMS_FAMILIES.items() for e in exs])
def test_every_example_has_a_preset(family, example):
    have = set(presets.names("broker"))
    found = [n for n in FAMILIES[family][example] if n in have]
    if not found and example in ELSEWHERE:
        pytest.skip(f"{example} preset comes from the priority branch ({FAMILIES[family][example]})")
    assert found, f"{family}/{example}: none of {FAMILIES[family][example]} is a broker preset"


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_every_preset_builds_and_has_provenance(kind):
    assert sorted(CLASSES) == presets.kinds()
    names = presets.names(kind)
    assert names
    for name in names:
        spec = presets.load(kind, name)
        params = from_mapping(CLASSES[kind], spec, f"{kind}:{name}")
        prov = params.provenance
        assert prov.reference.strip(), name
        assert prov.note.strip(), name
        assert prov.source.value in ("measured", "publication", "placeholder", "assumption"), name


def test_estimates_are_not_labelled_as_measurements():
    """Only calibrated profiles (models/presets/calibrated) say 'measured'."""
    calibrated = set()
    import yaml

    for f in (ROOT / "models" / "presets" / "calibrated").glob("*.yaml"):
        for kind_map in (yaml.safe_load(f.read_text()) or {}).values():
            calibrated |= set(kind_map)
    for kind in CLASSES:
        for name in presets.names(kind):
            measured = presets.load(kind, name)["provenance"]["source"] == "measured"
            assert measured == (name in calibrated), name


def _pubsim(*args):
    proc = subprocess.run(
        [sys.executable, "-m", "pubsim", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "COLUMNS": "400", "PYTHONPATH": str(ROOT)},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_cli_lists_every_preset_with_its_source():
    proc = _pubsim("presets")
    assert proc.returncode == 0
    flat = " ".join(proc.stdout.split())
    for kind in CLASSES:
        for name in presets.names(kind):
            assert name in proc.stdout, name
    for source in ("measured", "placeholder", "assumption"):
        assert source in flat


def test_cli_kind_filter_and_one_preset_in_full():
    proc = _pubsim("presets", "--kind", "serialization")
    assert proc.returncode == 0 and "text" in proc.stdout and "mosquitto" not in proc.stdout
    proc = _pubsim("presets", "--name", "hivemq-placeholder")
    assert proc.returncode == 0
    assert "provenance.note" in proc.stdout and "MQTT broker" in proc.stdout


def test_cli_bad_name_and_kind_are_one_line_errors():
    for args in (("presets", "--name", "nope"), ("presets", "--kind", "nope")):
        proc = _pubsim(*args)
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1 and "nope" in proc.stderr


def test_user_presets_shadow_builtins_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("PUBSIM_PRESETS", str(tmp_path))
    builtin = presets.load("broker", "mosquitto")
    (tmp_path / "mine.yaml").write_text(
        yaml.safe_dump(
            {
                "broker": {
                    "mosquitto": {**builtin, "workers": 4},
                    "my-broker": {
                        "ingress_cost_s": "20us",
                        "provenance": {"source": "measured", "reference": "my lab"},
                    },
                }
            }
        )
    )
    shadow = presets.load("broker", "mosquitto")
    assert shadow["workers"] == 4
    assert "shadows the built-in mosquitto" in shadow["provenance"]["note"]
    assert presets.origin("broker", "mosquitto") == str(tmp_path / "mine.yaml")
    assert presets.origin("broker", "mosquitto-placeholder") == "built-in"
    assert presets.load("broker", "my-broker")["provenance"]["reference"] == "my lab"
    proc = subprocess.run(
        [sys.executable, "-m", "pubsim", "presets", "--kind", "broker"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert proc.returncode == 0 and "my-broker" in proc.stdout and str(tmp_path) in proc.stdout


def test_unreadable_user_preset_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PUBSIM_PRESETS", str(tmp_path))
    (tmp_path / "bad.yaml").write_text("broker: [unclosed")
    proc = subprocess.run(
        [sys.executable, "-m", "pubsim", "presets"], capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "bad.yaml" in proc.stderr


def test_compact_listing_is_one_line_per_preset():
    proc = _pubsim("presets")
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == sum(len(presets.names(k)) for k in presets.kinds())
