"""``pubsim study run`` and ``pubsim study summary``."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from pubsim.cli import main
from pubsim.study import load_summary
from tests.study.study_cases import study_dict, write_study

RATE = "topology.publishers[0].rate_per_s"


def _err(capsys):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pubsim: error: "), err
    return lines[0]


def test_run_then_summary_with_csv(tmp_path, capsys):
    path = write_study(tmp_path, study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}}))
    out = tmp_path / "out"
    assert main(["study", "run", str(path), "--out", str(out), "--executor", "serial"]) == 0
    text = capsys.readouterr().out
    assert "2 points x 2 replications; 0 tasks already finished, 4 to run" in " ".join(text.split())
    assert "mean ± 95% CI" in text and "3k/s" in text
    assert main(["study", "run", str(path), "--out", str(out), "--executor", "serial"]) == 0
    assert "4 tasks already finished, 0 to run" in " ".join(capsys.readouterr().out.split())
    csv = tmp_path / "s.csv"
    assert main(["study", "summary", str(out), "--csv", str(csv)]) == 0
    text = capsys.readouterr().out
    assert "4 of 4 (point, replication) tasks finished" in text
    table = pd.read_csv(csv)
    assert len(table) == 4 and list(table[RATE]) == list(load_summary(out)[RATE])


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "scenario: {}\nvary: {grid: {topology.nosuch: [1]}}\n",
            r"pubsim: error: vary\.grid\.topology\.nosuch: .*the scenario has no key topology",
        ),
        ("scenario: {}\n", "pubsim: error: base scenario: topology: None is invalid"),
        ("name: x\n", "pubsim: error: base: None is invalid: either base"),
        ("base: q.yaml\nvary: {zip: {a: [1], b: [1, 2]}}\n", "pubsim: error: base: 'q.yaml'"),
        ("[unclosed\n", "pubsim: error: .*study.yaml:"),
    ],
)
def test_bad_study_file_is_one_line_and_status_2(tmp_path, capsys, text, match):
    path = tmp_path / "study.yaml"
    path.write_text(text)
    assert main(["study", "run", str(path), "--out", str(tmp_path / "o"), "--executor", "serial"]) == 2
    assert re.match(match, _err(capsys))
    assert not (tmp_path / "o").exists()


def test_bad_vary_from_the_cli_names_the_field(tmp_path, capsys):
    path = write_study(tmp_path, study_dict(vary={"zip": {RATE: ["1k/s"], "topology.broker.preset": []}}))
    assert main(["study", "run", str(path), "--out", str(tmp_path / "o")]) == 2
    assert _err(capsys).startswith("pubsim: error: vary.zip.topology.broker.preset: [] is invalid")


def test_bad_arguments_and_missing_results(tmp_path, capsys):
    path = write_study(tmp_path, study_dict())
    with pytest.raises(SystemExit) as exc:
        main(["study", "run", str(path), "--out", str(tmp_path / "o"), "--workers", "0"])
    assert exc.value.code == 2
    assert "--workers" in _err(capsys)
    assert main(["study", "summary", str(tmp_path / "nothing")]) == 2
    assert "no manifest.json" in _err(capsys)
