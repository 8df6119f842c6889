"""The study report: contents (manifest, every point, knees, provenance) and
self-containment of the Markdown and HTML renderings."""

from __future__ import annotations

import base64
import re

import pytest

from pubsim.cli import main
from pubsim.report import (
    StudyResults,
    encode_figures,
    load_columns,
    report_blocks,
    to_html,
    to_markdown,
    varied_columns,
)
from tests import ROOT
from tests.study.study_frames import PRESET_COL, RATE_COL, study_frames


@pytest.fixture(scope="module")
def rendered():
    manifest, summary, latency, stations, series, params = study_frames()
    params = params.copy()
    slow_pts = summary.loc[summary[PRESET_COL] == "slow", "point_id"].unique()
    mask = (params["kind"] == "broker") & params["point_id"].isin(slow_pts)
    params.loc[mask, "placeholder"] = True
    params.loc[mask, "provenance"] = "publication: a broker of another study (PLACEHOLDER values)"
    res = StudyResults(
        manifest=manifest, summary=summary, latency=latency, stations=stations, series=series, parameters=params
    )
    blocks = encode_figures(report_blocks(res))
    return res, blocks, to_markdown(blocks), to_html(blocks, title="t")


def test_varied_and_load_columns(rendered):
    res = rendered[0]
    assert varied_columns(res.summary) == [PRESET_COL, RATE_COL]
    assert load_columns(res.summary) == [RATE_COL]


def test_report_has_manifest_points_knees_and_provenance(rendered):
    res, blocks, md, _ = rendered
    assert md.startswith("# Study report: tiny")
    for text in ("abc123", "deadbeef", "| numpy |", "| points | 6 |", "| replications per point | 2 |"):
        assert text in md
    points = next(b[1] for b in blocks if b[0] == "table" and "point" in b[1].columns)
    assert sorted(points["point"]) == sorted(res.summary["point_id"].unique())
    for pid, preset, rate in res.summary[["point_id", PRESET_COL, RATE_COL]].drop_duplicates().itertuples(index=False):
        assert re.search(rf"^\| {pid} \| {preset} \| {re.escape(rate)} \| 2 \|", md, re.M), pid
    knees = next(b[1] for b in blocks if b[0] == "table" and "knee between (offered msg/s)" in b[1].columns)
    assert list(knees["preset"]) == ["fast", "slow"]
    assert all(" - " in k for k in knees["knee between (offered msg/s)"])
    assert "## Provenance of the models" in md
    assert "**1 model(s) rest on placeholder values**" in md
    prov = next(b[1] for b in blocks if b[0] == "table" and "provenance" in b[1].columns)
    flagged = prov[prov["status"] == "**PLACEHOLDER**"]
    assert (
        len(flagged) == 1 and flagged["kind"].iloc[0] == "broker" and "another study" in flagged["provenance"].iloc[0]
    )
    assert set(prov["kind"]) == {"broker", "link", "publisher", "subscriber"}


def test_figures_embedded_as_png(rendered):
    _, blocks, md, page = rendered
    pngs = [b for b in blocks if b[0] == "png"]
    assert len(pngs) == 6  # load curves, latency CDFs and series at the knees per preset, utilization
    for _, data, _ in pngs:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert md.count("](data:image/png;base64,") == 6
    assert page.count("src='data:image/png;base64,") == 6


def test_html_is_self_contained(rendered):
    page = rendered[3]
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    refs = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)""", page)
    assert refs and all(r.startswith("data:") for r in refs)
    assert "<link" not in page and "<script" not in page and "url(" not in page
    assert "<strong>**" not in page and "<strong>PLACEHOLDER</strong>" in page


def test_report_command_needs_a_study_dir(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json" in err


_STUDY = """
name: tiny-main
description: two profiles x two loads
base: {base}
replications: 2
set:
  run.duration: 0.6s
  run.warmup: 0.2s
  run.record: stream
  topology.publishers[0].count: 4
  topology.subscribers[0].count: 12
vary:
  grid:
    topology.broker.preset: [mosquitto, rabbitmq-mqtt]
    topology.publishers[0].rate_per_s: [1k/s, 8k/s]
"""


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    study = pytest.importorskip("pubsim.study")

    root = ROOT
    d = tmp_path_factory.mktemp("study")
    f = d / "tiny.yaml"
    f.write_text(_STUDY.format(base=root / "experiments" / "quickstart.yaml"))
    study.run_study(study.load_study(f), d / "out", executor="serial", progress=False)
    return d / "out"


def test_report_of_a_stored_study(study_dir, tmp_path):
    from pubsim.report import build_report, render_html
    from pubsim.study import load_summary, read_manifest

    md = build_report(study_dir)
    manifest = read_manifest(study_dir)
    assert md.startswith("# Study report: tiny-main")
    assert manifest["git_revision"] in md and manifest["config_hash"] in md
    for p in manifest["points"]:
        assert f"| {p['point_id']} |" in md
    assert "rabbitmq-mqtt" in md and "## Provenance of the models" in md and "measured:" in md
    assert "## Trace-driven load" in md and "Not run" in md  # no trace/ results in this directory
    summary = load_summary(study_dir)
    assert len(summary) == 8
    page = render_html(study_dir)
    refs = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)""", page)
    assert refs and all(r.startswith("data:") for r in refs)
    assert main(["report", str(study_dir), "--md", str(tmp_path / "r.md"), "--html", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.md").read_text().startswith("# Study report: tiny-main")
    assert (tmp_path / "r.html").read_text().count("data:image/png;base64,") >= 3


def test_report_leads_with_the_answer_and_ends_with_the_manifest(rendered):
    res, blocks, md, _ = rendered
    heads = [b[1] for b in blocks if b[0] == "h2"]
    assert heads[0] == "The answer" and heads[-1] == "What was run"
    assert heads.index("Provenance of the models") == len(heads) - 2
    answer = next(b[1] for b in blocks if b[0] == "table" and "knee (offered msg/s)" in b[1].columns)
    assert list(answer["preset"]) == ["fast", "slow"]
    k = next(b[1] for b in blocks if b[0] == "table" and "knee between (offered msg/s)" in b[1].columns)
    for knee, between in zip(answer["knee (offered msg/s)"], k["knee between (offered msg/s)"]):
        lo, hi = (float(x.replace(",", "")) for x in between.split(" - "))
        mid, band = (float(x.replace(",", "")) for x in knee.split(" ± "))
        assert mid == pytest.approx((lo + hi) / 2, abs=1) and band == pytest.approx((hi - lo) / 2, abs=1)
    assert all("at " in v for v in answer["loss past the knee"])
    assert all(" / " in v for v in answer["latency near 80 % of the knee (p50 / p99)"])
    prov = next(b[1] for b in blocks if b[0] == "table" and "provenance" in b[1].columns)
    assert prov["status"].iloc[0] == "**PLACEHOLDER**"  # placeholders first
    assert "component" in prov.columns and "parameters" in prov.columns


def test_markdown_report_references_image_files_beside_it(rendered, tmp_path):
    _, blocks, _, _ = rendered
    md = to_markdown(blocks, image_dir=tmp_path / "report-figures")
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(refs) == 6 and "data:" not in md
    for ref in refs:
        assert ref.startswith("report-figures/") and (tmp_path / ref).read_bytes()[:4] == b"\x89PNG"


def test_report_draws_the_topology_of_a_stored_study(study_dir):
    from pubsim.report import load_results, report_blocks

    blocks = report_blocks(load_results(study_dir))
    heads = [b[1] for b in blocks if b[0] == "h2"]
    assert heads[:2] == ["The answer", "Topology"]
    i = next(n for n, b in enumerate(blocks) if b[0] == "h2" and b[1] == "Topology")
    assert blocks[i + 2][0] == "figure" and blocks[i + 2][2] == "topology"
    texts = [t.get_text() for t in blocks[i + 2][1].axes[0].texts]
    assert any("4 publishers" in t for t in texts) and any("12 subscribers" in t for t in texts)


def test_report_says_why_without_a_study_file(rendered):
    _, blocks, md, _ = rendered
    assert "## Topology" in md and "Not drawn" in md


def test_report_shows_each_knee_with_its_model_band(study_dir, tmp_path):
    from pubsim.models import presets

    assert main(["report", str(study_dir), "--md", str(tmp_path / "r.md"), "--html", str(tmp_path / "r.html")]) == 0
    md = (tmp_path / "r.md").read_text()
    answer = md.split("## The answer", 1)[1].split("\n## ", 1)[0]
    assert "model band (held-out saturation error)" in answer and "**Model band.**" in answer
    for name in ("mosquitto", "rabbitmq-mqtt"):
        acc = presets.load("broker", name)["provenance"]["accuracy"]
        sat = acc["holdout"]["saturation_error_pct"]
        row = next(line for line in answer.splitlines() if line.startswith(f"| {name} |"))
        band = (
            f"{sat['low']:+.0f} %"
            if round(sat["low"]) == round(sat["high"])
            else f"{sat['low']:+.0f} .. {sat['high']:+.0f} %"
        )
        assert f"{band}: real knee" in row, row
        assert "**outside**" in row  # the quickstart's 4 gateways and whole core are not the fitted campaign
    # the broker has a whole core here; the profiles were fitted at a cap: a named warning
    assert "**Extrapolation warnings**" in answer and "cpu_cap_cores 1 outside the fitted 0.2" in answer
    assert "real knee" in (tmp_path / "r.html").read_text()


def test_report_says_no_validation_for_an_uncalibrated_broker(rendered):
    _, blocks, md, _ = rendered
    answer = next(b[1] for b in blocks if b[0] == "table" and "knee (offered msg/s)" in b[1].columns)
    assert all("no validation" in v for v in answer["model band (held-out saturation error)"])
    assert "Extrapolation warnings" not in md
