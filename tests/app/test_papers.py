"""``pubsim paper run`` on every folder of experiments/papers (quick), bad folders, resume, provenance of inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import pubsim as ps
from pubsim.calibration.evidence import evidence_schema, read_evidence
from pubsim.calibration.papers import MemoryStore, load_paper, run_paper
from pubsim.calibration.papers.iot import calibrated_brokers
from pubsim.calibration.papers.ordering import arrival_order
from pubsim.cli import main
from pubsim.models.params.mapping import from_mapping
from pubsim.sim.errors import ConfigError
from pubsim.sim.safeyaml import safe_load
from pubsim.sim.units import parse_duration_s

ROOT = Path(__file__).resolve().parents[2]
PAPERS = ROOT / "experiments" / "papers"
FOLDERS = sorted(p.parent for p in PAPERS.glob("*/paper.yaml"))
SYSTEMS = ROOT.parent.parent / "shared" / "reference" / "SYSTEMS.md"
SYSTEMS = SYSTEMS if SYSTEMS.is_file() else Path("/work/shared/reference/SYSTEMS.md")


def _run(capsys, *argv):
    code = main(["paper", "run", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_folders_exist():
    names = {f.name for f in FOLDERS}
    assert {"iot-traffic-classes", "ildm-pf-sf", "smart-grid-pair", "yami4-vs-qpid", "persistent-large"} <= names


@pytest.fixture(scope="module", params=FOLDERS, ids=lambda f: f.name)
def quick_run(request, tmp_path_factory):
    """Each folder run once with --quick (shared by the tests below: each run costs seconds)."""
    out = tmp_path_factory.mktemp(request.param.name) / "out"
    code = main(["paper", "run", str(request.param), "--out", str(out), "--quick"])
    return request.param, out, code


PROGRESS = re.compile(r"points: (\d+) run, (\d+) already finished")


def test_quick_run_writes_tables_figures_and_headline(quick_run):
    folder, out, code = quick_run
    assert code == 0
    tables = sorted((out / "tables").glob("*.csv"))
    assert tables and sorted((out / "figures").glob("*.png"))
    for t in tables:
        assert len(pd.read_csv(t)) > 0, t
    ran = PROGRESS.search((out / "headline.txt").read_text())
    assert ran and int(ran.group(1)) > 0 and int(ran.group(2)) == 0


def test_rerun_skips_every_finished_point(quick_run, capsys):
    folder, out, _ = quick_run
    first = {t.name: pd.read_csv(t) for t in (out / "tables").glob("*.csv")}
    before = PROGRESS.search((out / "headline.txt").read_text())
    points = sorted((out / "points").glob("*.json"))
    if points:  # a point deleted is the only one run again
        points[0].unlink()
    code, text, err = _run(capsys, folder, "--out", out, "--quick")
    assert code == 0, err
    again = PROGRESS.search(text)
    missing = 1 if points else 0
    assert int(again.group(1)) == missing and int(again.group(2)) == int(before.group(1)) - missing
    for name, df in first.items():
        pd.testing.assert_frame_equal(pd.read_csv(out / "tables" / name), df)


def test_quick_and_full_do_not_mix(quick_run, capsys):
    folder, out, _ = quick_run
    code, _, err = _run(capsys, folder, "--out", out)
    assert code == 2 and err.count("\n") == 1 and "--force-new" in err


def _bad(tmp_path, text):
    folder = tmp_path / "bad"
    folder.mkdir(exist_ok=True)
    (folder / "paper.yaml").write_text(text)
    return folder


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda tmp: tmp / "missing", "not a folder"),
        (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "no paper.yaml"),
        (lambda tmp: _bad(tmp, "name: x\n  - : ["), "malformed YAML"),
        (lambda tmp: _bad(tmp, "name: x\ntitle: t\nsource: s\nkind: magic\nfull: {a: 1}\n"), "kind"),
        (lambda tmp: _bad(tmp, "name: x\ntitle: t\nsource: s\nkind: limits\nfull: {a: 1}\nextra: 2\n"), "extra"),
        (
            lambda tmp: _bad(tmp, "name: x\ntitle: t\nsource: s\nkind: iot-classes\nevidence: no.yaml\nfull: {a: 1}\n"),
            "evidence",
        ),
        (lambda tmp: _bad(tmp, "name: x\ntitle: t\nsource: s\nkind: limits\nfull: {seed: 1}\n"), "search"),
        (
            lambda tmp: _bad(
                tmp, "name: x\ntitle: t\nsource: s\nkind: studies\nfull: {studies: {a: {file: no.yaml}}}\n"
            ),
            "file",
        ),
    ],
)
def test_bad_folder_is_one_line(make, needle, tmp_path, capsys):
    code, _, err = _run(capsys, make(tmp_path), "--out", tmp_path / "o")
    assert code == 2
    assert err.startswith("pubsim: error:") and err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "o" / "paper.json").exists()  # a refused setting leaves no manifest behind


def test_library_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paper = load_paper(PAPERS / "ildm-pf-sf", quick=True)
    store = MemoryStore()
    res = run_paper(paper, store, date="2026-01-01")
    assert list(tmp_path.iterdir()) == []
    assert set(res.tables) == {"limits", "latency"} and len(store.records) == res.ran


EVIDENCE = sorted(PAPERS.glob("*/evidence.*"))


@pytest.mark.parametrize("path", EVIDENCE, ids=lambda p: p.parent.name)
def test_evidence_tables_validate(path):
    jsonschema = pytest.importorskip("jsonschema")
    rows = safe_load(path.read_text())
    jsonschema.Draft202012Validator(evidence_schema()).validate(rows)
    table = read_evidence(path)
    assert set(table.source_kind) == {"publication"}
    assert all("SYSTEMS.md" in ref for ref in table.source_reference)


@pytest.mark.parametrize("path", EVIDENCE, ids=lambda p: p.parent.name)
def test_evidence_values_are_systems_md_inputs(path):
    """Every observed value of an evidence row is written in SYSTEMS.md (its calibration inputs)."""
    if not SYSTEMS.is_file():
        pytest.skip("SYSTEMS.md not present")
    text = SYSTEMS.read_text()
    for row in safe_load(path.read_text()):
        for col in ("limit_msg_per_s", "throughput_msg_per_s", "cpu_percent", "rate_per_s"):
            if col in row:
                value = str(row[col]).removesuffix("/s")
                assert re.search(rf"\b{re.escape(value)}\b", text), (path.name, col, value)
        assert f"{row['payload_bytes']}-byte" in text


NUMBER = re.compile(r"(?<![\w.])\d+(\.\d+)?")
TAGS = ("SYSTEMS.md", "assumed", "assumption", "preset", "any seed", "generated")


def _unflagged_numbers(path):
    """Lines of a folder's YAML file (outside ``quick:``) with a number but no provenance comment.

    A comment counts for the lines below it up to the next blank line or
    line of lesser indentation (a comment block heading a mapping).
    """
    bad, quick, block = [], False, None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        body, _, comment = line.partition("#")
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            block = None
            continue
        if re.match(r"^quick:", line):
            quick = True
        elif re.match(r"^\S", body) and body.strip():
            quick = False
        key, _, value = body.partition(":")
        header = not body.strip() or (key.strip() and not value.strip())  # a comment line or a mapping's key
        if block is not None and indent <= block and body.strip():
            block = None
        if header and any(t in comment for t in TAGS):
            block = indent
        text_key = key.strip().lstrip("- ") in ("name", "title", "source", "description", "reference", "note")
        if quick or text_key or not NUMBER.search(value) or any(t in comment for t in TAGS) or block is not None:
            continue
        bad.append(f"{path.name}:{n}: {line.strip()}")
    return bad


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_every_number_has_a_provenance(folder):
    files = [p for p in folder.glob("*.yaml") if not p.name.startswith("evidence")]
    bad = [b for p in files for b in _unflagged_numbers(p)]
    assert not bad, "numbers without a SYSTEMS.md / preset / assumed comment:\n" + "\n".join(bad)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_readme_lists_inputs_assumptions_and_wall_time(folder):
    text = (folder / "README.md").read_text()
    for heading in ("## Inputs", "## What is predicted", "## Assumptions", "## Wall time"):
        assert heading in text, (folder.name, heading)
    assert f"pubsim paper run experiments/papers/{folder.name}" in text


def test_unflagged_number_is_caught(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("full:\n  rate: 50/s\n  size: 32B   # SYSTEMS.md §3\nquick:\n  rate: 1/s\n")
    assert _unflagged_numbers(p) == ["x.yaml:2: rate: 50/s"]


def test_calibration_reproduces_the_inputs_at_their_configuration():
    """The calibrated brokers' demand at 36 B, fan-out 1 is cores / limit of the evidence row."""

    path = PAPERS / "iot-traffic-classes" / "evidence.yaml"
    table = read_evidence(path)
    for kind, (fields, profile) in calibrated_brokers(path, date="2026-01-01").items():
        row = table[table.broker == kind].iloc[0]
        ingress = (
            parse_duration_s(fields["ingress_cost_s"], "x")
            if isinstance(fields["ingress_cost_s"], str)
            else fields["ingress_cost_s"]
        )
        demand = ingress + fields["per_byte_cost_s"] * row.payload_bytes * 2
        assert demand == pytest.approx(row.cpu_cap_cores / row.limit_msg_per_s, rel=5e-4)  # profiles keep 4 digits
        assert fields["workers"] == int(row.cpu_cap_cores)
        assert profile["evidence"]["terms"]["delivery_cost_s"]["identifiable"] is False


def test_bad_setting_value_is_one_line(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    src = (PAPERS / "ildm-pf-sf" / "paper.yaml").read_text().replace("steps: 20", "steps: -3")
    src = src.replace("../../ildm/", str(ROOT / "experiments" / "ildm") + "/")
    (folder / "paper.yaml").write_text(src)
    with pytest.raises(ConfigError, match="search.steps"):
        run_paper(load_paper(folder), MemoryStore(), date="2026-01-01")


def test_limits_set_places_every_scenario_and_a_bad_path_is_one_line(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    src = (PAPERS / "ildm-pf-sf" / "paper.yaml").read_text()
    src = src.replace("../../ildm/", str(ROOT / "experiments" / "ildm") + "/")
    (folder / "paper.yaml").write_text(src.replace('"topology.brokers[0].host"', '"topology.brokers[7].host"'))
    with pytest.raises(ConfigError, match=r"\.set: topology\.brokers\[7\]\.host"):
        run_paper(load_paper(folder, quick=True), MemoryStore(), date="2026-01-01")
    res = run_paper(load_paper(PAPERS / "ildm-pf-sf", quick=True), MemoryStore(), date="2026-01-01")
    # the broker and its node share one host's CPU: the bottleneck is that CPU, not the broker or relay alone
    assert all(str(b).startswith("cpu:site") for b in res.tables["limits"]["bottleneck"]), res.tables["limits"]


def test_arrival_order_sorts_by_delivery_time():

    d = pd.DataFrame(
        {
            "publish_time_s": [0.0, 1e-6, 2e-6],
            "delivery_time_s": [0.3, 0.1, 0.2],
            "topic": ["prio.0", "prio/2", "prio.1"],
        }
    )
    assert arrival_order(d) == "2 1 0"


@pytest.mark.parametrize("factor, sustainable", [(0.9, True), (1.1, False)])
def test_calibrated_mosquitto_holds_its_input_limit(factor, sustainable):
    """Simulated at 36 B and fan-out 1, the broker calibrated from 134k msg/s sustains 0.9x of it, not 1.1x."""

    path = PAPERS / "iot-traffic-classes" / "evidence.yaml"
    fields, _ = calibrated_brokers(path, date="2026-01-01")["mosquitto"]
    broker = from_mapping(ps.BrokerParams, fields, "broker")
    n, rate = 20, 134_000 * factor
    g = ps.star(
        broker=broker,
        publishers={
            f"p{i}": ps.PublisherParams(topics=(f"p{i}/t",), rate_per_s=rate / n, size_bytes=ps.Constant(value=36.0))
            for i in range(n)
        },
        subscribers={f"s{i}": ps.SubscriberParams(subscriptions=(f"p{i}/#",)) for i in range(n)},
        link=ps.LinkParams(latency_s=1e-4, bandwidth_Bps=1.25e8),
    )
    s = ps.simulate(g, duration_s=0.4, warmup_s=0.1, seed=3, record="stream").summary()
    assert (s["sustainability"] >= 0.99 and s["delivery_ratio"] >= 0.99) is sustainable, s
