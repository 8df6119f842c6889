"""Second-tier brokers driven over MQTT: ActiveMQ Classic and ejabberd (mod_mqtt).

Real-broker tests skip, naming the package, unless the Debian packages are
installed (``scripts/install_brokers.sh --tier2``). The wire-format and
configuration tests run everywhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import pytest

from pubsim.calibration.harness import brokers as B
from pubsim.calibration.harness import mqttwire as mw
from pubsim.calibration.harness.brokers import BrokerSpec, broker, live_brokers
from pubsim.calibration.harness.cpu import detect_cpu_control
from pubsim.calibration.harness.loadgen import LoadSpec
from pubsim.sim.errors import ConfigError

TIER2 = ("activemq-mqtt", "ejabberd-mqtt")


def _installed(kind):
    """None when ``kind`` can run here, else why not."""
    if kind == "activemq-mqtt":
        needed = [B._ACTIVEMQ_HOME / "bin" / "activemq.jar", B._ACTIVEMQ_HOME / "lib" / "activemq-mqtt.jar"]
        needed += [Path("/usr/share/java") / jar for jar in B._ACTIVEMQ_MQTT_JARS]
        missing = [str(p) for p in needed if not p.exists()]
        if shutil.which("java") is None:
            missing.append("java")
        return f"ActiveMQ not installed ({', '.join(missing)})" if missing else None
    if not list(Path("/usr/lib").glob("*/ejabberd-*/ebin/ejabberd.app")) or shutil.which("erl") is None:
        return "ejabberd not installed"
    return None


def _require(kind):
    why = _installed(kind)
    if why:
        pytest.skip(f"{why}: run scripts/install_brokers.sh --tier2")


def _gone(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in "ZX"


def _accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


# -- wire format and specifications (no broker) -----------------------------------
def test_connect_carries_credentials_only_when_given():
    plain = mw.encode_connect("c1")
    assert plain[9] == 0x02 and plain.endswith(b"\x00\x02c1")
    both = mw.encode_connect("c1", username="u", password="pw")
    assert both[9] == 0x02 | 0x80 | 0x40
    assert both.endswith(b"\x00\x02c1\x00\x01u\x00\x02pw")
    assert both[1] == len(both) - 2  # remaining length covers the credentials
    user = mw.encode_connect("c1", username="u", clean_session=False)
    assert user[9] == 0x80 and user.endswith(b"\x00\x01u")
    with pytest.raises(ValueError, match="user name"):
        mw.encode_connect("c1", password="pw")


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"mqtt_username": 5}, "mqtt_username"),
        ({"mqtt_username": "u", "mqtt_password": b"x"}, "mqtt_password"),
        ({"mqtt_password": "x"}, "mqtt_password"),
    ],
)
def test_loadspec_rejects_bad_credentials(kwargs, field):
    with pytest.raises(ConfigError) as err:
        LoadSpec(protocol="mqtt", pub_port=1883, rate_per_s=10, duration_s=1, **kwargs)
    assert err.value.field == field


@pytest.mark.parametrize("kind", TIER2)
def test_tier2_kinds_are_mqtt_with_long_start_timeouts(kind):
    assert kind in B.KINDS and B.PROTOCOLS[kind] == "mqtt"
    assert B.START_TIMEOUT_S[kind] >= 60
    assert BrokerSpec(kind=kind).kind == kind


def test_only_ejabberd_needs_credentials():
    assert B.MQTT_CREDENTIALS.get("activemq-mqtt") is None
    user, password = B.MQTT_CREDENTIALS["ejabberd-mqtt"]
    assert user and password


def test_ejabberd_plan_keeps_everything_in_the_workdir(tmp_path):
    _require("ejabberd-mqtt")
    plan = B._ejabberd_plan(
        BrokerSpec(kind="ejabberd-mqtt", options={"loglevel": "info"}), tmp_path, [40001, 40002, 40003]
    )
    text = plan.config_path.read_text()
    assert "port: 40001" in text and "module: mod_mqtt" in text and 'ip: "127.0.0.1"' in text
    assert "auth_method: [anonymous]" in text and text.rstrip().endswith("loglevel: info")
    for key in ("HOME", "EJABBERD_CONFIG_PATH", "EJABBERD_LOG_PATH", "ERL_CRASH_DUMP"):
        assert Path(plan.env[key]).is_relative_to(tmp_path), key
    assert plan.env["ERL_EPMD_PORT"] == "40003"
    assert plan.helpers[0][1] == 40003 and "40003" in plan.helpers[0][0]
    argv = " ".join(plan.argv)
    assert "pubsim40001@localhost" in argv and f'"{tmp_path / "spool"}"' in argv
    assert "inet_dist_listen_min 40002" in argv and "inet_dist_listen_max 40002" in argv


def test_activemq_plan_keeps_everything_in_the_workdir(tmp_path):
    _require("activemq-mqtt")
    plan = B._activemq_plan(
        BrokerSpec(kind="activemq-mqtt", options={"transport.maxFrameSize": 1048576}), tmp_path, [40011]
    )
    xml = plan.config_path.read_text()
    assert 'uri="mqtt://127.0.0.1:40011?transport.tcpNoDelay=true&amp;transport.maxFrameSize=1048576"' in xml
    assert 'persistent="false"' in xml and 'useJmx="false"' in xml
    for jar in B._ACTIVEMQ_MQTT_JARS:
        assert (tmp_path / "lib" / jar).resolve().is_file()
    props = [a for a in plan.argv if a.startswith("-D")]
    for prop in props:
        if any(k in prop for k in ("tmpdir", "base", "conf", "data", "log4j")):
            assert str(tmp_path) in prop, prop
    assert plan.env["HOME"] == str(tmp_path)


# -- real brokers ---------------------------------------------------------------
def _pubsub_roundtrip(rb):
    """Subscribe, publish one message, return what the subscriber got."""
    user, password = rb.mqtt_credentials or (None, None)
    sub, stream = mw.connect(rb.port, "pubsim-test-sub", username=user, password=password, timeout_s=10)
    pub = None
    try:
        assert mw.subscribe(sub, stream, "pubsim/t0", timeout_s=10) == [0]
        pub, _ = mw.connect(rb.port, "pubsim-test-pub", username=user, password=password, timeout_s=10)
        deadline = time.monotonic() + 10
        sub.settimeout(0.5)
        while time.monotonic() < deadline:
            pub.sendall(mw.encode_publish("pubsim/t0", b"hello-tier2"))
            try:
                data = sub.recv(4096)
            except TimeoutError:
                continue
            if b"hello-tier2" in data:
                return data
        return b""
    finally:
        for s in (sub, pub):
            if s is not None:
                s.close()


@pytest.mark.brokers
@pytest.mark.parametrize("kind, comm", [("activemq-mqtt", "java"), ("ejabberd-mqtt", "beam.smp")])
def test_tier2_broker_routes_mqtt_and_leaves_nothing(kind, comm, tmp_path):
    _require(kind)
    with broker(BrokerSpec(kind=kind, cpus=(len(os.sched_getaffinity(0)) - 1,)), tmp_path) as rb:
        tree = [p.pid for p in rb._procs] + B._descendants(rb._procs[0].pid)
        assert B._comm(rb.pid) == comm and rb.pid in tree
        assert rb.version not in ("", "unknown") and rb in live_brokers()
        assert b"pubsim/t0" in _pubsub_roundtrip(rb)
        assert rb.log_path.is_relative_to(tmp_path.resolve())
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in tree), [(p, B._comm(p)) for p in tree if not _gone(p)]
    assert not _accepts(rb.port) and rb not in live_brokers()
    if kind == "ejabberd-mqtt":  # its Erlang cookie and Mnesia stayed in the work directory
        assert (tmp_path / "home" / ".erlang.cookie").exists()
        assert (tmp_path / "spool" / "schema.DAT").exists()


@pytest.mark.brokers
def test_ejabberd_refuses_mqtt_without_credentials(tmp_path):
    _require("ejabberd-mqtt")
    with broker(BrokerSpec(kind="ejabberd-mqtt"), tmp_path) as rb:
        with pytest.raises(mw.MqttError, match="not authorized"):
            mw.connect(rb.port, "pubsim-anon", timeout_s=10)


@pytest.mark.brokers
@pytest.mark.parametrize("kind", TIER2)
def test_capped_tier2_broker_vm_is_in_the_cgroup(kind, tmp_path):
    _require(kind)
    control, reason = detect_cpu_control()
    if control is None:
        pytest.skip(f"no CPU cap available: {reason}")
    with broker(BrokerSpec(kind=kind, cpu_cap_fraction=0.5), tmp_path) as rb:
        group = rb.cpu_cap.path
        assert rb.pid in rb.cpu_cap.pids()
    assert not group.exists() and _gone(rb.pid)
