"""The scenario-file reference and JSON Schema, generated from the parameter classes.

Every parameter dataclass field carries ``metadata["unit"]`` (how a human
value is read: ``duration``, ``size``, ``choice``...), often
``metadata["choices"]``, a default, and a line in the class docstring's
numpydoc ``Parameters`` section. This module turns that one source into:

- :func:`field_rows`: one tidy row per field (name, unit, default, choices,
  description), for tables and the documentation's reference pages;
- :func:`scenario_schema`: a JSON Schema (draft 2020-12) of scenario files,
  so that editors complete and check them (e.g. the YAML language server:
  ``# yaml-language-server: $schema=scenario.schema.json``);
- :func:`reference_markdown`: the Markdown reference of the documentation.

The schema describes the shapes and the accepted kinds of values; the
checks that need arithmetic or references (warm-up shorter than the
duration, a preset that exists, a topic filter's syntax) stay in
:func:`pubsim.scenario.parse_scenario`, which remains the authority.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

from . import (
    BridgeParams,
    BrokerParams,
    DiskParams,
    LinkParams,
    PublisherParams,
    RelayParams,
    SerializationParams,
    SubscriberParams,
    ZmqSocketParams,
)
from .models.params.host import HostParams
from .models.params.mapping import MAX_COUNT
from .models.params.patterns import ReplyParams
from .models.params.provenance import Source

__all__ = ["PARAMETER_CLASSES", "field_rows", "scenario_schema", "reference_markdown", "UNITS"]

#: Parameter classes by the key that holds them in a scenario file.
PARAMETER_CLASSES: dict[str, type] = {
    "broker": BrokerParams,
    "link": LinkParams,
    "publisher": PublisherParams,
    "subscriber": SubscriberParams,
    "relay": RelayParams,
    "bridge": BridgeParams,
    "socket": ZmqSocketParams,
    "disk": DiskParams,
    "host": HostParams,
    "serialization": SerializationParams,
    "reply": ReplyParams,
}

_NUMBER_OR_TEXT = {"anyOf": [{"type": "number"}, {"type": "string"}]}
_DIST = {"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "object"}]}

#: How each unit kind is written in a scenario file: (JSON Schema, human description).
UNITS: dict[str, tuple[dict[str, Any], str]] = {
    "duration": (_NUMBER_OR_TEXT, "a duration: seconds, or text with a unit (`2ms`, `150us`, `1.5s`)"),
    "duration_dist": (
        _DIST,
        "a distribution of durations: `2ms`, `exp(1ms)`, `uniform(1ms, 3ms)`, "
        "`lognormal(1ms, 0.5)`, `gamma(1ms, 0.5)`, `const(2ms)`, `shifted(10us, exp(1ms))`",
    ),
    "size": (_NUMBER_OR_TEXT, "a size in bytes, or text with a unit (`36B`, `1KiB`, `2MB`)"),
    "size_dist": (_DIST, "a distribution of sizes in bytes (`36B`, `uniform(20B, 2KiB)`, ...)"),
    "optional_size_dist": (
        {"anyOf": [{"type": "null"}, *_DIST["anyOf"]]},
        "a distribution of sizes in bytes, or null (see the field)",
    ),
    "optional_duration": (
        {"anyOf": [{"type": "null"}, {"type": "number"}, {"type": "string"}]},
        "a duration, or null (see the field)",
    ),
    "optional_size": (
        {"anyOf": [{"type": "null"}, {"type": "number"}, {"type": "string"}]},
        "a size in bytes, or null for no limit",
    ),
    "rate": (_NUMBER_OR_TEXT, "a rate per second (`3000`, `3k/s`)"),
    "bandwidth": (
        _NUMBER_OR_TEXT,
        "bytes per second, or text with a unit (`100Mbit/s`, `12.5MB/s`); bits and bytes are told apart by the unit",
    ),
    "count": ({"type": "integer", "minimum": 0}, "an integer >= 0"),
    "positive_count": ({"type": "integer", "minimum": 1}, "an integer >= 1"),
    "optional_count": (
        {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 0}]},
        "an integer >= 0, or null for no limit",
    ),
    "probability": ({"type": "number", "minimum": 0, "exclusiveMaximum": 1}, "a number in [0, 1)"),
    "cpu_fraction": ({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, "a CPU share in (0, 1] of a core"),
    "cpu_cores": (
        {"type": "number", "exclusiveMinimum": 0},
        "CPU in cores: (0, 1] of a core, up to the host's cores on a host",
    ),
    "cpu_load": ({"type": "number", "minimum": 0}, "a CPU load in cores: [0, 1), below the host's cores on a host"),
    "float": ({"type": "number"}, "a number"),
    "flag": ({"type": "boolean"}, "true or false"),
    "strings": (
        {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "a string or a list of strings",
    ),
    "text": ({"type": "string"}, "text"),
    "raw": ({}, "a value checked by the class (a list, or as described)"),
    "params": ({"type": "object"}, "a nested mapping of parameters (may name a `preset`)"),
    "serialization": (
        {"anyOf": [{"type": "null"}, {"type": "string"}, {"type": "object"}]},
        "a serialization preset name (`binary`, `text`, `json`) or a mapping of its fields",
    ),
    "provenance": (
        {
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {
                        "source": {"enum": [s.value for s in Source]},
                        "reference": {"type": "string"},
                        "date": {"type": "string"},
                        "note": {"type": "string"},
                    },
                },
            ]
        },
        "where the values come from: `{source: measured|publication|assumption|placeholder, reference, date, note}`",
    ),
}


def _descriptions(cls: type) -> dict[str, str]:
    """Field -> description, from the numpydoc ``Parameters`` section of ``cls``'s docstring."""
    doc = cls.__doc__ or ""
    match = re.search(r"Parameters\n\s*-+\n(.*?)(?:\n\s*\n\s*[A-Z][a-z]+\n\s*-+\n|\Z)", doc, re.S)
    if not match:
        return {}
    text: dict[str, str] = {}
    names: list[str] = []
    for line in match.group(1).splitlines():
        head = re.match(r"^    (\w+(?:, \w+)*)\s*:", line)
        if head:
            names = head.group(1).split(", ")
            text.update((n, "") for n in names)
        elif names and line.strip():
            for n in names:
                text[n] = (text[n] + " " + line.strip()).strip()
    return text


def _default(fld: dataclasses.Field) -> Any:
    if fld.default is not dataclasses.MISSING:
        value = fld.default
    elif fld.default_factory is not dataclasses.MISSING:
        value = fld.default_factory()
    else:
        return "(required)"
    return getattr(value, "value", value) if isinstance(value, str) else value


def field_rows(cls: type) -> list[dict[str, Any]]:
    """One row per field of a parameter class: ``field``, ``unit``, ``default``, ``choices``, ``description``."""
    text = _descriptions(cls)
    rows = []
    for fld in dataclasses.fields(cls):
        unit = fld.metadata.get("unit", "raw")
        rows.append(
            {
                "field": fld.name,
                "unit": unit,
                "default": _default(fld),
                "choices": tuple(fld.metadata.get("choices", ())),
                "description": text.get(fld.name, ""),
                "max": fld.metadata.get("max", MAX_COUNT if unit.endswith("count") else None),
            }
        )
    return rows


def _field_schema(row: dict[str, Any]) -> dict[str, Any]:
    if row["unit"] == "choice":
        schema: dict[str, Any] = {"enum": list(row["choices"])}
    else:
        schema = dict(UNITS.get(row["unit"], UNITS["raw"])[0])
    if row.get("max") is not None:  # integer bound (models.params.mapping.MAX_COUNT or the field's own)
        schema = _with_maximum(schema, row["max"])
    if row["description"]:
        schema["description"] = row["description"]
    return schema


def _with_maximum(schema: dict[str, Any], maximum: int) -> dict[str, Any]:
    """``schema`` with ``maximum`` on its integer branch."""
    if schema.get("type") == "integer":
        return {**schema, "maximum": maximum}
    if "anyOf" in schema:
        return {**schema, "anyOf": [_with_maximum(s, maximum) for s in schema["anyOf"]]}
    return schema


def _params_schema(cls: type, *, preset: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    props = {row["field"]: _field_schema(row) for row in field_rows(cls)}
    if preset:
        props["preset"] = {
            "type": "string",
            "description": "a preset name (`pubsim presets`); the other fields override it",
        }
    props.update(extra or {})
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required and not preset:
        out["required"] = required
    return out


def _templated(schema: dict[str, Any]) -> dict[str, Any]:
    """A group field may also be a text with ``{i}`` expressions, expanded per copy."""
    return {"anyOf": [schema, {"type": "string", "pattern": r"\{i"}]} if schema.get("type") != "string" else schema


def _group(cls: type, extra: dict[str, Any]) -> dict[str, Any]:
    group = _params_schema(
        cls,
        preset=False,
        extra={
            "name": {"type": "string", "description": "client name; `{i}`, `{i//N}`, `{i%N}` expand per copy"},
            "count": {"type": "integer", "minimum": 1, "description": "copies of this group"},
            **extra,
        },
    )
    group["properties"] = {k: _templated(v) for k, v in group["properties"].items()}
    group["required"] = ["name"] + [r for r in group.get("required", []) if r != "name"]
    return {"type": "array", "items": group}


def scenario_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a scenario file."""
    on_host = {"host": {"type": "string", "description": "the host (machine) it runs on, a key of `hosts`"}}
    broker = _params_schema(BrokerParams, preset=True, extra=on_host)
    link = _params_schema(LinkParams, preset=True)
    on_broker = {
        "broker": {"type": "string", "description": "the broker this client attaches to (chain)"},
        **on_host,
    }
    chain_broker = _params_schema(
        BrokerParams,
        preset=True,
        extra={
            "name": {"type": "string"},
            "count": {"type": "integer", "minimum": 1},
            "relay": _params_schema(RelayParams, preset=False),
            **on_host,
        },
    )
    bridge_item = _params_schema(BridgeParams, preset=False, extra={"remote": {"type": "string"}})
    run = {
        "type": "object",
        "additionalProperties": False,
        "required": ["duration"],
        "properties": {
            "duration": {**UNITS["duration"][0], "description": "simulated time, > 0"},
            "warmup": {**UNITS["duration"][0], "description": "start of the measurement window"},
            "cooldown": {**UNITS["duration"][0], "description": "time cut from the end of the window"},
            "record": {"enum": ["full", "stream"], "description": "per-message records, or flat-memory tallies"},
            "driver": {"enum": ["batch", "reference"], "description": "fast batch path or SimPy reference"},
            "drain": {"type": "boolean", "description": "let messages in flight finish after the last publication"},
            "series_bin": {**UNITS["duration"][0], "description": "width of the throughput time series bins"},
        },
    }
    topology = {
        "type": "object",
        "required": ["builder"],
        "properties": {
            "builder": {"enum": ["star", "chain", "brokerless", "graphml"]},
            "protocol": {"enum": ["mqtt", "amqp", "zmq", "none"], "description": "framing overheads on links"},
            "forwarding": {"enum": ["flood", "subscription", "bridge"], "description": "between brokers (chain)"},
            "broker": broker,
            "link": link,
            "bridge": link,
            "handoff": link,
            "socket": _params_schema(ZmqSocketParams, preset=True),
            "brokers": {"type": "array", "items": chain_broker},
            "bridges": {"type": "array", "items": bridge_item},
            "publishers": _group(PublisherParams, on_broker),
            "subscribers": _group(SubscriberParams, {**on_broker, "connect": UNITS["strings"][0]}),
            "path": {"type": "string", "description": "GraphML file, relative to the scenario file"},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pubsim scenario",
        "description": "A topology, a load and a run (pubsim.scenario). Generated from the parameter classes.",
        "type": "object",
        "additionalProperties": False,
        "required": ["topology", "run"],
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0},
            "replications": {"type": "integer", "minimum": 1},
            "run": run,
            "topology": topology,
            "patterns": {"type": "array", "items": {"type": "object", "required": ["kind"]}},
            "hosts": {
                "type": "object",
                "description": "machines processes are placed on: name -> HostParams fields or a preset",
                "additionalProperties": _params_schema(HostParams, preset=True),
            },
        },
    }


def _cell(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def reference_markdown() -> str:
    """The scenario-file reference: one table per parameter class."""
    out = [
        "# Scenario-file reference",
        "",
        "Generated from the parameter classes (`python -m pubsim.reference`); the same metadata gives "
        "the JSON Schema of scenario files (`docs/scenario.schema.json` in a built site).",
        "",
        "## How values are written",
        "",
        "| unit | accepted values |",
        "|---|---|",
    ]
    out += [f"| `{unit}` | {_cell(text)} |" for unit, (_, text) in UNITS.items()]
    out += ["| `choice` | one of the listed values |", ""]
    for key, cls in PARAMETER_CLASSES.items():
        out += [
            f"## `{key}`: {cls.__name__}",
            "",
            (cls.__doc__ or "").strip().splitlines()[0],
            "",
            "| field | unit | default | description |",
            "|---|---|---|---|",
        ]
        for row in field_rows(cls):
            unit = (
                "choice: " + ", ".join(f"`{c}`" for c in row["choices"])
                if row["unit"] == "choice"
                else f"`{row['unit']}`"
            )
            out.append(f"| `{row['field']}` | {unit} | `{_cell(row['default'])}` | {_cell(row['description'])} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m pubsim.reference OUT_DIR   (writes scenario-reference.md, scenario.schema.json)")
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    (target / "scenario-reference.md").write_text(reference_markdown())
    (target / "scenario.schema.json").write_text(json.dumps(scenario_schema(), indent=2, default=str))
