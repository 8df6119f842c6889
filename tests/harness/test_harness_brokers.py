"""Real brokers: start on free ports, accept connections, stop, and never leak a process.

Tests that need a broker binary skip with the binary's name when it is not
installed (``scripts/install_brokers.sh``; ``--all`` for RabbitMQ).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pubsim.calibration.harness import brokers as B
from pubsim.calibration.harness import procfs
from pubsim.calibration.harness.brokers import (
    BrokerSpec,
    broker,
    install_signal_cleanup,
    live_brokers,
    read_mosquitto_sys,
    start_broker,
)
from pubsim.calibration.harness.cpu import detect_cpu_control
from pubsim.sim.errors import ConfigError
from tests import ROOT

BINARIES = {"mosquitto": "mosquitto", "nats": "nats-server", "rabbitmq-mqtt": "rabbitmq-server"}
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"


def _require(kind):
    """Skip, naming what is missing, unless ``kind`` can run here."""
    if kind == "zmq-proxy":
        pytest.importorskip("zmq", reason="pyzmq not installed (needed by the zmq-proxy broker)")
        return
    binary = BINARIES[kind]
    if shutil.which(binary) is None and shutil.which(binary, path=SBIN) is None:
        hint = " --all" if kind == "rabbitmq-mqtt" else ""
        pytest.skip(f"{binary} not installed (scripts/install_brokers.sh{hint})")


def _accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _gone(pid):
    """True when ``pid`` no longer exists (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in "ZX"


def _mqtt(first, body):
    assert len(body) < 128
    return bytes([first, len(body)]) + body


def _s(text):
    return struct.pack("!H", len(text)) + text.encode()


def _mqtt_connect(port, client_id):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(_mqtt(0x10, _s("MQTT") + bytes([4, 2, 0, 30]) + _s(client_id)))
    assert sock.recv(4) == b"\x20\x02\x00\x00", "no CONNACK 0"
    return sock


# -- specification -----------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"kind": "kafka"}, "kind"),
        ({"kind": "nats", "port": 70000}, "port"),
        ({"kind": "nats", "port": True}, "port"),
        ({"kind": "nats", "cpus": (9999,)}, "cpus"),
        ({"kind": "nats", "cpus": ()}, "cpus"),
        ({"kind": "nats", "cpu_cap_fraction": 0}, "cpu_cap_fraction"),
        ({"kind": "nats", "cpu_cap_fraction": 1000.0}, "cpu_cap_fraction"),
        ({"kind": "nats", "options": ["a"]}, "options"),
    ],
)
def test_spec_rejects_bad_fields(kwargs, field):
    with pytest.raises(ConfigError) as err:
        BrokerSpec(**kwargs)
    assert err.value.field == field


def test_spec_is_frozen_and_keyword_only():
    spec = BrokerSpec(kind="nats", cpus=[0], options={"a": 1})
    assert spec.cpus == (0,) and dict(spec.options) == {"a": 1}
    with pytest.raises(AttributeError):
        spec.port = 1
    with pytest.raises(TypeError):
        BrokerSpec("nats")  # noqa


def test_zmq_proxy_runs_without_importing_pubsim(tmp_path):
    """The proxy is started as a file: importing the pubsim package (about 2.4 s of CPU) would
    take longer than the start timeout under the campaigns' 0.1-core quota."""
    pytest.importorskip("zmq", reason="pyzmq not installed (needed by the zmq-proxy broker)")
    plan = B._zmq_plan(BrokerSpec(kind="zmq-proxy"), tmp_path, [1, 2])
    assert "-m" not in plan.argv and Path(plan.argv[1]).name == "zmqproxy.py"
    code = (
        f"import runpy, sys; sys.argv = ['zmqproxy.py', '--help']\n"
        f"try:\n    runpy.run_path({plan.argv[1]!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pubsim'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--xsub" in out.stdout and out.stdout.strip().splitlines()[-1] == "[]"


# -- start / stop --------------------------------------------------------------
@pytest.mark.brokers
@pytest.mark.parametrize("kind", ["mosquitto", "nats", "zmq-proxy"])
def test_start_accepts_connections_and_stop_leaves_nothing(kind, tmp_path):
    _require(kind)
    rb = start_broker(BrokerSpec(kind=kind), tmp_path)
    try:
        assert rb in live_brokers() and rb.alive()
        assert rb.protocol == B.PROTOCOLS[kind]
        assert rb.version and rb.version != "unknown"
        assert rb.config_path.is_file() and rb.config_path.parent == tmp_path.resolve()
        assert _accepts(rb.pub_port) and _accepts(rb.sub_port)
        assert (rb.pub_port != rb.sub_port) == (kind == "zmq-proxy")
        os.kill(rb.pid, 0)
    finally:
        rb.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(rb.pid, 0)
    assert rb.returncode != -signal.SIGKILL, "needed SIGKILL: SIGTERM did not stop it"
    assert rb not in live_brokers() and not rb.alive()
    assert not _accepts(rb.pub_port)
    rb.stop()  # idempotent


@pytest.mark.brokers
def test_exception_inside_context_manager_stops_broker(tmp_path):
    _require("mosquitto")
    with pytest.raises(KeyError, match="boom"):
        with broker(BrokerSpec(kind="mosquitto"), tmp_path) as rb:
            pid = rb.pid
            raise KeyError("boom")
    assert _gone(pid) and rb.stopped and rb not in live_brokers()


@pytest.mark.brokers
def test_explicit_port_and_pinning(tmp_path):
    _require("nats")
    port = B._free_ports(1)[0]
    with broker(BrokerSpec(kind="nats", port=port, cpus=(0,)), tmp_path) as rb:
        assert rb.port == port and _accepts(port)
        assert os.sched_getaffinity(rb.pid) == {0}


@pytest.mark.brokers
def test_port_in_use_raises_with_log_tail_and_leaves_nothing(tmp_path):
    _require("mosquitto")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        before = set(live_brokers())
        with pytest.raises(RuntimeError) as err:
            start_broker(BrokerSpec(kind="mosquitto", port=port), tmp_path)
    msg = str(err.value)
    assert "mosquitto" in msg and str(port) in msg and "mosquitto.log" in msg
    assert set(live_brokers()) == before
    assert not _pgrep_config(tmp_path / "mosquitto.conf")


def _pgrep_config(conf):
    out = subprocess.run(["pgrep", "-f", str(conf)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@pytest.mark.brokers
def test_bad_option_fails_fast(tmp_path):
    _require("mosquitto")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited with code"):
        start_broker(BrokerSpec(kind="mosquitto", options={"no_such_option": "1"}), tmp_path)
    assert time.monotonic() - t0 < 5


# -- cleanup of a process that is interrupted or exits ---------------------------
CHILD = textwrap.dedent("""
    import signal, sys, time
    from pubsim.calibration.harness.brokers import BrokerSpec, install_signal_cleanup, start_broker
    # Ctrl-C interrupts, as in a terminal, even if this test runs in a job that ignores SIGINT
    signal.signal(signal.SIGINT, signal.default_int_handler)
    install_signal_cleanup()
    rb = [start_broker(BrokerSpec(kind=k), sys.argv[1] + "/" + k) for k in sys.argv[3:]]
    print(" ".join(str(b.pid) for b in rb), flush=True)
    if sys.argv[2] == "wait":
        time.sleep(60)
""")


def _child(tmp_path, mode, kinds):
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), mode, *kinds],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    if not line.strip():
        proc.kill()
        pytest.fail(f"child did not start its brokers: {proc.communicate()[1]}")
    return proc, [int(p) for p in line.split()]


@pytest.mark.brokers
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_owner_stops_its_brokers(tmp_path, sig):
    _require("mosquitto")
    _require("zmq-proxy")
    proc, pids = _child(tmp_path, "wait", ["mosquitto", "zmq-proxy"])
    assert not any(_gone(p) for p in pids)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode != 0  # KeyboardInterrupt / killed by SIGTERM, as without cleanup
    deadline = time.monotonic() + 2
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(_gone(p) for p in pids), f"brokers left running after {sig.name}: {pids}\n{err}"


@pytest.mark.brokers
def test_normal_exit_without_stop_stops_brokers(tmp_path):
    _require("nats")
    proc, pids = _child(tmp_path, "exit", ["nats"])
    proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert all(_gone(p) for p in pids), "atexit did not stop the broker"


# -- CPU cap -------------------------------------------------------------------
@pytest.mark.brokers
def test_capped_broker_runs_in_its_cgroup_which_is_removed(tmp_path):
    _require("mosquitto")
    control, reason = detect_cpu_control()
    if control is None:
        pytest.skip(f"no CPU cap available: {reason}")
    with broker(BrokerSpec(kind="mosquitto", cpu_cap_fraction=0.5), tmp_path) as rb:
        group = rb.cpu_cap.path
        assert group.is_dir() and rb.pid in rb.cpu_cap.pids()
        assert _accepts(rb.port)
    assert not group.exists() and _gone(rb.pid)


# -- mosquitto $SYS ------------------------------------------------------------
@pytest.mark.brokers
def test_mosquitto_sys_counts_a_publish(tmp_path):
    _require("mosquitto")
    with broker(BrokerSpec(kind="mosquitto"), tmp_path) as rb:
        sock = _mqtt_connect(rb.port, "pubsim-test-pub")
        sock.sendall(_mqtt(0x30, _s("pubsim/t0") + b"hello"))
        sock.sendall(b"\xe0\x00")
        sock.close()
        sys_ = read_mosquitto_sys(rb.port, timeout_s=5)
    assert sys_["$SYS/broker/publish/messages/received"] >= 1
    assert sys_["$SYS/broker/messages/received"] >= 1
    assert sys_["$SYS/broker/publish/messages/dropped"] == 0
    assert rb.version in sys_["$SYS/broker/version"]


@pytest.mark.brokers
def test_read_mosquitto_sys_on_closed_port_raises():
    port = B._free_ports(1)[0]
    with pytest.raises(OSError):
        read_mosquitto_sys(port, timeout_s=1)


# -- RabbitMQ ------------------------------------------------------------------
@pytest.mark.brokers
def test_rabbitmq_mqtt_starts_accepts_mqtt_and_leaves_nothing(tmp_path):
    _require("rabbitmq-mqtt")
    with broker(BrokerSpec(kind="rabbitmq-mqtt"), tmp_path) as rb:
        tree = [p.pid for p in rb._procs] + procfs.descendants(rb._procs[0].pid)
        assert procfs.comm(rb.pid) == "beam.smp"
        assert rb.version != "unknown"
        _mqtt_connect(rb.port, "pubsim-test").close()
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in tree), [(p, procfs.comm(p)) for p in tree if not _gone(p)]
    assert not _accepts(rb.port)


def test_ignored_signal_stays_ignored():
    # a job started with '&' from a script ignores SIGINT: cleanup must not make it stop brokers
    old = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        install_signal_cleanup(signals=(signal.SIGUSR1,))
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        install_signal_cleanup(signals=(signal.SIGUSR1,))
        assert getattr(signal.getsignal(signal.SIGUSR1), "_pubsim_cleanup", False)
    finally:
        signal.signal(signal.SIGUSR1, old)
