"""Evidence in one form: a table of observations of brokers, from anywhere.

One row per observation. Each row names the configuration it was made in
(:data:`CONFIG_COLUMNS`), what was observed (column ``observation`` and its
value columns, :data:`OBSERVATIONS`) and where it comes from
(``source_kind``: ``measured-here`` | ``publication`` | ``user``, and
``source_reference``: a data file, or "paper X, table 3, p. 7").

Observation kinds (rates are ingress messages per second over all
publishers; CPU is percent of one core)::

    limit       limit_msg_per_s              highest sustainable ingress rate
                                             (SYSTEMS.md §4: egress >= 0.99 x
                                             ingress x fan-out)
    throughput  rate_per_s, throughput_msg_per_s
                                             egress (copies delivered to all
                                             subscribers per second) at an
                                             offered rate
    cpu         rate_per_s, cpu_percent      broker CPU at a sustained rate
    latency     rate_per_s, latency_p50_s / latency_p90_s / latency_p99_s
                                             (at least one), s
    loss        rate_per_s, loss_fraction    lost / expected deliveries

The same column definitions (:data:`COLUMNS`) give the reader's checks, the
writer's column order, the JSON Schema (:func:`evidence_schema`) and the
table of the documentation (:func:`columns_markdown`): one source of truth,
as :mod:`pubsim.reference` does for scenario files. Tables are CSV (a header
row, empty cells for missing values) or YAML (a list of mappings); numbers
may carry units as in scenario files (``1KiB``, ``2ms``, ``3k/s``).

:func:`evidence_from_results` turns a ``pubsim measure`` result folder into
such a table.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from ..sim.errors import ConfigError
from ..sim.safeyaml import safe_load
from ..sim.units import parse_duration_s, parse_rate_per_s, parse_size_bytes
from .profile import BROKER_MODELS
from .workload import installed_filters
from .zmqmarks import marks_note

__all__ = [
    "Column",
    "COLUMNS",
    "CONFIG_COLUMNS",
    "OBSERVATIONS",
    "SOURCE_KINDS",
    "BROKER_KINDS",
    "read_evidence",
    "parse_evidence",
    "write_evidence",
    "evidence_schema",
    "columns_markdown",
    "evidence_from_results",
    "is_evidence_file",
]

BROKER_KINDS = tuple(BROKER_MODELS)
SOURCE_KINDS = ("measured-here", "publication", "user")
OBSERVATIONS = {
    "limit": ("limit_msg_per_s",),
    "throughput": ("rate_per_s", "throughput_msg_per_s"),
    "cpu": ("rate_per_s", "cpu_percent"),
    "latency": ("rate_per_s",),  # and at least one latency quantile
    "loss": ("rate_per_s", "loss_fraction"),
}
LATENCY_COLUMNS = ("latency_p50_s", "latency_p90_s", "latency_p99_s")
SUFFIXES = (".csv", ".yaml", ".yml")


@dataclass(frozen=True, kw_only=True)
class Column:
    """One column of the evidence table.

    Parameters
    ----------
    name : str
        Column name.
    kind : str
        How a value is read: ``text``, ``choice``, ``count`` (integer >= 0),
        ``positive_count``, ``size`` (bytes, units allowed), ``rate`` (1/s,
        units allowed), ``duration`` (s, units allowed), ``number`` (finite,
        >= 0), ``positive`` (finite, > 0), ``fraction`` ([0, 1]), ``flag``.
    description : str
        What the column holds, with its unit.
    required : bool
        Every row must have a value.
    default : object
        Value of an empty cell (None: stays empty).
    choices : tuple
        Accepted values of a ``choice`` column.
    """

    name: str
    kind: str
    description: str
    required: bool = False
    default: object = None
    choices: tuple = ()


COLUMNS = (
    Column(name="broker", kind="choice", required=True, choices=BROKER_KINDS, description="broker kind"),
    Column(name="version", kind="text", default="", description="broker version"),
    Column(name="host", kind="text", default="", description="machine (CPU, cores, VM) the observation was made on"),
    Column(name="payload_bytes", kind="size", required=True, description="payload per message, bytes"),
    Column(name="publishers", kind="positive_count", default=1, description="publishing clients"),
    Column(name="subscribers", kind="count", default=1, description="subscribing clients"),
    Column(name="topics", kind="positive_count", default=1, description="topics published to"),
    Column(
        name="installed_subscriptions",
        kind="count",
        description="subscription filters installed on the broker (empty: one per subscriber)",
    ),
    Column(name="qos", kind="choice", default=0, choices=(0, 1, 2), description="MQTT QoS"),
    Column(name="persistent", kind="flag", default=False, description="persistent (durable) messages"),
    Column(
        name="fanout",
        kind="number",
        required=True,
        description="copies delivered per ingress message (sp-ratio, SYSTEMS.md §4)",
    ),
    Column(
        name="shared_subscriptions",
        kind="flag",
        default=False,
        description="subscribers share subscriptions (each message to one of a group)",
    ),
    Column(name="cpu_cap_cores", kind="positive", default=1.0, description="CPU available to the broker, cores"),
    Column(
        name="observation",
        kind="choice",
        required=True,
        choices=tuple(OBSERVATIONS),
        description="what was observed: " + ", ".join(OBSERVATIONS),
    ),
    Column(name="rate_per_s", kind="rate", description="offered ingress rate of the observation, msg/s"),
    Column(name="limit_msg_per_s", kind="rate", description="saturation limit by the 0.99 rule, ingress msg/s"),
    Column(name="throughput_msg_per_s", kind="rate", description="egress: copies delivered per second"),
    Column(name="cpu_percent", kind="number", description="broker CPU, percent of one core"),
    Column(name="latency_p50_s", kind="duration", description="median publish-to-delivery latency, s"),
    Column(name="latency_p90_s", kind="duration", description="90th percentile latency, s"),
    Column(name="latency_p99_s", kind="duration", description="99th percentile latency, s"),
    Column(name="loss_fraction", kind="fraction", description="lost / expected deliveries"),
    Column(name="source_kind", kind="choice", required=True, choices=SOURCE_KINDS, description="kind of source"),
    Column(
        name="source_reference",
        kind="text",
        required=True,
        description='where it comes from: a data file, or "paper X, table 3, p. 7"',
    ),
    Column(name="note", kind="text", default="", description="anything else"),
)
BY_NAME = {c.name: c for c in COLUMNS}
CONFIG_COLUMNS = tuple(c.name for c in COLUMNS[: [c.name for c in COLUMNS].index("observation")])
VALUE_COLUMNS = ("limit_msg_per_s", "throughput_msg_per_s", "cpu_percent", *LATENCY_COLUMNS, "loss_fraction")

_EXPECTED = {
    "count": "an integer >= 0",
    "positive_count": "an integer >= 1",
    "number": "a finite number >= 0",
    "positive": "a finite number > 0",
    "fraction": "a number in [0, 1]",
    "flag": "true or false",
    "text": "text",
}


def _empty(value):
    return value is None or (isinstance(value, str) and value.strip() == "")


def _number(value, where, expected):
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConfigError(where, value, expected) from None
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise ConfigError(where, value, expected)
    return float(value)


def _integer(value, where, minimum):
    expected = f"an integer >= {minimum}"
    x = _number(value, where, expected)
    if x != int(x) or x < minimum:
        raise ConfigError(where, value, expected)
    return int(x)


def _flag(value, where):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ConfigError(where, value, "true or false")


def _choice(col, value, where):
    for choice in col.choices:
        if str(value).strip() == str(choice):
            return choice
    raise ConfigError(where, value, f"one of {list(col.choices)}")


def _cell(col, value, where):
    """The typed value of one cell (its default when empty)."""
    if _empty(value):
        if col.required:
            raise ConfigError(where, value, f"a value ({col.description})")
        return col.default
    kind = col.kind
    if kind == "text":
        return str(value)
    if kind == "choice":
        return _choice(col, value, where)
    if kind == "flag":
        return _flag(value, where)
    if kind in ("count", "positive_count"):
        return _integer(value, where, 0 if kind == "count" else 1)
    if kind in ("size", "rate", "duration"):
        value = _number(value, where, "a finite number >= 0") if _numeric_text(value) else value
        parse = {"size": parse_size_bytes, "rate": parse_rate_per_s, "duration": parse_duration_s}[kind]
        return parse(value, where) if kind == "size" else float(parse(value, where))
    x = _number(value, where, _EXPECTED[kind])
    if x < 0 or (kind == "positive" and x == 0) or (kind == "fraction" and x > 1):
        raise ConfigError(where, value, _EXPECTED[kind])
    return x


def _numeric_text(value):
    """True for a number, or text that is a plain number (``nan`` included, to refuse it)."""
    if not isinstance(value, str):
        return True
    try:
        float(value)
    except ValueError:
        return False
    return True


def _check_observation(row, where):
    kind = row["observation"]
    need = OBSERVATIONS[kind]
    for name in need:
        if row[name] is None:
            raise ConfigError(f"{where}, {name}", None, f"a value (needed by a {kind} observation)")
    if kind == "latency" and all(row[c] is None for c in LATENCY_COLUMNS):
        raise ConfigError(f"{where}, latency_p50_s", None, f"at least one of {list(LATENCY_COLUMNS)}")
    own = set(need) | (set(LATENCY_COLUMNS) if kind == "latency" else set())
    for name in VALUE_COLUMNS:
        if name not in own and row[name] is not None:
            raise ConfigError(f"{where}, {name}", row[name], f"empty in a {kind} row (one observation per row)")
    for name in ("rate_per_s", "limit_msg_per_s"):
        if name in need and not row[name] > 0:
            raise ConfigError(f"{where}, {name}", row[name], "a rate > 0 msg/s")
    if row["fanout"] > max(row["subscribers"], 0) and not row["shared_subscriptions"]:
        raise ConfigError(f"{where}, fanout", row["fanout"], f"at most subscribers ({row['subscribers']})")


def parse_evidence(records, source="table"):
    """Check rows (mappings of column -> value) and return the typed table.

    Parameters
    ----------
    records : list of dict
        One mapping per observation; missing or empty cells take the
        column's default.
    source : str
        Name used in error messages (the file).

    Returns
    -------
    pandas.DataFrame
        One row per observation, every column of :data:`COLUMNS` in order
        (None where a value is missing), SI units.

    Raises
    ------
    ConfigError
        One line naming the row (1 = first data row) and the column.
    """
    if not isinstance(records, list) or not records:
        raise ConfigError(source, type(records).__name__, "a non-empty list of observations (one per row)")
    rows = []
    for i, rec in enumerate(records, start=1):
        where = f"{source}: row {i}"
        if not isinstance(rec, dict):
            raise ConfigError(where, rec, "a mapping of column -> value")
        unknown = [k for k in rec if k not in BY_NAME]
        if unknown:
            raise ConfigError(f"{where}, {unknown[0]}", rec[unknown[0]], f"a known column ({', '.join(BY_NAME)})")
        row = {c.name: _cell(c, rec.get(c.name), f"{where}, {c.name}") for c in COLUMNS}
        if row["installed_subscriptions"] is None:
            row["installed_subscriptions"] = row["subscribers"]
        _check_observation(row, where)
        rows.append(row)
    return pd.DataFrame(rows, columns=[c.name for c in COLUMNS])


def _csv_records(text, source):
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    if not header:
        raise ConfigError(source, "no header", "a CSV table with a header row")
    for c in COLUMNS:
        if c.required and c.name not in header:
            raise ConfigError(f"{source}: column {c.name}", "missing", f"a column ({c.description})")
    records = []
    for i, rec in enumerate(reader, start=1):
        if None in rec:
            raise ConfigError(f"{source}: row {i}", rec[None], f"at most {len(header)} cells (the header's)")
        records.append({k: v for k, v in rec.items() if not _empty(v)})
    return records


def _yaml_records(text, source):
    try:
        data = safe_load(text)  # depth, alias-expansion and integer limits
    except yaml.YAMLError as err:
        raise ConfigError(source, "malformed YAML", str(err).splitlines()[0]) from None
    if isinstance(data, list):
        names = {k for rec in data if isinstance(rec, dict) for k in rec}
        for c in COLUMNS:
            if c.required and c.name not in names:
                raise ConfigError(f"{source}: column {c.name}", "missing", f"a column ({c.description})")
    return data


def is_evidence_file(path):
    """True if ``path`` names an evidence table by its suffix (.csv, .yaml, .yml), and is not a folder."""
    return Path(path).suffix.lower() in SUFFIXES and not Path(path).is_dir()


def read_evidence(path):
    """Read and check an evidence table (CSV or YAML, by suffix); see :func:`parse_evidence`."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ConfigError(str(path), path.suffix, "an evidence table ending in .csv, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(str(path), "unreadable", err.strerror or str(err)) from None
    except UnicodeDecodeError as err:  # a fuzz finding: it escaped as a traceback
        raise ConfigError(
            str(path), "not UTF-8 text", f"a CSV or YAML file ({err.reason} at byte {err.start})"
        ) from None
    read = _csv_records if path.suffix.lower() == ".csv" else _yaml_records
    return parse_evidence(read(text, path.name), path.name)


def _plain(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        x = float(value)
        return int(x) if x.is_integer() and abs(x) < 2**53 else x
    return bool(value) if hasattr(value, "dtype") and value.dtype == bool else value


def _records(table):
    out = []
    for rec in table.to_dict("records"):
        row = {c.name: _plain(rec.get(c.name)) for c in COLUMNS}
        out.append({k: v for k, v in row.items() if v is not None and v != ""})
    return out


def write_evidence(table, path):
    """Write an evidence table as CSV or YAML (by suffix), columns in :data:`COLUMNS` order.

    The table is checked first (:func:`parse_evidence`), so what is written
    reads back.
    """
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ConfigError(str(path), path.suffix, "an evidence table ending in .csv, .yaml or .yml")
    records = _records(table)
    parse_evidence(records, path.name)
    if path.suffix.lower() == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=[c.name for c in COLUMNS], lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        text = buf.getvalue()
    else:
        text = yaml.safe_dump(records, sort_keys=False, width=120, allow_unicode=True)
    path.write_text(text)
    return path


_NUMBER_OR_TEXT = {"anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}]}
_SCHEMA = {
    "text": {"type": "string"},
    "count": {"type": "integer", "minimum": 0},
    "positive_count": {"type": "integer", "minimum": 1},
    "size": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]},
    "rate": _NUMBER_OR_TEXT,
    "duration": _NUMBER_OR_TEXT,
    "number": {"type": "number", "minimum": 0},
    "positive": {"type": "number", "exclusiveMinimum": 0},
    "fraction": {"type": "number", "minimum": 0, "maximum": 1},
    "flag": {"type": "boolean"},
}


def _column_schema(col):
    schema = {"enum": list(col.choices)} if col.kind == "choice" else dict(_SCHEMA[col.kind])
    return {**schema, "description": col.description}


def evidence_schema():
    """JSON Schema (draft 2020-12) of an evidence table in its YAML form (a list of rows).

    Generated from :data:`COLUMNS` and :data:`OBSERVATIONS`; the checks that
    need arithmetic (fan-out at most the subscribers) stay in
    :func:`parse_evidence`, which remains the authority.
    """
    rules = []
    for kind, need in OBSERVATIONS.items():
        then = {"required": list(need)}
        if kind == "latency":
            then["anyOf"] = [{"required": [c]} for c in LATENCY_COLUMNS]
        rules.append({"if": {"properties": {"observation": {"const": kind}}}, "then": then})
    row = {
        "type": "object",
        "properties": {c.name: _column_schema(c) for c in COLUMNS},
        "required": [c.name for c in COLUMNS if c.required],
        "additionalProperties": False,
        "allOf": rules,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pubsim evidence table",
        "description": "One row per observation of a broker (pubsim.calibration.evidence).",
        "type": "array",
        "minItems": 1,
        "items": row,
    }


def columns_markdown():
    """The column table of the documentation (Markdown)."""
    lines = ["| column | required | default | meaning |", "|---|---|---|---|"]
    for c in COLUMNS:
        choices = f" ({', '.join(map(str, c.choices))})" if c.choices and c.name != "observation" else ""
        default = "" if c.default in (None, "") else str(c.default).lower()
        lines.append(f"| `{c.name}` | {'yes' if c.required else ''} | {default} | {c.description}{choices} |")
    return "\n".join(lines)


def _config_of(run, meta, cores):
    cap = run.get("cpu_cap_fraction")
    cap = cores if cap is None or (isinstance(cap, float) and math.isnan(cap)) else float(cap)
    return {
        "broker": run["broker"],
        "version": str(meta.get("versions", {}).get(run["broker"], "")),
        "host": f"{meta.get('host', '?')} ({meta.get('cpu', '?')}, kernel {meta.get('kernel', '?')})",
        "payload_bytes": int(run["payload_bytes"]),
        "publishers": int(run["publishers"]),
        "subscribers": int(run["subscribers"]),
        "topics": int(run["topics"]),
        "installed_subscriptions": installed_filters(run),
        "qos": int(run.get("qos", 0) or 0),
        "persistent": False,
        "fanout": int(run["fanout"]),
        "shared_subscriptions": False,
        "cpu_cap_cores": cap,
    }


def _run_rows(run, config, ref):
    rate = float(run["ingress_rate_per_s"])
    base = {**config, "rate_per_s": float(run["offered_per_s"]), "source_kind": "measured-here"}
    where = f"{ref}/runs.csv, {run['config']} run {int(run['run'])} ({run['phase']})"
    rows = [{**base, "observation": "throughput", "throughput_msg_per_s": float(run["egress_rate_per_s"])}]
    if bool(run["sustainable"]) and rate > 0 and math.isfinite(run["demand_s_per_ingress"]):
        cpu = 100.0 * float(run["demand_s_per_ingress"]) * rate
        rows.append({**base, "rate_per_s": rate, "observation": "cpu", "cpu_percent": cpu})
    if math.isfinite(run.get("latency_p50_s", math.nan)):
        rows.append({**base, "observation": "latency", **{c: float(run[c]) for c in LATENCY_COLUMNS}})
    if math.isfinite(run.get("loss_rate", math.nan)):
        rows.append({**base, "observation": "loss", "loss_fraction": min(max(float(run["loss_rate"]), 0.0), 1.0)})
    note = "; ".join(n for n in (f"campaign split: {run['split']}" if "split" in run else "", marks_note(run)) if n)
    return [{**r, "source_reference": where, "note": note} for r in rows]


def evidence_from_results(runs, saturation, meta, *, reference="pubsim measure"):
    """An evidence table from a ``pubsim measure`` result folder (:func:`read_results`).

    Per (broker, configuration) whose limit was found: a ``limit`` row (the
    highest ingress rate measured sustainable). Per run: ``throughput`` at
    the offered rate, ``cpu`` (broker CPU over the run: demand per message x
    ingress rate; sustainable runs only, where every message sent was
    served), ``latency`` (p50 / p90 / p99) and ``loss``. CPU caps absent
    from the runs (uncapped) count as the broker's cores (``broker_cpus``).

    Parameters
    ----------
    runs, saturation : pandas.DataFrame
        ``runs.csv`` and ``saturation.csv`` of the folder.
    meta : dict
        ``meta.json`` of the folder.
    reference : str
        The folder, named in every row's ``source_reference``.

    Returns
    -------
    pandas.DataFrame
        The checked table (:func:`parse_evidence`).
    """
    cores = float(len(meta.get("broker_cpus", [])) or 1)
    rows = []
    firsts, notes = {}, {}
    for run in runs.to_dict("records"):
        config = _config_of(run, meta, cores)
        firsts.setdefault((run["broker"], run["config"]), config)
        notes.setdefault((run["broker"], run["config"]), marks_note(run))
        rows.extend(_run_rows(run, config, reference))
    for sat in saturation.to_dict("records"):
        config = firsts.get((sat["broker"], sat["config"]))
        if config is None or not bool(sat["limit_reached"]) or bool(sat["saturated_everywhere"]):
            continue
        limit = sat.get("limit_ingress_per_s", math.nan)
        limit = limit if math.isfinite(limit) else float(sat["limit_rate_per_s"])
        ref = f"{reference}/saturation.csv, {sat['config']} (0.99 rule, ~{float(sat['error_bound']):.0%} resolution)"
        rows.append(
            {
                **config,
                "observation": "limit",
                "limit_msg_per_s": limit,
                "source_kind": "measured-here",
                "source_reference": ref,
                "note": notes[(sat["broker"], sat["config"])],
            }
        )
    return parse_evidence([{k: _plain(v) for k, v in r.items()} for r in rows], reference)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m pubsim.calibration.evidence OUT_DIR   (writes evidence.schema.json)")
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    (target / "evidence.schema.json").write_text(json.dumps(evidence_schema(), indent=2))
