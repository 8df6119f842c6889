"""Scenario files: a YAML description of a topology, a load and a run.

A scenario is read with :func:`pubsim.sim.safeyaml.safe_load` and checked field by field; every
error is one line naming the field and the value. Layout::

    name: quickstart
    seed: 42
    replications: 1
    run: {duration: 20s, warmup: 4s, cooldown: 0s, record: full, driver: batch}
    topology:
      builder: star            # star | chain | brokerless | graphml
      protocol: mqtt
      broker: {preset: mosquitto-placeholder, queue_messages: 1000}
      link: {preset: gigabit-lan}
      publishers:
        - {name: "gw{i}", count: 20, topics: ["weather/gw{i}"], rate_per_s: 3k/s, size_bytes: 36B}
      subscribers:
        - {name: "app{i}", count: 60, subscriptions: ["weather/gw{i//3}"]}

Client groups expand ``count`` copies; ``{i}``, ``{i//N}`` and ``{i%N}`` in
names, topics, filters and ``broker`` are replaced by the copy index
expressions. Parameter fields are those of :mod:`pubsim.models.params.broker`,
:mod:`pubsim.models.params.link` and :mod:`pubsim.models.params.client` (units in the names, human
strings accepted); broker and link mappings may name a ``preset``
(:mod:`pubsim.models.presets`) whose fields the others override, client groups
may not. ``run`` needs ``duration`` > 0 and warmup + cooldown shorter than
it. ``patterns`` (optional) lists pattern reports (push_pull, request_reply,
polling, by_publisher; :mod:`pubsim.models.mechanisms.patterns.reports`). ``chain`` takes
``brokers`` (a list of groups with a
``name``), ``bridge`` (a link), ``forwarding`` and a ``broker`` key on every
client group; ``graphml`` takes ``path`` (relative to the scenario file). ``brokerless``
(ZeroMQ direct PUB/SUB, :mod:`pubsim.models.mechanisms.brokerless.socket`) takes ``socket``, ``link``,
optional ``handoff``, and ``connect`` on subscriber groups.
A ``chain`` broker group may carry ``relay:`` (the fields of
:class:`pubsim.models.params.relay.RelayParams`: an ILDM interworking node in front of the
broker), and the chain takes ``bridges``, a list of ``{local: b0, remote: b1,
topics_out: [...], topics_in: [...], qos: 1}``
(:class:`pubsim.models.params.bridge.BridgeParams`; the topic patterns are
used with ``forwarding: bridge``, the hop ``qos`` with any forwarding).
``hosts`` (optional, top level) maps host names to the fields of
:class:`pubsim.models.params.host.HostParams` (or a ``preset``); brokers and
client groups then name theirs with ``host:`` (:mod:`pubsim.models.mechanisms.hosts`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .budget import client_limit
from .models import presets
from .models.mechanisms.patterns.reports import parse_patterns
from .models.params.bridge import BridgeParams
from .models.params.broker import BrokerParams
from .models.params.client import PublisherParams, SubscriberParams
from .models.params.host import HostParams
from .models.params.link import LinkParams
from .models.params.mapping import check_one_core, from_mapping, read_name
from .models.params.relay import RelayParams
from .models.params.zmq import ZmqSocketParams
from .models.topology import HOST, HOSTS, brokerless, chain, place, read_graphml, star
from .run import DRIVERS, RECORDS, simulate
from .sim.errors import ConfigError
from .sim.safeyaml import safe_load
from .sim.units import parse_duration_s

__all__ = ["Scenario", "load_scenario", "parse_scenario", "parse_yaml", "read_yaml"]

_TOP_KEYS = {"name", "description", "seed", "replications", "run", "topology", "patterns", HOSTS}
_RUN_KEYS = {"duration", "warmup", "cooldown", "record", "driver", "drain", "series_bin"}


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A parsed scenario: a topology and run settings."""

    name: str
    description: str
    seed: int
    replications: int
    topology: object
    run: dict
    patterns: tuple = ()  # pattern reports (models.mechanisms.patterns.reports), printed by ``pubsim run``

    def simulate(self, replication=0, **overrides):
        """Run one replication (keyword arguments override ``run`` settings)."""

        kwargs = {**self.run, **overrides}
        return simulate(self.topology, seed=self.seed, replication=replication, **kwargs)


_EXPR = re.compile(r"\{i(?:\s*(//|%)\s*(\d+))?\}")


def _expand_text(text, i):
    def sub(m):
        op, n = m.group(1), m.group(2)
        if op is None:
            return str(i)
        return str(i // int(n) if op == "//" else i % int(n))

    return _EXPR.sub(sub, text) if isinstance(text, str) else text


def _expand_value(value, i):
    if isinstance(value, str):
        return _expand_text(value, i)
    if isinstance(value, list):
        return [_expand_value(v, i) for v in value]
    return value


class _Allowance:
    """How many more clients (or brokers) the scenario may declare: client groups are
    checked against it before they are expanded (a ``count`` of 10^6 or 2^63 is
    refused, not built copy by copy)."""

    def __init__(self, limit):
        self.left = limit
        self.limit = limit

    def take(self, count, where):
        if count > self.left:
            raise ConfigError(
                where,
                count,
                f"at most {self.limit:,} clients in all ({self.limit - self.left:,} declared before this group): "
                "lower the count, or raise the budget with --max-clients / PUBSIM_MAX_CLIENTS",
            )
        self.left -= count


def _expand_groups(groups, path, allowance=None):
    """Expand client groups with ``count`` into one mapping per client."""
    if not isinstance(groups, list):
        raise ConfigError(path, groups, "a list of client groups")
    out = []
    for k, group in enumerate(groups):
        where = f"{path}[{k}]"
        if not isinstance(group, dict) or "name" not in group:
            raise ConfigError(where, group, "a mapping with at least a name")
        read_name(group["name"], f"{where}.name")
        group = dict(group)
        count = group.pop("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"{where}.count", count, "an integer >= 1")
        (allowance or _Allowance(client_limit())).take(count, f"{where}.count")
        for key, v in group.items():
            for text in v if isinstance(v, list) else [v]:
                for m in _EXPR.finditer(text) if isinstance(text, str) else ():
                    if m.group(2) is not None and int(m.group(2)) == 0:
                        raise ConfigError(f"{where}.{key}", v, "{i//N} or {i%N} with N >= 1")
        for i in range(count):
            out.append((where, {key: _expand_value(v, i) for key, v in group.items()}))
    return out


def _params(cls, kind, spec, path):
    """Parameters of class ``cls`` from a mapping; ``kind`` (``broker``,
    ``link``) allows a ``preset`` key, clients have no presets."""

    if not isinstance(spec, dict):
        raise ConfigError(path, spec, f"a mapping of {cls.__name__} fields")
    if kind is not None:
        try:
            spec = presets.apply(kind, spec)
        except ConfigError as err:  # name the preset field where it was written
            field = f"{path}.preset" if err.field == f"{kind}.preset" else f"{path}.{err.field}"
            raise ConfigError(field, err.value, err.expected) from None
    return from_mapping(cls, spec, path)


def _pop_host(spec, name, where, placement):
    """Take ``host:`` out of a node's mapping into ``placement`` (``{node: host name}``)."""
    if HOST in spec:
        placement[name] = read_name(spec.pop(HOST), f"{where}.{HOST}")


def _clients(groups, cls, path, allowance, brokers=None, placement=None):
    """Clients of one kind; with ``brokers`` (names), each names the broker it attaches to;
    ``host:`` goes into ``placement``."""
    clients = {}
    placement = {} if placement is None else placement
    for where, spec in _expand_groups(groups, path, allowance):
        name = read_name(spec.pop("name"), f"{where}.name")
        _pop_host(spec, name, where, placement)
        broker = spec.pop("broker", None)
        if brokers is not None and broker is None:
            raise ConfigError(f"{where}.broker", None, "the name of the broker this client attaches to")
        if brokers is not None and (
            isinstance(broker, (bool, list, dict)) or broker is None or str(broker) not in brokers
        ):
            raise ConfigError(f"{where}({name}).broker", broker, f"one of the brokers {list(brokers)}")
        if name in clients:
            raise ConfigError(f"{where}.name", name, "a unique client name")
        params = _params(cls, None, spec, f"{where}({name})")
        clients[name] = (str(broker), params) if brokers is not None else params
    return clients


def _star(spec, path, allowance, placement, hosts):

    _only(spec, {"builder", "protocol", "broker", "link", "publishers", "subscribers"}, path)
    broker = spec.get("broker", {})
    if isinstance(broker, dict):
        broker = dict(broker)
        _pop_host(broker, "broker", f"{path}.broker", placement)
    return star(
        broker=_broker(broker, f"{path}.broker", "broker" in placement),
        link=_params(LinkParams, "link", spec.get("link", {}), f"{path}.link"),
        publishers=_clients(
            spec.get("publishers", []), PublisherParams, f"{path}.publishers", allowance, None, placement
        ),
        subscribers=_clients(
            spec.get("subscribers", []), SubscriberParams, f"{path}.subscribers", allowance, None, placement
        ),
        protocol=spec.get("protocol", "mqtt"),
        hosts=hosts,
        placement=placement,
    )


def _broker(spec, path, placed):
    """A broker's parameters; one that is on no host keeps within one core (errors name ``path``)."""
    params = _params(BrokerParams, "broker", spec, path)
    if not placed:
        check_one_core(params.cpu_fraction, params.background_cpu_fraction, f"{path}.")
    return params


def _chain(spec, path, allowance, placement, hosts):

    _only(
        spec,
        {"builder", "protocol", "forwarding", "brokers", "bridge", "link", "publishers", "subscribers", "bridges"},
        path,
    )
    brokers, relays = {}, {}
    for where, group in _expand_groups(spec.get("brokers", []), f"{path}.brokers", allowance):
        name = read_name(group.pop("name"), f"{where}.name")
        if name in brokers:
            raise ConfigError(f"{where}.name", name, "a unique broker name")
        _pop_host(group, name, f"{where}({name})", placement)
        if "relay" in group:
            relays[name] = _params(RelayParams, None, group.pop("relay"), f"{where}({name}).relay")
        brokers[name] = _broker(group, f"{where}({name})", name in placement)
    return chain(
        brokers=brokers,
        bridge=_params(LinkParams, "link", spec.get("bridge", {}), f"{path}.bridge"),
        link=_params(LinkParams, "link", spec.get("link", {}), f"{path}.link"),
        publishers=_clients(
            spec.get("publishers", []), PublisherParams, f"{path}.publishers", allowance, brokers, placement
        ),
        subscribers=_clients(
            spec.get("subscribers", []), SubscriberParams, f"{path}.subscribers", allowance, brokers, placement
        ),
        forwarding=spec.get("forwarding", "subscription"),
        protocol=spec.get("protocol", "mqtt"),
        relays=relays,
        bridges=_bridges(spec.get("bridges", []), f"{path}.bridges"),
        hosts=hosts,
        placement=placement,
    )


def _bridges(items, path):
    """``{(local, remote): BridgeParams}`` of a chain's ``bridges`` list."""

    if not isinstance(items, list):
        raise ConfigError(path, items, "a list of {local, remote, topics_out, topics_in}")
    out = {}
    for k, item in enumerate(items):
        where = f"{path}[{k}]"
        if not isinstance(item, dict) or "remote" not in item:
            raise ConfigError(where, item, "a mapping with local, remote, topics_out, topics_in")
        item = dict(item)
        remote = read_name(item.pop("remote"), f"{where}.remote")
        params = _params(BridgeParams, None, item, where)
        out[(params.local, remote)] = params
    return out


def _brokerless(spec, path, allowance, placement, hosts):
    """ZeroMQ direct PUB/SUB: ``socket`` (ZmqSocketParams, may name a preset), ``link``
    (each peer connection), optional ``handoff`` link; subscribers connect to
    every publisher unless a group lists ``connect`` (publisher names)."""

    _only(spec, {"builder", "protocol", "socket", "link", "handoff", "publishers", "subscribers"}, path)
    groups = spec.get("subscribers", [])
    connect = {}
    if isinstance(groups, list):
        for where, group in _expand_groups(groups, f"{path}.subscribers", _Allowance(allowance.left)):
            if "connect" in group:
                connect[read_name(group["name"], f"{where}.name")] = _connect_list(group["connect"], f"{where}.connect")
        groups = [{k: v for k, v in g.items() if k != "connect"} if isinstance(g, dict) else g for g in groups]
    handoff = spec.get("handoff")
    return brokerless(
        socket=_params(ZmqSocketParams, "socket", spec.get("socket", {}), f"{path}.socket"),
        link=_params(LinkParams, "link", spec.get("link", {}), f"{path}.link"),
        handoff=None if handoff is None else _params(LinkParams, "link", handoff, f"{path}.handoff"),
        publishers=_clients(
            spec.get("publishers", []), PublisherParams, f"{path}.publishers", allowance, None, placement
        ),
        subscribers=_clients(groups, SubscriberParams, f"{path}.subscribers", allowance, None, placement),
        connect=connect or None,
        protocol=spec.get("protocol", "zmq"),
        hosts=hosts,
        placement=placement,
    )


def _connect_list(value, path):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(path, value, "a list of publisher names")
    return value


def _graphml(spec, path, base_dir):

    _only(spec, {"builder", "path"}, path)
    if not isinstance(spec.get("path"), str) or not spec["path"]:
        raise ConfigError(f"{path}.path", spec.get("path"), "the GraphML file to load")
    return read_graphml(Path(base_dir) / spec["path"])


def _only(spec, allowed, path):
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]}", spec[unknown[0]], f"one of {sorted(allowed)}")


def _choice(spec, key, choices):
    value = spec.get(key, choices[0])
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"run.{key}", value, f"one of {list(choices)}")
    return value


def _run_settings(spec):

    spec = {} if spec is None else spec
    if not isinstance(spec, dict):
        raise ConfigError("run", spec, "a mapping")
    _only(spec, _RUN_KEYS, "run")
    if "duration" not in spec:
        raise ConfigError("run.duration", None, "a duration such as 20s")
    out = {
        "duration_s": parse_duration_s(spec["duration"], "run.duration"),
        "warmup_s": parse_duration_s(spec.get("warmup", 0), "run.warmup"),
        "cooldown_s": parse_duration_s(spec.get("cooldown", 0), "run.cooldown"),
        "record": _choice(spec, "record", ["full"] + sorted(set(RECORDS) - {"full"})),
        "driver": _choice(spec, "driver", ["batch"] + sorted(set(DRIVERS) - {"batch"})),
        "drain": spec.get("drain", True),
    }
    if not isinstance(out["drain"], bool):
        raise ConfigError("run.drain", out["drain"], "true or false")
    if not out["duration_s"] > 0:
        raise ConfigError("run.duration", spec["duration"], "a duration > 0")
    if out["warmup_s"] + out["cooldown_s"] >= out["duration_s"]:
        raise ConfigError(
            "run.warmup", spec.get("warmup", 0), f"warmup + cooldown shorter than the duration ({spec['duration']})"
        )
    if "series_bin" in spec:
        out["series_bin_s"] = parse_duration_s(spec["series_bin"], "run.series_bin")
        if not out["series_bin_s"] > 0:
            raise ConfigError("run.series_bin", spec["series_bin"], "a duration > 0")
    return out


#: Largest seed accepted (numpy's SeedSequence takes more, but a seed of thousands of digits means nothing).
MAX_SEED = 2**128 - 1
#: Most replications of one scenario.
MAX_REPLICATIONS = 1_000_000


def _bounded_int(data, key, default, low, high, high_text):
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(key, value, f"an integer >= {low}")
    if value > high:
        raise ConfigError(key, value, f"an integer in [{low}, {high_text}]")
    return value


def read_seed(data, default=0):
    """``data["seed"]`` (else ``default``): an integer in [0, :data:`MAX_SEED`]."""
    return _bounded_int(data, "seed", default, 0, MAX_SEED, "2**128 - 1")


def read_replications(data, default=1):
    """``data["replications"]`` (else ``default``): an integer in [1, :data:`MAX_REPLICATIONS`]."""
    return _bounded_int(data, "replications", default, 1, MAX_REPLICATIONS, f"{MAX_REPLICATIONS:,}")


def parse_scenario(data, base_dir=".", budget=None):
    """Build a :class:`Scenario` from an already loaded mapping.

    ``budget`` (:class:`pubsim.budget.Budget`, default from the environment)
    bounds the number of clients, checked before client groups expand; the
    rest of the budget is checked by :func:`pubsim.budget.check`.
    """
    if not isinstance(data, dict):
        raise ConfigError("scenario", type(data).__name__, "a YAML mapping at the top level")
    _only(data, _TOP_KEYS, "scenario")
    topo = data.get("topology")
    if not isinstance(topo, dict):
        raise ConfigError("topology", topo, "a mapping with a builder")
    builders = {"star": _star, "chain": _chain, "brokerless": _brokerless}
    builder = topo.get("builder", "star")
    allowance = _Allowance(client_limit(budget))
    placement: dict = {}
    hosts = _hosts(data.get(HOSTS))
    if builder == "graphml":
        graph = _graphml(topo, "topology", base_dir)
        allowance.take(len(graph), "topology.path (nodes)")
        if hosts:
            graph = place(graph, hosts, {})
    elif isinstance(builder, str) and builder in builders:
        graph = builders[builder](topo, "topology", allowance, placement, hosts)
    else:
        raise ConfigError("topology.builder", builder, f"one of {sorted([*builders, 'graphml'])}")
    seed = read_seed(data)
    reps = read_replications(data)

    run = _run_settings(data.get("run"))
    patterns = parse_patterns(data.get("patterns"), graph)
    if patterns and run["record"] != "full":
        raise ConfigError("run.record", run["record"], "full when the scenario lists patterns")
    return Scenario(
        name=read_name(data.get("name", "scenario"), "name"),
        description=_description(data.get("description", "")),
        seed=seed,
        replications=reps,
        topology=graph,
        run=run,
        patterns=patterns,
    )


def _hosts(spec):
    """``{name: HostParams}`` of the scenario's ``hosts`` section (each may name a ``preset``)."""
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ConfigError(HOSTS, spec, "a mapping {host name: HostParams fields or preset}")
    return {
        read_name(h, f"{HOSTS}.{h}"): _params(HostParams, "host", fields, f"{HOSTS}.{h}") for h, fields in spec.items()
    }


def _description(value):
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError("description", value, "text")
    return str(value)


def _yaml_error(path, text, err):
    """One-line error for unparsable YAML: file:line:column, the offending line, the problem."""
    mark = getattr(err, "problem_mark", None)
    context_mark = getattr(err, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    lines = text.splitlines()
    shown = ""
    for m in (context_mark, mark):  # the line that opened the broken construct, else the one where it broke
        if m is not None and m.line < len(lines) and lines[m.line].strip():
            shown = lines[m.line].strip()
            break
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None) or ""
    if context and context_mark is not None:
        context += f" opened at line {context_mark.line + 1}"
    expected = f"valid YAML ({context + ': ' if context else ''}{problem})"
    return ConfigError(where, f"malformed YAML: {shown[:100]}" if shown else "malformed YAML", expected)


def read_yaml(path):
    """``(text, data)`` of a YAML file (safe loader); one-line errors for an
    unreadable, non-UTF-8 or malformed file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(str(path), "unreadable", err.strerror or str(err)) from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(path), "not UTF-8 text", f"a YAML file ({err.reason} at byte {err.start})") from None
    return text, parse_yaml(path, text)


def parse_yaml(path, text):
    """The data of YAML ``text`` read from ``path`` (:func:`pubsim.sim.safeyaml.safe_load`:
    no Python tags, no alias bombs, bounded nesting and integers); one-line errors."""
    try:
        return safe_load(text)
    except yaml.YAMLError as err:
        raise _yaml_error(path, text, err) from None
    except (ValueError, RecursionError) as err:  # a value the YAML library could not convert
        raise ConfigError(str(path), "malformed YAML", f"valid YAML ({type(err).__name__}: {err})") from None


def load_scenario(path):
    """Read and check a scenario file (safe YAML loader)."""
    path = Path(path)
    return parse_scenario(read_yaml(path)[1], base_dir=path.parent)
