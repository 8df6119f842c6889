"""Measurement campaigns: which runs to make, and where their results go.

A campaign file (YAML) names the brokers, the run timing, the search
settings and a list of configurations (payload, publishers, subscribers,
topics, fan-out, CPU cap, ``split``: ``train`` or ``holdout``, and for a
campaign of the ZeroMQ proxy alone ``zmq_hwm``, the high-water mark of
the proxy's and the clients' sockets: 0 for none, and ``zmq_client_hwm``
to give the clients' apart), and ``idle_filters``: subscriptions installed
on topics nobody publishes to (0 by default), so that a campaign can tell
what more installed subscriptions cost each message, and ``qos``: the MQTT
QoS of the publications and subscriptions (0, 1 or 2; above 0 only in a
campaign of MQTT brokers), for the cost per handshake packet. For every
(broker, configuration) pair the campaign makes

1. light runs at fixed low rates (latency floor, wake-up cost),
2. the interval search of SYSTEMS.md §4 (saturation limit),
3. runs at fractions of the limit found (latency below, loss above it;
   fractions up to 3 record how throughput collapses past the limit).

The ``rule`` block says how a run is judged sustainable (the 0.99 rule of
SYSTEMS.md §4 on ``egress / (ingress x fan-out)``) and which egress it uses
(:data:`EGRESS_RULES`):

* ``received`` (the default): first copies received within the measurement
  window, whenever they were sent, per second: the egress of §4 and the
  count the simulator's summary makes, so measured and simulated limits are
  judged alike. In steady state it equals the copies of the window's
  messages; past the limit the broker's output falls behind the input.
* ``sent``: copies of the messages sent in the window, whenever they arrive
  (up to the end of the drain), per second. Latency does not enter it; a
  growing backlog shows as ``latency_trend_s_per_s`` (set
  ``max_latency_trend``) or as copies still owed when the drain ends.
* ``sent_and_received``: copies of messages sent in the window that also
  arrived within it. Campaigns before issue 18 used it (the shipped
  ``calibration/data`` tables): it misses the copies of the last ``latency``
  seconds of the window, so a run with a mean latency of 1 % of the window
  fails the 0.99 rule although throughput keeps up.

The ``search`` block sets the interval search (``start_rate``, ``steps``,
``max_doublings``) and ``retries`` (0 by default): an unsustainable point is
measured again up to that many times and passes when any run does
(:func:`~pubsim.analysis.interval_search.interval_search`), because a run
that the machine interrupts (a CPU-per-message spike of ~40 % in one run was
seen on this VM) otherwise moves the limit by up to half.

``max_latency_trend`` (s of latency per s of send time; none by default)
marks a run whose latency grows faster than that as saturated: past the
limit by a fraction ``e`` of the offered load, every message waits behind a
backlog growing at ``e`` x rate, so latency grows at about ``e`` s/s; 0.01
matches the 0.99 rule's 1 % tolerance.

Results are tidy files in one directory: ``runs.csv`` (one row per run),
``latency.parquet`` (a random subsample of each run's latencies, for CDFs
and KS distances: ``latency_s``, and from the real harness since issue 18
also ``app_latency_s``, the same messages timed from the publisher code's
clock read to the subscriber code's read instead of kernel to kernel, and
``send_delay_s``, the publisher's part of that difference), ``saturation.csv`` (one row per pair) and ``meta.json
(host, CPU, kernel, broker versions, campaign spec, date). A pair is the
unit of work: its results are written under ``pairs/`` as soon as it
finishes, so an interrupted campaign resumes at the first unfinished pair.

``interleave: true`` measures the unfinished pairs together, their runs
taken in turn (:mod:`pubsim.calibration.interleave`), so a drifting
machine's speed falls on every configuration alike.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import os
import platform
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..analysis.interval_search import interval_search, is_sustainable
from ..sim.errors import ConfigError
from ..sim.safeyaml import safe_load
from ..sim.units import parse_duration_s, parse_rate_per_s, parse_size_bytes
from .harness.brokers import REGISTRY
from .harness.machine import compare_machines
from .interleave import run_interleaved
from .zmqmarks import DEFAULT_HWM, client_mark

__all__ = [
    "RunSpec",
    "Campaign",
    "EGRESS_RULES",
    "load_campaign",
    "parse_campaign",
    "run_campaign",
    "read_results",
    "pool_results",
    "host_metadata",
]

#: Egress counts a campaign's sustainability rule may use (module docstring).
EGRESS_RULES = ("received", "sent", "sent_and_received")

KINDS = tuple(REGISTRY)  # the harness's broker kinds (one registry entry each)


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """One measurement: a broker under one offered load.

    Parameters
    ----------
    broker : str
        Broker kind (``mosquitto``, ``nats``, ``rabbitmq-mqtt``, ``zmq-proxy``, ``activemq-mqtt``,
        ``ejabberd-mqtt``).
    config : str
        Name of the configuration in the campaign.
    payload_bytes, publishers, subscribers, topics, fanout : int
        Workload shape; every topic has ``fanout`` subscribers.
    rate_per_s : float
        Offered load over all publishers, msg/s.
    duration_s, warmup_s, cooldown_s : float
        Run length and the parts discarded at each end, s.
    cpu_cap_fraction : float or None
        CPU quota of the broker in cores (None: uncapped). In a campaign file
        a configuration may give one cap per broker
        (``{mosquitto: 0.2, nats: 0.03, default: 0.1}``).
    qos : int
        MQTT QoS (0, 1 or 2).
    zmq_hwm : int or None
        ZeroMQ high-water mark, messages, set on the proxy's two sockets
        (``SNDHWM``/``RCVHWM``) and, unless ``zmq_client_hwm`` is given, on
        the publishers' ``SNDHWM`` and the subscribers' ``RCVHWM`` (0: no
        limit); None: ZeroMQ's default, 1,000. Only the ``zmq-proxy`` broker
        has it.
    zmq_client_hwm : int or None
        The clients' high-water mark alone, messages (None: ``zmq_hwm``).
    idle_filters : int
        Subscriptions installed besides the workload's, on topics nobody
        publishes to (:class:`pubsim.calibration.harness.loadgen.LoadSpec`
        ``idle_filters``); >= 0.
    phase : str
        ``light``, ``doubling``, ``refine`` or ``fraction``.
    """

    broker: str
    config: str
    payload_bytes: int
    publishers: int
    subscribers: int
    topics: int
    fanout: int
    rate_per_s: float
    duration_s: float
    warmup_s: float
    cooldown_s: float
    cpu_cap_fraction: float | None = None
    qos: int = 0
    zmq_hwm: int | None = None
    zmq_client_hwm: int | None = None
    idle_filters: int = 0
    phase: str = "light"

    @property
    def client_hwm(self):
        """The clients' ZeroMQ high-water mark (None: ZeroMQ's default)."""
        return client_mark(self.zmq_hwm, self.zmq_client_hwm)

    def as_row(self):
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class Configuration:
    """A workload shape measured on every broker of the campaign."""

    name: str
    payload_bytes: int
    publishers: int
    subscribers: int
    topics: int
    fanout: int
    cpu_cap_fraction: object  # float, None, or {broker: float}
    split: str
    zmq_hwm: int | None = None
    zmq_client_hwm: int | None = None
    idle_filters: int = 0
    qos: int = 0

    def cap_for(self, broker):
        """CPU cap of ``broker`` in this configuration (cores, None = uncapped)."""
        cap = self.cpu_cap_fraction
        return cap.get(broker, cap.get("default")) if isinstance(cap, dict) else cap


@dataclass(frozen=True, kw_only=True)
class Campaign:
    """A parsed campaign file (see the module docstring)."""

    name: str
    brokers: tuple
    configurations: tuple
    duration_s: float
    warmup_s: float
    cooldown_s: float
    light_rates_per_s: tuple
    start_rate_per_s: float
    steps: int
    max_doublings: int
    fractions: tuple
    broker_cpus: tuple
    client_cpus: tuple
    egress_rule: str = "received"
    max_latency_trend: float | None = None
    retries: int = 0
    interleave: bool = False
    trace_softirqs: bool = False
    sample_sockets: bool = False
    spec: dict = field(default_factory=dict)

    def sustainable(self, row) -> bool:
        """The campaign's rule on one measured row (module docstring)."""
        return is_sustainable(row, max_trend=self.max_latency_trend)

    def pairs(self):
        """(broker, configuration) pairs in the order they are measured."""
        return [(b, c) for c in self.configurations for b in self.brokers]

    def run_spec(self, broker, config, rate_per_s, phase):
        return RunSpec(
            broker=broker,
            config=config.name,
            payload_bytes=config.payload_bytes,
            publishers=config.publishers,
            subscribers=config.subscribers,
            topics=config.topics,
            fanout=config.fanout,
            rate_per_s=float(rate_per_s),
            duration_s=self.duration_s,
            warmup_s=self.warmup_s,
            cooldown_s=self.cooldown_s,
            cpu_cap_fraction=config.cap_for(broker),
            zmq_hwm=config.zmq_hwm,
            zmq_client_hwm=config.zmq_client_hwm,
            idle_filters=config.idle_filters,
            qos=config.qos,
            phase=phase,
        )


def _int(spec, key, path, minimum=1):
    value = spec.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{path}.{key}", value, f"an integer >= {minimum}")
    return value


def _configuration(spec, path):
    if not isinstance(spec, dict) or "name" not in spec:
        raise ConfigError(path, spec, "a mapping with a name")
    known = {
        "name",
        "payload_bytes",
        "publishers",
        "subscribers",
        "topics",
        "fanout",
        "cpu_cap_fraction",
        "split",
        "zmq_hwm",
        "zmq_client_hwm",
        "idle_filters",
        "qos",
    }
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]}", spec[unknown[0]], f"one of {sorted(known)}")
    c = Configuration(
        name=str(spec["name"]),
        payload_bytes=parse_size_bytes(spec.get("payload_bytes", 64), f"{path}.payload_bytes"),
        publishers=_int(spec, "publishers", path) if "publishers" in spec else 1,
        subscribers=_int(spec, "subscribers", path) if "subscribers" in spec else 1,
        topics=_int(spec, "topics", path) if "topics" in spec else 1,
        fanout=_int(spec, "fanout", path) if "fanout" in spec else 1,
        cpu_cap_fraction=spec.get("cpu_cap_fraction"),
        split=spec.get("split", "train"),
        zmq_hwm=_int(spec, "zmq_hwm", path, 0) if "zmq_hwm" in spec else None,
        zmq_client_hwm=_int(spec, "zmq_client_hwm", path, 0) if "zmq_client_hwm" in spec else None,
        idle_filters=_int(spec, "idle_filters", path, 0) if "idle_filters" in spec else 0,
        qos=_int(spec, "qos", path, 0) if "qos" in spec else 0,
    )
    if c.qos > 2:
        raise ConfigError(f"{path}.qos", c.qos, "0, 1 or 2 (MQTT QoS)")
    if c.payload_bytes < 20:
        raise ConfigError(f"{path}.payload_bytes", c.payload_bytes, "at least 20 bytes (sequence + timestamp header)")
    if c.fanout > c.subscribers:
        raise ConfigError(f"{path}.fanout", c.fanout, f"at most subscribers ({c.subscribers})")
    caps = c.cpu_cap_fraction if isinstance(c.cpu_cap_fraction, dict) else {"": c.cpu_cap_fraction}
    for key, cap in caps.items():
        where = f"{path}.cpu_cap_fraction" + (f".{key}" if key else "")
        if key and key not in KINDS + ("default",):
            raise ConfigError(where, cap, f"a cap per broker: keys among {list(KINDS) + ['default']}")
        if cap is not None and not (isinstance(cap, (int, float)) and not isinstance(cap, bool) and 0 < cap <= 1):
            raise ConfigError(where, cap, "a fraction of a core in (0, 1]")
    if c.split not in ("train", "holdout"):
        raise ConfigError(f"{path}.split", c.split, "train or holdout")
    return c


def _check_qos(config, path, brokers):
    """QoS above 0 only where every broker of the campaign speaks MQTT (the others have no levels)."""
    other = [b for b in brokers if REGISTRY[b].protocol != "mqtt"]
    if config.qos and other:
        raise ConfigError(f"{path}.qos", config.qos, f"0 with broker {other[0]} (QoS 1 and 2 are MQTT only)")


def _check_proxy_subscriptions(config, path, brokers):
    """One-line error if the ZeroMQ proxy of a campaign would drop ``config``'s subscriptions.

    libzmq's XSUB resends its subscriptions (the workload's topics and the
    ``idle_filters``) to each publisher that connects, through a pipe bounded
    by its ``SNDHWM``, and drops those past it in trie order, the workload's
    own ``pubsim/t...`` first (``xsub.cpp`` ``send_subscription``; measured:
    990 idle filters pass, 1,100 time out at set-up with the default 1,000).
    """
    if "zmq-proxy" not in brokers or not config.idle_filters:
        return
    mark = DEFAULT_HWM if config.zmq_hwm is None else config.zmq_hwm
    total = config.topics + config.idle_filters
    if mark and total >= mark:
        raise ConfigError(
            f"{path}.idle_filters",
            config.idle_filters,
            f"fewer than the ZeroMQ proxy's high-water mark ({mark}) less the topics ({config.topics}), or "
            "zmq_hwm: 0 (its XSUB drops the subscriptions it resends past the mark)",
        )


def parse_campaign(data):
    """Check a campaign mapping (from YAML) and return a :class:`Campaign`."""
    if not isinstance(data, dict):
        raise ConfigError("campaign", type(data).__name__, "a YAML mapping")
    brokers = data.get("brokers")
    if not isinstance(brokers, list) or not brokers:
        raise ConfigError("brokers", brokers, f"a non-empty list of {list(KINDS)}")
    for i, b in enumerate(brokers):
        if b not in KINDS:
            raise ConfigError(f"brokers[{i}]", b, f"one of {list(KINDS)}")
    configs = data.get("configurations")
    if not isinstance(configs, list) or not configs:
        raise ConfigError("configurations", configs, "a non-empty list of configurations")
    parsed = tuple(_configuration(c, f"configurations[{i}]") for i, c in enumerate(configs))
    for i, c in enumerate(parsed):
        for name in ("zmq_hwm", "zmq_client_hwm"):
            if getattr(c, name) is not None and set(brokers) != {"zmq-proxy"}:
                raise ConfigError(
                    f"configurations[{i}].{name}", getattr(c, name), "only in a campaign of zmq-proxy alone"
                )
        _check_proxy_subscriptions(c, f"configurations[{i}]", brokers)
        _check_qos(c, f"configurations[{i}]", brokers)
    names = [c.name for c in parsed]
    if len(set(names)) != len(names):
        raise ConfigError("configurations.name", names, "unique names")
    run = data.get("run", {})
    search = data.get("search", {})
    if not isinstance(search, dict):
        raise ConfigError("search", search, "a mapping with start_rate, steps, max_doublings, retries")
    unknown = sorted(set(search) - {"start_rate", "steps", "max_doublings", "retries"})
    if unknown:
        raise ConfigError(f"search.{unknown[0]}", search[unknown[0]], "start_rate, steps, max_doublings or retries")
    rule, trend = _rule(data.get("rule", {}))
    return Campaign(
        name=str(data.get("name", "campaign")),
        brokers=tuple(brokers),
        configurations=parsed,
        duration_s=parse_duration_s(run.get("duration", "3s"), "run.duration"),
        warmup_s=parse_duration_s(run.get("warmup", "1s"), "run.warmup"),
        cooldown_s=parse_duration_s(run.get("cooldown", "0.5s"), "run.cooldown"),
        light_rates_per_s=tuple(parse_rate_per_s(r, "light_rates") for r in data.get("light_rates", [500])),
        start_rate_per_s=parse_rate_per_s(search.get("start_rate", "64000/s"), "search.start_rate"),
        steps=_int(search, "steps", "search") if "steps" in search else 10,
        max_doublings=_int(search, "max_doublings", "search", 0) if "max_doublings" in search else 6,
        retries=_int(search, "retries", "search", 0) if "retries" in search else 0,
        fractions=tuple(float(f) for f in data.get("fractions", [0.5, 0.8, 1.2])),
        broker_cpus=tuple(data.get("broker_cpus", [1])),
        client_cpus=tuple(data.get("client_cpus", [0])),
        egress_rule=rule,
        max_latency_trend=trend,
        interleave=_flag(data, "interleave"),
        trace_softirqs=_flag(data, "trace_softirqs"),
        sample_sockets=_flag(data, "sample_sockets"),
        spec=data,
    )


def _flag(data, name):
    """A campaign's true/false setting ``name`` (default false), or a one-line error."""
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise ConfigError(name, value, "true or false")
    return value


def _rule(spec):
    """``(egress rule, max latency trend)`` of a campaign's ``rule`` block."""
    if not isinstance(spec, dict):
        raise ConfigError("rule", spec, "a mapping with egress and max_latency_trend")
    unknown = sorted(set(spec) - {"egress", "max_latency_trend"})
    if unknown:
        raise ConfigError(f"rule.{unknown[0]}", spec[unknown[0]], "egress or max_latency_trend")
    egress = spec.get("egress", "received")
    if egress not in EGRESS_RULES:
        raise ConfigError("rule.egress", egress, f"one of {list(EGRESS_RULES)}")
    trend = spec.get("max_latency_trend")
    if trend is not None and not (
        isinstance(trend, (int, float)) and not isinstance(trend, bool) and 0 < trend < math.inf
    ):
        raise ConfigError("rule.max_latency_trend", trend, "a positive number of s per s, or none")
    return egress, None if trend is None else float(trend)


def load_campaign(path):
    """Read and check a campaign file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(str(path), "unreadable", err.strerror or str(err)) from None
    try:
        data = safe_load(text)  # depth, alias-expansion and integer limits
    except yaml.YAMLError as err:
        raise ConfigError(str(path), "malformed YAML", str(err).splitlines()[0]) from None
    return parse_campaign(data)


def host_metadata():
    """Host facts recorded with every campaign."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _pair_id(broker, config):
    return f"{broker}__{config.name}"


def _measure_pair(campaign, broker, config, measure):
    """All runs of one pair: light runs, interval search, fractions of the limit."""
    rows, samples = [], []
    facts = measure.pair_facts(broker, config) if hasattr(measure, "pair_facts") else None

    def run(rate_per_s, phase):
        spec = campaign.run_spec(broker, config, rate_per_s, phase)
        row, sample = measure(spec)
        row = {**spec.as_row(), **row, "run": len(rows)}
        row["sustainable"] = campaign.sustainable(row)
        rows.append(row)
        columns = sample if isinstance(sample, Mapping) else {"latency_s": sample}
        samples.append(
            pd.DataFrame({"run": row["run"], **{k: np.asarray(v, dtype=np.float32) for k, v in columns.items()}})
        )
        return row

    for rate in campaign.light_rates_per_s:
        run(rate, "light")
    pubs = config.publishers
    result = interval_search(
        lambda interval_s: run(pubs / interval_s, "search"),
        start_interval_s=pubs / campaign.start_rate_per_s,
        publishers=pubs,
        max_doublings=campaign.max_doublings,
        steps=campaign.steps,
        stop_at_first_failure=True,
        sustainable=campaign.sustainable,
        retries=campaign.retries,
    )
    searched = [r for r in rows if r["phase"] == "search"]
    for r, rec in zip(searched, result.records, strict=True):
        r["phase"], r["sustainable"] = rec["phase"], rec["sustainable"]
        for key in ("attempt", "point_sustainable"):
            if key in rec:
                r[key] = rec[key]
    if result.limit_reached and not result.saturated_everywhere:
        for frac in campaign.fractions:
            run(frac * result.rate_per_s, "fraction")
    sat = {
        "broker": broker,
        "config": config.name,
        "split": config.split,
        "limit_rate_per_s": result.rate_per_s,
        "error_bound": result.error_bound,
        "limit_reached": result.limit_reached,
        "saturated_everywhere": result.saturated_everywhere,
        "limit_ingress_per_s": max((r["ingress_rate_per_s"] for r in rows if r.get("sustainable")), default=math.nan),
    }
    return rows, samples, sat, facts


def run_campaign(campaign, out_dir, measure, *, progress=None, metadata=None):
    """Measure every unfinished pair, writing each as soon as it finishes.

    Parameters
    ----------
    campaign : Campaign
    out_dir : path
        Result directory (created; finished pairs found there are skipped).
    measure : callable
        ``measure(RunSpec) -> (row dict, latency sample)``; if it has a
        ``pair_facts(broker, config)`` method, that is called before each
        pair's runs and its mapping kept (``meta.json`` ``pair_facts``,
        ``broker/config`` -> facts: the real harness measures the broker
        core's idle-exit curve there, since it drifts). The sample is an
        array of latencies, s, or a mapping of equal-length arrays (columns
        of ``latency.parquet``: ``latency_s`` and e.g. ``app_latency_s``); rows need
        ``ingress_rate_per_s``, ``sustainability`` and ``delivery_ratio``.
        The real harness is :func:`pubsim.calibration.runner.measure_run`; tests pass fakes.
    progress : callable or None
        ``progress(done, total, label)`` after each pair.
    metadata : dict or None
        Extra facts for ``meta.json`` (broker versions...).

    Returns
    -------
    pathlib.Path
        ``out_dir``; read it with :func:`read_results`.
    """
    out = Path(out_dir)
    (out / "pairs").mkdir(parents=True, exist_ok=True)
    pairs = campaign.pairs()
    todo = [(b, c) for b, c in pairs if not (out / "pairs" / f"{_pair_id(b, c)}.json").exists()]
    finished = [len(pairs) - len(todo)]
    lock = threading.Lock()

    def job(broker, config, pair_measure):
        _write_pair(out, broker, config, *_measure_pair(campaign, broker, config, pair_measure))
        with lock:
            finished[0] += 1
            if progress is not None:
                progress(finished[0], len(pairs), _pair_id(broker, config))

    if campaign.interleave and len(todo) > 1:
        run_interleaved([functools.partial(job, b, c) for b, c in todo], measure)
    else:
        for b, c in todo:
            job(b, c, measure)
    _write_tables(out, campaign, metadata or {})
    return out


def _write_pair(out, broker, config, rows, samples, sat, facts):
    """A finished pair's files under ``out/pairs`` (its JSON last and atomically: a pair is either
    finished or not)."""
    pid = _pair_id(broker, config)
    for r in rows:
        r["split"] = config.split
    pd.concat(samples, ignore_index=True).assign(broker=broker, config=config.name).to_parquet(
        out / "pairs" / f"{pid}.latency.parquet", index=False
    )
    done = out / "pairs" / f"{pid}.json"
    tmp = done.with_suffix(".tmp")
    record = {"runs": rows, "saturation": sat, **({"facts": facts} if facts else {})}
    tmp.write_text(json.dumps(record, default=_json_default))
    tmp.replace(done)


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _write_tables(out, campaign, metadata):
    runs, sats, lats, facts = [], [], [], {}
    for broker, config in campaign.pairs():
        pid = _pair_id(broker, config)
        data = json.loads((out / "pairs" / f"{pid}.json").read_text())
        runs.extend(data["runs"])
        sats.append(data["saturation"])
        if data.get("facts"):
            facts[f"{broker}/{config.name}"] = data["facts"]
        lats.append(pd.read_parquet(out / "pairs" / f"{pid}.latency.parquet"))
    pd.DataFrame(runs).to_csv(out / "runs.csv", index=False)
    pd.DataFrame(sats).to_csv(out / "saturation.csv", index=False)
    pd.concat(lats, ignore_index=True).to_parquet(out / "latency.parquet", index=False)
    old = json.loads((out / "meta.json").read_text()) if (out / "meta.json").exists() else {}
    meta = {**host_metadata(), **metadata, "campaign": campaign.name, "spec": campaign.spec}
    if facts:  # what the measure callable recorded of the machine before each pair's runs
        meta["pair_facts"] = facts
    # a resumed campaign starts only the brokers it still measures: keep the others' versions
    meta["versions"] = {**old.get("versions", {}), **metadata.get("versions", {})}
    (out / "meta.json").write_text(json.dumps(meta, indent=2, default=_json_default))


def read_results(out_dir):
    """``(runs, saturation, latency, meta)`` of a finished campaign directory."""
    out = Path(out_dir)
    for name in ("runs.csv", "saturation.csv", "latency.parquet", "meta.json"):
        if not (out / name).exists():
            raise ConfigError("results", str(out), f"a finished campaign directory ({name} is missing)")
    return (
        pd.read_csv(out / "runs.csv"),
        pd.read_csv(out / "saturation.csv"),
        pd.read_parquet(out / "latency.parquet"),
        json.loads((out / "meta.json").read_text()),
    )


def pool_results(out_dirs):
    """Several campaign directories read as one: ``(runs, saturation, latency, meta)``.

    Two campaigns of the same configurations measured at different times
    give limits that differ by up to a third on a shared machine
    (calibration/README.md); fitting and validating on both pools that
    spread. Each directory after the first keeps its runs under
    configuration names suffixed ``@<directory name>`` (so every run, limit
    and latency sample stays with its own campaign, and a configuration's
    split is its own); ``meta`` is the first directory's, with every
    directory's per-pair facts (renamed alike) and ``pooled``: the
    directories in order, and ``machine_differences``: the figures in which
    a later directory's machine differs from the first's
    (:func:`pubsim.calibration.harness.machine.compare_machines`; a pooled
    fit then mixes machines, which the caller should say).

    Raises
    ------
    ConfigError
        Fewer than one directory, two with the same name, or campaigns of
        different broker versions.
    """
    dirs = [Path(d) for d in out_dirs]
    if not dirs:
        raise ConfigError("results", "none", "one or more campaign directories")
    names = [d.resolve().name for d in dirs]
    if len(set(names)) != len(names):
        raise ConfigError("results", names, "campaign directories with different names (they label the pooled runs)")
    parts = [read_results(d) for d in dirs]
    meta = dict(parts[0][3])
    runs, sats, lats, facts = [], [], [], dict(meta.get("pair_facts") or {})
    for i, (d, (r, s, lat, m)) in enumerate(zip(dirs, parts)):
        for broker, version in (m.get("versions") or {}).items():
            first = (meta.get("versions") or {}).get(broker, version)
            if version != first:
                raise ConfigError(f"{d}/meta.json versions.{broker}", version, f"{first}, as in {dirs[0]}")
        suffix = "" if i == 0 else f"@{names[i]}"
        runs.append(r.assign(config=r["config"].astype(str) + suffix))
        sats.append(s.assign(config=s["config"].astype(str) + suffix))
        lats.append(lat.assign(config=lat["config"].astype(str) + suffix))
        if i:
            facts.update({f"{key}{suffix}": value for key, value in (m.get("pair_facts") or {}).items()})
    meta["pair_facts"] = facts
    meta["pooled"] = [str(d) for d in dirs]
    meta["machine_differences"] = [
        r for r in compare_machines([(n, p[3]) for n, p in zip(names, parts)]) if r["differs"]
    ]
    return (
        pd.concat(runs, ignore_index=True),
        pd.concat(sats, ignore_index=True),
        pd.concat(lats, ignore_index=True),
        meta,
    )
