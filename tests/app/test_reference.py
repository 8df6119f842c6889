"""The scenario reference and JSON Schema generated from the parameter classes."""

from __future__ import annotations

import copy

import jsonschema
import pytest
import yaml

from pubsim.reference import PARAMETER_CLASSES, field_rows, reference_markdown, scenario_schema
from pubsim.scenario import parse_scenario
from pubsim.sim.errors import ConfigError
from tests import ROOT

SCENARIOS = sorted(
    p
    for p in (ROOT / "experiments").rglob("*.yaml")
    if isinstance(d := yaml.safe_load(p.read_text()), dict) and "topology" in d
)


@pytest.fixture(scope="module")
def validator():
    schema = scenario_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT / "experiments")))
def test_every_shipped_scenario_satisfies_the_schema(validator, path):
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:100]}"
        for e in validator.iter_errors(yaml.safe_load(path.read_text()))
    ]
    assert errors == []


@pytest.mark.parametrize(
    "mutate, where",
    [
        (lambda d: d["run"].update(durattion="1s"), "run"),  # a typo in a key
        (lambda d: d["topology"].update(builder="stor"), "topology/builder"),  # not one of the builders
        (lambda d: d.update(replications="two"), "replications"),  # wrong type
        (lambda d: d["topology"]["broker"].update(overflow="explode"), "topology/broker/overflow"),
        (lambda d: d["topology"]["publishers"][0].update(rate_per_sec=5), "topology/publishers/0"),
    ],
)
def test_schema_and_parser_both_refuse_a_bad_scenario(validator, mutate, where):
    data = yaml.safe_load((ROOT / "experiments" / "quickstart.yaml").read_text())
    bad = copy.deepcopy(data)
    mutate(bad)
    paths = {"/".join(map(str, e.absolute_path)) for e in validator.iter_errors(bad)}
    assert where in paths
    with pytest.raises(ConfigError):
        parse_scenario(bad, base_dir=ROOT / "experiments")


def test_every_field_is_described():
    for key, cls in PARAMETER_CLASSES.items():
        missing = [r["field"] for r in field_rows(cls) if not r["description"] and r["field"] != "provenance"]
        assert missing == [], (key, missing)


def test_reference_lists_every_field_with_its_default():
    text = reference_markdown()
    for cls in PARAMETER_CLASSES.values():
        for row in field_rows(cls):
            assert f"| `{row['field']}` |" in text
    assert "| `queue_messages` | `optional_count` | `null` |" in text  # YAML null: no limit
