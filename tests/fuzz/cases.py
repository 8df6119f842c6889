"""Fuzz cases: a kind of input, a seed number, and what the ``pubsim`` command is asked to do.

A case is a pure function of ``(kind, number)``: the files to write into an
empty folder, the command line (``pubsim run s.yaml``, ``pubsim study run``,
``pubsim calibrate`` of an evidence table, ``pubsim trace inspect``), and the mutation it carries.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.fuzz import seeds
from tests.fuzz.mutate import (
    Mutation,
    expand,
    mutate_bytes,
    mutate_graphml,
    mutate_ndjson_gz,
    mutate_tree,
    mutate_yaml_text,
)

KINDS = ("scenario", "study", "graphml", "evidence", "ndjson", "pcap")
#: Share of YAML cases mutated as text rather than as a tree.
TEXT_SHARE = 0.25


@dataclass(frozen=True, kw_only=True)
class Case:
    """One generated input and the command that reads it."""

    kind: str
    number: int
    files: dict[str, bytes]
    argv: list[str]
    mutation: Mutation
    env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.number}"

    def write(self, folder: Path) -> None:
        """Write the case's files and ``case.json`` (what it is, to replay it) into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (folder / name).write_bytes(data)
        meta = {"kind": self.kind, "number": self.number, "argv": self.argv, "env": self.env}
        meta["mutation"] = vars(self.mutation)
        (folder / "case.json").write_text(json.dumps(meta, indent=1) + "\n")


def _dump(data: Any) -> str:
    return expand(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096))


def _yaml_mutation(rnd: random.Random, data: Any) -> tuple[bytes, Mutation]:
    if rnd.random() < TEXT_SHARE:
        text, mutation = mutate_yaml_text(rnd, _dump(data))
        return text.encode("utf-8", errors="surrogateescape"), mutation
    doc, mutation = mutate_tree(rnd, data)
    return _dump(doc).encode(), mutation


def _scenario(rnd: random.Random) -> tuple[dict[str, bytes], list[str], Mutation]:
    name = rnd.choice(sorted(seeds.scenarios()))
    data, mutation = _yaml_mutation(rnd, seeds.scenarios()[name])
    mutation = Mutation(operator=f"{name}:{mutation.operator}", where=mutation.where, must_refuse=mutation.must_refuse)
    return {"s.yaml": data}, ["run", "s.yaml"], mutation


def _study(rnd: random.Random) -> tuple[dict[str, bytes], list[str], Mutation]:
    data, mutation = _yaml_mutation(rnd, seeds.study())
    files = {"study.yaml": data, "base.yaml": _dump(seeds.study_base()).encode()}
    return files, ["study", "run", "study.yaml", "--out", "out", "--executor", "serial"], mutation


def _graphml(rnd: random.Random) -> tuple[dict[str, bytes], list[str], Mutation]:
    text, mutation = mutate_graphml(rnd, seeds.graphml_text())
    files = {
        "t.graphml": text.encode("utf-8", errors="surrogateescape"),
        "s.yaml": _dump(seeds.graphml_scenario()).encode(),
    }
    return files, ["run", "s.yaml"], mutation


def _evidence(rnd: random.Random) -> tuple[dict[str, bytes], list[str], Mutation]:
    data, mutation = _yaml_mutation(rnd, seeds.evidence())
    return {"t.yaml": data}, ["calibrate", "t.yaml", "--bootstrap", "30"], mutation


def _ndjson(rnd: random.Random) -> tuple[dict[str, bytes], list[str], Mutation]:
    data, mutation = mutate_ndjson_gz(rnd, seeds.campusiot_bytes())
    return {"t.ndjson.gz": data}, ["trace", "inspect", "t.ndjson.gz", "--json"], mutation


def _pcap(rnd: random.Random) -> tuple[dict[str, bytes], list[str], Mutation]:
    data, mutation = mutate_bytes(rnd, seeds.pcap_bytes())
    return {"t.pcap": data}, ["trace", "inspect", "t.pcap", "--json"], mutation


_MAKERS = {
    "scenario": _scenario,
    "study": _study,
    "graphml": _graphml,
    "evidence": _evidence,
    "ndjson": _ndjson,
    "pcap": _pcap,
}


def make_case(kind: str, number: int, env: dict[str, str] | None = None) -> Case:
    """Case ``number`` of ``kind`` (the same files and command line every time)."""
    rnd = random.Random(f"{kind}:{number}")
    files, argv, mutation = _MAKERS[kind](rnd)
    return Case(kind=kind, number=number, files=files, argv=argv, mutation=mutation, env=dict(env or {}))


def load_case(folder: Path) -> Case:
    """A case saved by :meth:`Case.write` (the regression corpus)."""
    meta = json.loads((folder / "case.json").read_text())
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "case.json" and p.is_file()}
    return Case(
        kind=meta["kind"],
        number=meta["number"],
        files=files,
        argv=meta["argv"],
        mutation=Mutation(**meta["mutation"]),
        env=meta.get("env", {}),
    )
