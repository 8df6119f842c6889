"""Start, watch and stop real brokers on loopback ports for measurement.

:func:`start_broker` writes a broker's configuration into a work directory,
starts the broker in its own session (process group), optionally pinned to
cores (``taskset -c``) and capped to a CPU fraction (a cgroup, see
:mod:`.cpu`), waits until its TCP port(s) accept connections and returns a
:class:`RunningBroker`. :func:`broker` is the same as a context manager.

Kinds
-----
``mosquitto``
    ``mosquitto -c mosquitto.conf``: ``listener PORT 127.0.0.1``, anonymous,
    TCP_NODELAY, no persistence, ``$SYS`` every second (read it with
    :func:`read_mosquitto_sys`), log file ``mosquitto.log``.
``nats``
    ``nats-server -c nats.conf -a 127.0.0.1 -p PORT``, log file ``nats.log``.
``rabbitmq-mqtt``
    RabbitMQ with the ``rabbitmq_mqtt`` plugin, MQTT on PORT, AMQP listener
    off; node name, Mnesia, logs, Erlang cookie (``HOME``) all inside the
    work directory; its own ``epmd`` on a free port (so nothing escapes the
    cleanup). Starting takes several seconds (allowed: 60 s). ``pid`` is
    the Erlang VM (``beam.smp``), not the start-up shell script.
``activemq-mqtt``
    ActiveMQ Classic (Debian ``activemq``) with an MQTT transport connector
    on PORT (``mqtt://127.0.0.1:PORT``, TCP_NODELAY), non-persistent, no JMX,
    no advisories; started as ``java -jar /usr/share/activemq/bin/activemq.jar
    start xbean:file:activemq.xml`` with ``activemq.base``, data, temporary
    files and the log4j log inside the work directory; fixed 256 MiB heap.
    ``pid`` is the JVM. Starting takes several seconds (allowed: 120 s).
``ejabberd-mqtt``
    ejabberd (Debian ``ejabberd``) with ``mod_mqtt`` listening on PORT;
    anonymous login (mod_mqtt needs a non-empty password, so clients send
    its registry entry's ``mqtt_credentials``); Erlang node name, Mnesia spool, logs, crash
    dump and Erlang cookie (``HOME``) inside the work directory; its own
    ``epmd`` on a free port. Started with ``erl -s ejabberd`` directly (not
    ``ejabberdctl``, which switches to the ``ejabberd`` user). ``pid`` is the
    Erlang VM (``beam.smp``). Allowed start time: 120 s.
``zmq-proxy``
    ``python .../harness/zmqproxy.py`` (the file, without importing pubsim):
    ``zmq.proxy(XSUB, XPUB)``;
    publishers connect to ``pub_port`` (XSUB), subscribers to ``sub_port``
    (XPUB).

Each kind is one :class:`BrokerKind` entry of :data:`REGISTRY` (binary,
configuration template and command line, version probe, readiness time,
the process whose CPU is measured, protocol and ports, credentials,
install hint); :data:`KINDS`, :data:`PROTOCOLS`, :data:`START_TIMEOUT_S`
and :data:`MQTT_CREDENTIALS` are read-only views of it.

``BrokerSpec.options`` adds lines to the configuration file (mosquitto
``key value``, NATS ``key: value``, RabbitMQ ``key = value``, ejabberd
top-level ``key: value``; ActiveMQ: query parameters of the MQTT connector
URI, e.g. ``{"transport.defaultKeepAlive": 60000}``); for
``zmq-proxy`` the only option is ``hwm`` (both sides' high-water mark).

Cleanup
-------
Every started broker is in a registry (:func:`live_brokers`) until stopped.
An :mod:`atexit` handler stops those left at interpreter exit, and
:func:`install_signal_cleanup` makes SIGINT / SIGTERM stop them before the
previous handler runs (KeyboardInterrupt for SIGINT, death for SIGTERM).
Stopping sends SIGTERM to the broker's process group and to every
descendant it had, waits, then SIGKILLs what is left, and removes its cgroup.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ...sim.errors import ConfigError
from . import mqttwire, procfs
from .cpu import CpuCap, cores

__all__ = [
    "KINDS",
    "REGISTRY",
    "BrokerKind",
    "BrokerSpec",
    "RunningBroker",
    "broker",
    "broker_version",
    "install_signal_cleanup",
    "live_brokers",
    "read_mosquitto_sys",
    "start_broker",
    "stop_all",
]

_ACTIVEMQ_HOME = Path("/usr/share/activemq")
_ACTIVEMQ_MQTT_JARS = ("mqtt-client.jar", "hawtdispatch.jar", "hawtdispatch-transport.jar")
HOST = "127.0.0.1"
_ZMQ_PROXY_SCRIPT = Path(__file__).resolve().with_name("zmqproxy.py")
_RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")  # Debian: /usr/sbin's wrapper su's to rabbitmq
_PORT_RETRIES = 3

_LIVE = {}  # id(RunningBroker) -> RunningBroker: the only global state (for cleanup)


@dataclass(frozen=True, kw_only=True)
class BrokerKind:
    """Everything the harness knows about one kind of broker (one :data:`REGISTRY` entry).

    Attributes
    ----------
    name : str
        Registry key, e.g. ``"mosquitto"``.
    protocol : {"mqtt", "nats", "zmq"}
        What the load generator speaks to it.
    binary : str or None
        Executable it runs (None: this Python interpreter).
    plan : callable
        ``plan(spec, workdir, ports) -> _Plan``: writes the configuration file
        (the kind's template plus ``spec.options``) and returns the command
        line, environment, helper processes and the ports to wait for.
    version : callable
        ``version() -> str``: the installed version (``"unknown"`` when it
        cannot be told).
    ports_needed : int
        Loopback TCP ports it takes: the main one first, then its helpers'
        (Erlang distribution, ``epmd``) or the XPUB side.
    start_timeout_s : float
        Readiness: every port of the plan must accept connections (from a
        listener of the started process tree) within this time, s.
    work_comm : str or None
        CPU placement: command name of the process doing the broker's work
        (the JVM, the Erlang VM), sampled for CPU and checked to be in the
        cgroup; None: the started process itself.
    split_ports : bool
        Publishers and subscribers connect to different ports (ZeroMQ
        XSUB / XPUB).
    mqtt_credentials : (str, str) or None
        ``(user name, password)`` MQTT clients must send; None: anonymous
        CONNECT without credentials.
    debian_package : str or None
        Package whose version :attr:`version` reports, for the dpkg kinds.
    install_hint : str
        How to install it, for error messages.
    """

    name: str
    protocol: str
    binary: str | None
    plan: Callable
    version: Callable[[], str]
    ports_needed: int
    start_timeout_s: float
    work_comm: str | None = None
    split_ports: bool = False
    mqtt_credentials: tuple[str, str] | None = None
    debian_package: str | None = None
    install_hint: str = "scripts/install_brokers.sh"


# -- specification ---------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class BrokerSpec:
    """What broker to start and under which CPU constraints.

    Parameters
    ----------
    kind : {"mosquitto", "nats", "rabbitmq-mqtt", "zmq-proxy", "activemq-mqtt", "ejabberd-mqtt"}
    port : int
        Loopback TCP port; 0 picks a free one (zmq-proxy: the XSUB port,
        the XPUB port is always picked free).
    cpus : tuple of int or None
        Core ids to pin the broker to (``taskset -c``); None: no pinning.
    cpu_cap_fraction : float or None
        CPU bandwidth cap in cores, in ``(0, number of cores]`` (cgroup);
        None: uncapped.
    options : mapping
        Extra configuration lines (see the module docstring).
    """

    kind: str
    port: int = 0
    cpus: tuple | None = None
    cpu_cap_fraction: float | None = None
    options: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in REGISTRY:
            raise ConfigError("kind", self.kind, f"one of {', '.join(KINDS)}")
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 0 <= self.port <= 65535:
            raise ConfigError("port", self.port, "an integer in [0, 65535] (0: pick a free port)")
        if self.cpus is not None:
            object.__setattr__(self, "cpus", _check_cpus(self.cpus))
        if self.cpu_cap_fraction is not None:
            n = len(cores())
            f = self.cpu_cap_fraction
            if not isinstance(f, (int, float)) or isinstance(f, bool) or not 0 < f <= n:
                raise ConfigError("cpu_cap_fraction", f, f"a number of cores in (0, {n}] or None")
        if not isinstance(self.options, Mapping):
            raise ConfigError("options", self.options, "a mapping of configuration keys to values")
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))


def _check_cpus(cpus):
    usable = cores()
    try:
        ids = tuple(sorted({int(c) for c in cpus}))
    except (TypeError, ValueError):
        ids = None
    if not ids or not set(ids) <= set(usable):
        raise ConfigError("cpus", cpus, f"a non-empty tuple of core ids among {usable} or None")
    return ids


# -- the running broker ----------------------------------------------------
class RunningBroker:
    """A broker process started by :func:`start_broker`.

    Attributes
    ----------
    kind : str
    pid : int
        The process doing the broker's work (sample its CPU with
        :func:`pubsim.calibration.harness.procfs.sample`).
    port : int
        Main port (zmq-proxy: the XSUB port).
    pub_port, sub_port : int
        Where publishers / subscribers connect (equal to ``port`` except
        for zmq-proxy).
    protocol : {"mqtt", "nats", "zmq"}
    version : str
    config_path, log_path, workdir : pathlib.Path
    cpus : tuple of int or None
    cpu_cap : calibration.harness.cpu.CpuCap or None
    mqtt_credentials : tuple of str or None
        ``(user name, password)`` MQTT clients must send (the kind's ``mqtt_credentials``).
    """

    def __init__(self, *, spec, procs, ports, files, version, cap):
        self.spec = spec
        self.kind = spec.kind
        kind = REGISTRY[spec.kind]
        self.protocol = kind.protocol
        self._procs = procs  # main process first, then helpers (rabbitmq: epmd)
        self.pid = procs[0].pid
        self.port = self.pub_port = ports[0]
        self.sub_port = ports[1] if kind.split_ports else ports[0]
        self.config_path, self.log_path, self.out_path = files
        self.workdir = self.config_path.parent
        self.version = version
        self.cpus = spec.cpus
        self.cpu_cap = cap
        self.mqtt_credentials = kind.mqtt_credentials
        self._owner = os.getpid()
        self._stopped = False
        _LIVE[id(self)] = self

    def __repr__(self):
        state = "stopped" if self._stopped else "running"
        return (
            f"RunningBroker({self.kind} {self.version}, pid {self.pid}, "
            f"pub_port {self.pub_port}, sub_port {self.sub_port}, {state})"
        )

    @property
    def stopped(self):
        """True once :meth:`stop` has run."""
        return self._stopped

    @property
    def returncode(self):
        """Exit status of the started process (negative: killed by that signal); None while it runs."""
        return self._procs[0].poll()

    def alive(self):
        """True while the main broker process runs."""
        return not self._stopped and self._procs[0].poll() is None and not _dead(self.pid)

    def log_tail(self, lines=20):
        """Last ``lines`` lines of the broker's log and console output."""
        parts = []
        for path in dict.fromkeys((self.log_path, self.out_path)):
            text = _tail(path, lines)
            if text:
                parts.append(f"--- {path.name} ---\n{text}")
        return "\n".join(parts) or "(no log output)"

    def stop(self, timeout_s=5.0):
        """Terminate the broker and its helpers, remove its cgroup. Idempotent.

        Parameters
        ----------
        timeout_s : float
            Grace period after SIGTERM before SIGKILL, s.
        """
        if self._stopped:
            return
        try:
            for proc in self._procs:
                _terminate_tree(proc, timeout_s)
            if self.cpu_cap is not None:
                self.cpu_cap.remove()
        finally:
            self._stopped = True
            _LIVE.pop(id(self), None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def live_brokers():
    """Brokers started by this process and not yet stopped.

    Returns
    -------
    list of RunningBroker
    """
    return [b for b in _LIVE.values() if b._owner == os.getpid()]


def stop_all(timeout_s=5.0):
    """Stop every live broker of this process; errors go to stderr."""
    for b in live_brokers():
        try:
            b.stop(timeout_s)
        except Exception as err:  # cleanup must go on with the others
            print(f"pubsim: could not stop {b!r}: {err}", file=sys.stderr)


atexit.register(stop_all)


def install_signal_cleanup(signals=(signal.SIGINT, signal.SIGTERM)):
    """Make ``signals`` stop all live brokers, then do what they did before.

    SIGINT then raises KeyboardInterrupt (Python's default); a signal with
    the default action (SIGTERM) is re-raised so the process still dies of
    it. A signal the process ignores (SIGINT in a job started with ``&``
    from a script) is left ignored: the process goes on, and so must its
    brokers. Idempotent; call it from the main thread.

    Parameters
    ----------
    signals : iterable of signal.Signals
    """
    for signum in signals:
        previous = signal.getsignal(signum)
        if getattr(previous, "_pubsim_cleanup", False) or previous == signal.SIG_IGN:
            continue
        signal.signal(signum, _cleanup_handler(previous))


def _cleanup_handler(previous):
    def handler(signum, frame):
        stop_all()
        if callable(previous):
            previous(signum, frame)
        elif previous in (signal.SIG_DFL, None):
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    handler._pubsim_cleanup = True
    return handler


# -- processes -------------------------------------------------------------
# /proc parsing lives in .procfs; these names are what the rest of this module (and its tests) call
_dead = procfs.is_dead


def _signal_all(proc, pids, sig):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _wait_dead(proc, pids, timeout_s):
    deadline = time.monotonic() + timeout_s
    while True:
        proc.poll()
        if proc.returncode is not None and all(_dead(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _terminate_tree(proc, timeout_s):
    """SIGTERM ``proc``'s group and descendants; SIGKILL after ``timeout_s``; reap ``proc``."""
    pids = procfs.descendants(proc.pid) if proc.poll() is None else []
    _signal_all(proc, pids, signal.SIGTERM)
    if not _wait_dead(proc, pids, timeout_s):
        _signal_all(proc, pids + procfs.descendants(proc.pid), signal.SIGKILL)
        _wait_dead(proc, pids, 5.0)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(1.0)


def _tail(path, lines):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# -- ports -----------------------------------------------------------------
def _free_ports(n):
    """``n`` distinct free loopback TCP ports (held open together while chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _accepts(port):
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_ports(proc, ports, timeout_s, what):
    """Wait until ``proc`` (or a descendant) listens on every port and it accepts connections.

    Raises RuntimeError if ``proc`` exits, TimeoutError after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    pending = list(ports)
    while pending:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} before port(s) {pending} opened")
        if procfs.owns_listener(proc.pid, pending[0]) and _accepts(pending[0]):
            pending.pop(0)
            continue
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: port(s) {pending} not accepting connections after {timeout_s:g} s")
        time.sleep(0.05)


# -- versions --------------------------------------------------------------
def _run_text(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout + out.stderr).strip()


def _regex_version(argv, pattern, first_line=False):
    text = _run_text(argv)
    m = re.search(pattern, text.split("\n")[0] if first_line else text)
    return m.group(1) if m else "unknown"


def _mosquitto_version() -> str:
    return _regex_version(["mosquitto", "-h"], r"version\s+(\S+)", first_line=True)


def _nats_version() -> str:
    return _regex_version(["nats-server", "--version"], r"v?(\d+\.\d+\.\d+\S*)")


def _dpkg_version(package: str) -> str:
    return _regex_version(["dpkg-query", "-W", "-f=${Version}", package], r"(\S+)")


def _zmq_version() -> str:
    import zmq  # optional heavy dependency: pyzmq, needed only for the zmq-proxy kind

    return zmq.zmq_version()


def broker_version(kind: str) -> str:
    """Version of the installed broker of ``kind`` (``"unknown"`` if it cannot be told)."""
    return REGISTRY[kind].version()


# -- per-kind launch plans -------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class _Plan:
    argv: list
    ports: list  # main port first; all must accept connections
    config_path: Path
    log_path: Path
    env: dict = field(default_factory=dict)
    helpers: list = field(default_factory=list)  # (argv, port) started first, e.g. epmd


def _mosquitto_plan(spec, workdir, ports):
    conf, log = workdir / "mosquitto.conf", workdir / "mosquitto.log"
    lines = [
        f"listener {ports[0]} {HOST}",
        "allow_anonymous true",
        "set_tcp_nodelay true",
        "max_queued_messages 1000000",
        "sys_interval 1",
        "persistence false",
        "user root",
        f"log_dest file {log}",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "log_type information",
        "log_timestamp true",
    ]
    lines += [f"{k} {v}" for k, v in spec.options.items()]
    _write(conf, lines)
    return _Plan(argv=[_which("mosquitto"), "-c", str(conf)], ports=ports[:1], config_path=conf, log_path=log)


def _nats_plan(spec, workdir, ports):
    conf, log = workdir / "nats.conf", workdir / "nats.log"
    lines = [f'log_file: "{log}"', "logtime: true"]
    lines += [f"{k}: {v}" for k, v in spec.options.items()]
    _write(conf, lines)
    argv = [_which("nats-server"), "-c", str(conf), "-a", HOST, "-p", str(ports[0])]
    return _Plan(argv=argv, ports=ports[:1], config_path=conf, log_path=log)


def _rabbitmq_plan(spec, workdir, ports):
    mqtt, dist, epmd = ports[:3]
    conf, log, plugins = workdir / "rabbitmq.conf", workdir / "rabbit.log", workdir / "enabled_plugins"
    lines = [
        "listeners.tcp = none",
        f"mqtt.listeners.tcp.default = {HOST}:{mqtt}",
        "mqtt.allow_anonymous = true",
        "mqtt.tcp_listen_options.nodelay = true",
        "log.console = false",
        "log.file.level = info",
    ]
    lines += [f"{k} = {v}" for k, v in spec.options.items()]
    _write(conf, lines)
    _write(plugins, ["[rabbitmq_mqtt]."])
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env = {
        "HOME": str(home),
        "RABBITMQ_NODENAME": f"pubsim{mqtt}@localhost",
        "RABBITMQ_CONFIG_FILE": str(conf),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
        "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(workdir / "log"),
        "RABBITMQ_LOGS": str(log),
        "RABBITMQ_PID_FILE": str(workdir / "rabbit.pid"),
        "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),  # absent: ignore /etc's
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
        "RABBITMQ_DIST_PORT": str(dist),
        "ERL_EPMD_PORT": str(epmd),
        "ERL_EPMD_ADDRESS": HOST,
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }
    server = (
        str(_RABBITMQ_SERVER)
        if _RABBITMQ_SERVER.exists()
        else _which("rabbitmq-server", REGISTRY[spec.kind].install_hint)
    )
    helper = ([_which("epmd"), "-port", str(epmd), "-address", HOST], epmd)
    return _Plan(argv=[server], ports=[mqtt], config_path=conf, log_path=log, env=env, helpers=[helper])


def _activemq_plan(spec, workdir, ports):
    conf, log, log4j = workdir / "activemq.xml", workdir / "activemq.log", workdir / "log4j.properties"
    query = "&".join(f"{k}={v}" for k, v in {"transport.tcpNoDelay": "true", **spec.options}.items())
    _write(
        conf,
        [
            '<beans xmlns="http://www.springframework.org/schema/beans"',
            '       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"',
            '       xsi:schemaLocation="http://www.springframework.org/schema/beans '
            "http://www.springframework.org/schema/beans/spring-beans-2.0.xsd "
            'http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">',
            f'  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="pubsim{ports[0]}" useJmx="false"',
            f'          persistent="false" advisorySupport="false" schedulerSupport="false" dataDirectory="{workdir / "data"}">',
            "    <transportConnectors>",
            f'      <transportConnector name="mqtt" uri="mqtt://{HOST}:{ports[0]}?{query.replace("&", "&amp;")}"/>',
            "    </transportConnectors>",
            "  </broker>",
            "</beans>",
        ],
    )
    _write(
        log4j,
        [
            "log4j.rootLogger=INFO, file",
            "log4j.appender.file=org.apache.log4j.FileAppender",
            f"log4j.appender.file.File={log}",
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.file.layout.ConversionPattern=%d %-5p [%t] %c - %m%n",
        ],
    )
    (workdir / "tmp").mkdir(exist_ok=True)
    home = str(_ACTIVEMQ_HOME)
    argv = [
        _which("java", REGISTRY[spec.kind].install_hint),
        "-Xms256M",
        "-Xmx256M",
        f"-Djava.io.tmpdir={workdir / 'tmp'}",
        f"-Dlog4j.configuration=file:{log4j}",
        f"-Dactivemq.home={home}",
        f"-Dactivemq.base={workdir}",
        f"-Dactivemq.conf={workdir}",
        f"-Dactivemq.data={workdir / 'data'}",
        "-jar",
        str(_ACTIVEMQ_HOME / "bin" / "activemq.jar"),
        "start",
        f"xbean:file:{conf}",
    ]
    _activemq_mqtt_libs(workdir / "lib")
    return _Plan(argv=argv, ports=ports[:1], config_path=conf, log_path=log, env={"HOME": str(workdir)})


def _activemq_mqtt_libs(libdir):
    """Link the MQTT codec into ``activemq.base/lib`` (the launcher puts that directory on the class path).

    Debian's ``activemq`` ships ``activemq-mqtt.jar`` but not the FuseSource
    MQTT codec it needs at run time (package ``libmqtt-client-java``, not a
    dependency): without it every MQTT connection fails with
    ``NoClassDefFoundError: org/fusesource/mqtt/codec/...``.
    """
    if not (_ACTIVEMQ_HOME / "lib" / "activemq-mqtt.jar").exists():
        raise RuntimeError(
            f"{_ACTIVEMQ_HOME}/lib/activemq-mqtt.jar missing (install the Debian package "
            "activemq: scripts/install_brokers.sh --tier2)"
        )
    libdir.mkdir(exist_ok=True)
    for jar in _ACTIVEMQ_MQTT_JARS:
        src = Path("/usr/share/java") / jar
        if not src.exists():
            raise RuntimeError(
                f"{src} missing: ActiveMQ's MQTT transport needs it (Debian package "
                "libmqtt-client-java: scripts/install_brokers.sh --tier2)"
            )
        dst = libdir / jar
        if not dst.exists():
            dst.symlink_to(src)


def _ejabberd_plan(spec, workdir, ports):
    mqtt, dist, epmd = ports[:3]
    conf, log, spool = workdir / "ejabberd.yml", workdir / "ejabberd.log", workdir / "spool"
    lines = [
        'hosts: ["localhost"]',
        "loglevel: notice",
        "log_rotate_count: 0",
        "auth_method: [anonymous]",
        "anonymous_protocol: login_anon",
        "allow_multiple_connections: true",
        "listen:",
        f"  - port: {mqtt}",
        f'    ip: "{HOST}"',
        "    module: mod_mqtt",
        "    backlog: 1024",
        "modules:",
        "  mod_mqtt:",
        "    max_queue: unlimited",
        "    queue_type: ram",
    ]
    lines += [f"{k}: {v}" for k, v in spec.options.items()]
    _write(conf, lines)
    spool.mkdir(exist_ok=True)
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    env = {
        "HOME": str(home),
        "EJABBERD_CONFIG_PATH": str(conf),
        "EJABBERD_LOG_PATH": str(log),
        "ERL_CRASH_DUMP": str(workdir / "erl_crash.dump"),
        "ERL_EPMD_PORT": str(epmd),
        "ERL_EPMD_ADDRESS": HOST,
        "ERL_LIBS": _ejabberd_libs(),
        "CONTRIB_MODULES_PATH": str(home / "modules"),
    }
    if Path("/etc/ejabberd/inetrc").exists():
        env["ERL_INETRC"] = "/etc/ejabberd/inetrc"
    argv = [
        _which("erl", REGISTRY[spec.kind].install_hint),
        "-sname",
        f"pubsim{mqtt}@localhost",
        "+K",
        "true",
        "+P",
        "250000",
        "-kernel",
        "inet_dist_use_interface",
        "{127,0,0,1}",
        "-kernel",
        "inet_dist_listen_min",
        str(dist),
        "-kernel",
        "inet_dist_listen_max",
        str(dist),
        "-mnesia",
        "dir",
        f'"{spool}"',
        "-s",
        "ejabberd",
        "-noinput",
    ]
    helper = ([_which("epmd"), "-port", str(epmd), "-address", HOST], epmd)
    return _Plan(argv=argv, ports=[mqtt], config_path=conf, log_path=log, env=env, helpers=[helper])


def _ejabberd_libs():
    """``ERL_LIBS`` holding ejabberd's applications (Debian: /usr/lib/<triplet>/ejabberd-<version>)."""
    found = sorted(Path("/usr/lib").glob("*/ejabberd-*/ebin/ejabberd.app"))
    if not found:
        raise RuntimeError("ejabberd is not installed (run scripts/install_brokers.sh --tier2)")
    return str(found[-1].parents[2])


def _zmq_plan(spec, workdir, ports):
    unknown = set(spec.options) - {"hwm"}
    if unknown:
        raise ConfigError("options", dict(spec.options), "only 'hwm' for zmq-proxy")
    conf, log = workdir / "zmq-proxy.args", workdir / "zmq-proxy.out"
    # run as a file, not ``-m pubsim...``: importing the pubsim package costs about 2.4 s of CPU,
    # 24 s under a 0.1-core quota, past the start timeout; the proxy needs only pyzmq
    argv = [
        sys.executable,
        str(_ZMQ_PROXY_SCRIPT),
        "--xsub",
        str(ports[0]),
        "--xpub",
        str(ports[1]),
    ]
    if "hwm" in spec.options:
        argv += ["--hwm", str(int(spec.options["hwm"]))]
    _write(conf, argv)
    return _Plan(argv=argv, ports=ports[:2], config_path=conf, log_path=log)


REGISTRY: Mapping[str, BrokerKind] = MappingProxyType(
    {
        k.name: k
        for k in (
            BrokerKind(
                name="mosquitto",
                protocol="mqtt",
                binary="mosquitto",
                plan=_mosquitto_plan,
                version=_mosquitto_version,
                ports_needed=1,
                start_timeout_s=10.0,
            ),
            BrokerKind(
                name="nats",
                protocol="nats",
                binary="nats-server",
                plan=_nats_plan,
                version=_nats_version,
                ports_needed=1,
                start_timeout_s=10.0,
            ),
            BrokerKind(
                name="rabbitmq-mqtt",
                protocol="mqtt",
                binary="rabbitmq-server",
                plan=_rabbitmq_plan,
                version=functools.partial(_dpkg_version, "rabbitmq-server"),
                ports_needed=3,
                start_timeout_s=60.0,
                work_comm="beam.smp",
                debian_package="rabbitmq-server",
                install_hint="scripts/install_brokers.sh --all",
            ),
            BrokerKind(
                name="zmq-proxy",
                protocol="zmq",
                binary=None,
                plan=_zmq_plan,
                version=_zmq_version,
                ports_needed=2,
                start_timeout_s=15.0,
                split_ports=True,
            ),
            BrokerKind(
                name="activemq-mqtt",
                protocol="mqtt",
                binary="java",
                plan=_activemq_plan,
                version=functools.partial(_dpkg_version, "activemq"),
                ports_needed=1,
                start_timeout_s=120.0,
                work_comm="java",
                debian_package="activemq",
                install_hint="scripts/install_brokers.sh --tier2",
            ),
            BrokerKind(
                name="ejabberd-mqtt",
                protocol="mqtt",
                binary="erl",
                plan=_ejabberd_plan,
                version=functools.partial(_dpkg_version, "ejabberd"),
                ports_needed=3,
                start_timeout_s=120.0,
                work_comm="beam.smp",
                mqtt_credentials=("pubsim", "pubsim"),
                debian_package="ejabberd",
                install_hint="scripts/install_brokers.sh --tier2",
            ),
        )
    }
)
"""Broker kind name -> :class:`BrokerKind`: the one place a kind is described."""

# read-only views of the registry, under the names callers used before it existed
KINDS = tuple(REGISTRY)
PROTOCOLS = MappingProxyType({k: v.protocol for k, v in REGISTRY.items()})
START_TIMEOUT_S = MappingProxyType({k: v.start_timeout_s for k, v in REGISTRY.items()})
MQTT_CREDENTIALS = MappingProxyType(
    {k: v.mqtt_credentials for k, v in REGISTRY.items() if v.mqtt_credentials is not None}
)


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")


def _which(binary, install_hint="scripts/install_brokers.sh"):
    path = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if path is None:
        raise RuntimeError(f"{binary} is not installed (run {install_hint})")
    return path


def _ports_for(spec):
    extra = REGISTRY[spec.kind].ports_needed - (1 if spec.port else 0)
    free = [p for p in _free_ports(extra + 1) if p != spec.port][:extra]
    return ([spec.port] if spec.port else []) + free


# -- starting --------------------------------------------------------------
def _wrap(argv, spec, cap):
    """Prefix ``argv`` with the cgroup entry and ``taskset`` pinning (pid kept by ``exec``)."""
    if spec.cpus is not None:
        argv = [_which("taskset"), "-c", ",".join(map(str, spec.cpus))] + argv
    if cap is not None:
        argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cap.procs_file)] + argv
    return argv


def _popen(argv, env, workdir, out):
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env={**os.environ, **env},
        start_new_session=True,
    )


def _launch(spec, workdir, plan, cap, what):
    """Start helpers then the broker; returns ``(procs, out_path)``; stops what it started on error."""
    out_path = workdir / f"{spec.kind}.out"
    procs = []
    try:
        with open(out_path, "ab") as out:
            for argv, port in plan.helpers:
                procs.append(_popen(_wrap(argv, spec, cap), plan.env, workdir, out))
                _wait_ports(procs[-1], [port], 10.0, f"{what} helper {Path(argv[0]).name}")
            procs.insert(0, _popen(_wrap(plan.argv, spec, cap), plan.env, workdir, out))
    except BaseException:
        for proc in procs:
            _terminate_tree(proc, 2.0)
        raise
    return procs, out_path


def _work_pid(kind, proc):
    """The pid doing the broker's work: the Erlang VM or the JVM for those kinds, else the started process."""
    comm = REGISTRY[kind].work_comm
    if comm is None:
        return proc.pid
    found = [p for p in [proc.pid, *procfs.descendants(proc.pid)] if procfs.comm(p) == comm]
    if not found:
        raise RuntimeError(f"{kind} (pid {proc.pid}): no {comm} process found (the started one or under it)")
    return found[0]


def _start_once(spec, workdir, cap):
    ports = _ports_for(spec)
    what = f"{spec.kind} on port {ports[0]}"
    plan = REGISTRY[spec.kind].plan(spec, workdir, ports)
    version = broker_version(spec.kind)
    procs, out_path = _launch(spec, workdir, plan, cap, what)
    rb = RunningBroker(
        spec=spec,
        procs=procs,
        ports=ports,
        version=version,
        cap=None,
        files=(plan.config_path, plan.log_path, out_path),
    )
    try:
        _wait_ports(procs[0], plan.ports, REGISTRY[spec.kind].start_timeout_s, what)
        rb.pid = _work_pid(spec.kind, procs[0])
        if cap is not None and rb.pid not in cap.pids():
            raise RuntimeError(f"{what}: pid {rb.pid} is not in cgroup {cap.path}")
    except BaseException as err:
        rb.stop(2.0)
        if isinstance(err, (RuntimeError, TimeoutError)):
            raise RuntimeError(f"{err}\n{rb.log_tail()}") from err
        raise
    return rb


def _port_clash(err):
    return re.search(r"address (already )?in use|eaddrinuse", str(err), re.IGNORECASE) is not None


def start_broker(spec, workdir):
    """Start a broker and wait until it accepts connections.

    Parameters
    ----------
    spec : BrokerSpec
    workdir : path
        Directory for its configuration, logs and data (created if needed).

    Returns
    -------
    RunningBroker

    Raises
    ------
    RuntimeError
        Binary missing, broker exited or did not open its port in time (the
        message ends with the tail of its log), or no CPU control for a cap.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    cap = None
    if spec.cpu_cap_fraction is not None:
        name = f"{spec.kind}-{os.getpid()}-{time.monotonic_ns()}"
        cap = CpuCap(name, spec.cpu_cap_fraction, top_weight=True).create()
    try:
        for attempt in range(_PORT_RETRIES):
            try:
                rb = _start_once(spec, workdir, cap)
                break
            except RuntimeError as err:  # a free port taken meanwhile: pick others
                if spec.port or attempt == _PORT_RETRIES - 1 or not _port_clash(err):
                    raise
    except BaseException:
        if cap is not None:
            cap.remove()
        raise
    rb.cpu_cap = cap
    return rb


@contextlib.contextmanager
def broker(spec, workdir):
    """Context manager: :func:`start_broker` on entry, :meth:`RunningBroker.stop` on exit."""
    rb = start_broker(spec, workdir)
    try:
        yield rb
    finally:
        rb.stop()


# -- mosquitto $SYS over the harness MQTT client ----------------------------
def _number(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _sys_subscribe(port, topic, timeout_s):
    """``(socket, MqttStream)`` of a clean session subscribed (QoS 0, SUBACK not awaited) to ``topic``."""
    client_id = f"pubsim-sys-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    try:
        sock, stream = mqttwire.connect(port, client_id, host=HOST, keepalive=60, timeout_s=timeout_s)
    except mqttwire.MqttError as err:
        raise RuntimeError(f"mosquitto on port {port} refused the $SYS reader ({err})") from err
    try:
        sock.settimeout(timeout_s)
        sock.sendall(mqttwire.encode_subscribe(1, topic, 0))
    except BaseException:
        sock.close()
        raise
    return sock, stream


def read_mosquitto_sys(port, timeout_s=5.0, *, fresh=True):
    """Mosquitto's ``$SYS`` counters, by subscribing to ``$SYS/#``.

    Parameters
    ----------
    port : int
        The broker's MQTT port on 127.0.0.1.
    timeout_s : float
        Give up after this long, s.
    fresh : bool
        Wait for the next periodic update (``sys_interval``, 1 s here) after
        subscribing, rather than return only the retained values of the
        last one. Counters that did not change are only in the retained set.

    Returns
    -------
    dict
        Topic -> value (int or float when numeric, else str), e.g.
        ``$SYS/broker/publish/messages/received``, ``.../publish/messages/sent``,
        ``.../publish/messages/dropped``, ``$SYS/broker/messages/received``
        (all packets, including this reader's CONNECT and SUBSCRIBE),
        ``$SYS/broker/store/messages/count``.

    Raises
    ------
    TimeoutError
        No (fresh) update within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    sock, stream = _sys_subscribe(port, "$SYS/#", timeout_s)
    values, updated = {}, False
    packets, stream.backlog = stream.backlog, []
    try:
        while True:
            for pkt in packets:
                if pkt.type == mqttwire.PUBLISH:
                    values[pkt.topic] = _number(pkt.payload.decode(errors="replace"))
                    updated = updated or not pkt.flags & 0x01 or not fresh
            left = deadline - time.monotonic()
            if updated:
                left = min(left, 0.2)  # the rest of this update's burst
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            if not data:
                raise ConnectionError("broker closed the connection")
            packets = stream.feed(data)
        with contextlib.suppress(OSError):
            sock.sendall(mqttwire.encode_disconnect())
    finally:
        sock.close()
    if not updated:
        raise TimeoutError(f"mosquitto on port {port}: no {'fresh ' if fresh else ''}$SYS update in {timeout_s:g} s")
    return values
