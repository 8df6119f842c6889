"""The valid inputs the fuzzer mutates: the project's own files, made small.

Every seed is a file the project ships (a scenario or study under
``experiments/``, the evidence table under ``calibration/data/evidence/``), or one the project writes itself (a GraphML topology from
a shipped scenario; a CampusIoT NDJSON.gz and an MQTT pcap sample from the
trace-reader tests), shrunk so that a valid copy runs in about a second:
runs of 0.5 s and at most 3 clients per group. Nothing is read from
``../shared``: the fuzz suite gives the same cases with or without it.
"""

from __future__ import annotations

import copy
import functools
import tempfile
from pathlib import Path
from typing import Any

import yaml

from pubsim.models.topology import write_graphml
from pubsim.scenario import parse_scenario
from tests import ROOT
from tests.loads.test_loads_readers import write_campusiot_sample, write_pcap_sample

EXPERIMENTS = ROOT / "experiments"
RUN = {"duration": "0.5s", "warmup": "0.1s", "cooldown": "0s"}
MAX_COUNT = 3


def _shrink_groups(groups: Any) -> None:
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict) and isinstance(group.get("count"), int):
            group["count"] = min(group["count"], MAX_COUNT)


def shrink(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of scenario ``data`` with a short run and at most 3 clients per group."""
    data = copy.deepcopy(data)
    run = data.setdefault("run", {})
    run.update(RUN)
    run.pop("series_bin", None)
    data["replications"] = 1
    topo = data.get("topology", {})
    for key in ("publishers", "subscribers"):
        _shrink_groups(topo.get(key))
    return data


def _scenario_files() -> list[Path]:
    return sorted([*EXPERIMENTS.glob("*.yaml"), *EXPERIMENTS.glob("ildm/*.yaml")])


@functools.cache
def scenarios() -> dict[str, dict[str, Any]]:
    """Shrunk copies of every shipped scenario file, by file stem."""
    return {p.stem: shrink(yaml.safe_load(p.read_text())) for p in _scenario_files()}


@functools.cache
def study() -> dict[str, Any]:
    """The shipped load sweep, on 2 points and 1 replication; its base is ``base.yaml`` beside it."""
    data = yaml.safe_load((EXPERIMENTS / "studies" / "load_sweep.yaml").read_text())
    data.update(base="base.yaml", replications=1)
    data["set"] = {"run.duration": "0.5s", "run.warmup": "0.1s"}
    grid = data["vary"]["grid"]
    for key in grid:
        grid[key] = grid[key][:1] if len(grid) > 1 and key != next(iter(grid)) else grid[key][:2]
    return data


@functools.cache
def evidence() -> list[dict[str, Any]]:
    """The first 12 rows of the shipped evidence table (``calibration/data/evidence/example.yaml``)."""
    rows = yaml.safe_load((ROOT / "calibration" / "data" / "evidence" / "example.yaml").read_text())
    return rows[:12]


def study_base() -> dict[str, Any]:
    """The base scenario of :func:`study`: the shrunk quickstart."""
    return scenarios()["quickstart"]


@functools.cache
def graphml_text() -> str:
    """The shrunk quickstart topology written as GraphML by :func:`pubsim.models.topology.write_graphml`."""
    scenario = parse_scenario(scenarios()["quickstart"], base_dir=EXPERIMENTS)
    return _written(lambda path: write_graphml(scenario.topology, path), "t.graphml").decode()


def graphml_scenario() -> dict[str, Any]:
    """A scenario that loads ``t.graphml`` beside it."""
    return {"name": "graphml", "seed": 1, "run": dict(RUN), "topology": {"builder": "graphml", "path": "t.graphml"}}


@functools.cache
def campusiot_bytes() -> bytes:
    """The CampusIoT sample of the reader tests (gzip'd NDJSON, with three bad lines)."""
    return _written(lambda path: write_campusiot_sample(path.parent), "sample.ndjson.gz")


@functools.cache
def pcap_bytes() -> bytes:
    """The MQTT capture sample of the reader tests (pcap; one malformed packet)."""
    return _written(lambda path: write_pcap_sample(path.parent), "sample.pcap")


def _written(write: Any, name: str) -> bytes:
    """Bytes of a file that ``write(path)`` makes in a scratch folder."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        written = write(path)
        return Path(written if written is not None else path).read_bytes()
