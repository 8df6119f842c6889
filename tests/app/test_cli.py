"""``pubsim run`` end to end on a tiny scenario: outputs per replication,
records that agree with the summary, and resuming an interrupted study."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tests import ROOT

QUICKSTART = ROOT / "experiments" / "quickstart.yaml"

# sim/cli.py docstring: per replication rep-NNN/ with these files, summary.json last
REP_FILES = [
    "deliveries.parquet",
    "drops.parquet",
    "stations.csv",
    "traffic.csv",
    "throughput.csv",
    "parameters.csv",
    "latency_cdf.png",
    "throughput.png",
    "summary.json",
]
# sim/records.py RecordSink.deliveries docstring
DELIVERY_COLUMNS = [
    "publish_time_s",
    "delivery_time_s",
    "latency_s",
    "publisher",
    "subscriber",
    "topic",
    "size_bytes",
    "hops",
    "msg",
    "retained",
]
DROP_COLUMNS = [
    "publish_time_s",
    "drop_time_s",
    "publisher",
    "topic",
    "size_bytes",
    "hops",
    "place",
    "cause",
    "lost_deliveries",
    "msg",
]

DURATION_S, WARMUP_S = 1.5, 0.5


def tiny_scenario(tmp_path):
    """Quickstart with 2 gateways at 40 msg/s, 6 subscribers (3 per topic), 1.5 s, 2 replications."""
    data = yaml.safe_load(QUICKSTART.read_text())
    data["name"] = "tiny"
    data["replications"] = 2
    data["run"].update(duration=f"{DURATION_S}s", warmup=f"{WARMUP_S}s", series_bin="0.25s")
    data["topology"]["publishers"][0].update(count=2, rate_per_s="40/s")
    data["topology"]["subscribers"][0].update(count=6)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def pubsim(*args, cwd):
    proc = subprocess.run(
        [sys.executable, "-m", "pubsim", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """One first run of the tiny study, shared by the tests (read-only)."""
    tmp = tmp_path_factory.mktemp("study")
    scenario = tiny_scenario(tmp)
    proc = pubsim("run", scenario, "--out", tmp / "out", cwd=tmp)
    return tmp, scenario, proc


def test_run_exits_zero_and_prints_summary(study):
    _, _, proc = study
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "tiny: summary over the measurement window" in out
    for metric in (
        "published",
        "ingress_per_s",
        "egress_per_s",
        "sp_ratio",
        "sustainability",
        "latency_p99_s",
        "loss_rate",
    ):
        assert metric in out
    assert "rep 0" in out and "rep 1" in out and "mean ± 95% CI" in out
    assert "parameters and provenance" in out and "PLACEHOLDER" in out
    assert "busiest stations" in out and "broker:broker" in out
    assert "skipped" not in out


def test_files_per_replication(study):
    tmp, _, _ = study
    out = tmp / "out"
    assert sorted(p.name for p in out.iterdir()) == ["rep-000", "rep-001", "scenario.json", "summary.csv"]
    for rep in ("rep-000", "rep-001"):
        names = sorted(p.name for p in (out / rep).iterdir())
        assert names == sorted(REP_FILES), rep
        for name in REP_FILES:
            assert (out / rep / name).stat().st_size > 0, (rep, name)
        # summary.json is written last (it marks the replication finished)
        mtimes = {n: (out / rep / n).stat().st_mtime_ns for n in REP_FILES}
        assert mtimes["summary.json"] == max(mtimes.values())
    table = pd.read_csv(out / "summary.csv")
    assert list(table["replication"]) == [0, 1]
    for rep in (0, 1):
        s = json.loads((out / f"rep-{rep:03d}" / "summary.json").read_text())
        assert table.loc[rep, "published"] == s["published"]
        assert table.loc[rep, "delivered"] == s["delivered"]


@pytest.mark.parametrize("rep", [0, 1])
def test_records_agree_with_summary(study, rep):
    tmp, _, _ = study
    d_rep = tmp / "out" / f"rep-{rep:03d}"
    s = json.loads((d_rep / "summary.json").read_text())
    d = pd.read_parquet(d_rep / "deliveries.parquet")
    assert list(d.columns) == DELIVERY_COLUMNS
    assert len(d) > 0
    window = (WARMUP_S, DURATION_S)
    assert s["window_s"] == pytest.approx(DURATION_S - WARMUP_S)
    # "delivered": copies of messages published in the window
    in_window = d.publish_time_s.between(*window, inclusive="left")
    assert int(in_window.sum()) == s["delivered"]
    # egress: copies delivered in the window, per second
    egress = d.delivery_time_s.between(*window, inclusive="left").sum() / s["window_s"]
    assert egress == pytest.approx(s["egress_per_s"], rel=1e-12)
    # below saturation, no loss: each message of the window reaches its 3 subscribers
    assert s["sp_ratio"] == 3.0
    assert s["expected_deliveries"] == 3 * s["published"] == s["delivered"]
    assert s["loss_rate"] == 0.0
    assert (d.latency_s == d.delivery_time_s - d.publish_time_s).all()
    assert d[in_window].latency_s.max() == pytest.approx(s["latency_max_s"], rel=1e-12)
    assert set(d.publisher.astype(str)) == {"gw0", "gw1"}
    assert set(d.subscriber.astype(str)) == {f"app{i}" for i in range(6)}
    assert set(d.size_bytes) == {36}
    drops = pd.read_parquet(d_rep / "drops.parquet")
    assert list(drops.columns) == DROP_COLUMNS and len(drops) == 0
    stations = pd.read_csv(d_rep / "stations.csv")
    assert {"station", "role", "utilization", "arrivals"} <= set(stations.columns)
    assert len(stations) == 1 + 2 + 6  # broker, 2 uplinks, 6 downlinks (pass-through subscribers)
    throughput = pd.read_csv(d_rep / "throughput.csv")
    assert list(throughput.columns) == ["time_s", "published_per_s", "delivered_per_s"]


def test_replications_differ(study):
    tmp, _, _ = study
    s0, s1 = (json.loads((tmp / "out" / f"rep-{r:03d}" / "summary.json").read_text()) for r in (0, 1))
    assert s0["published"] != s1["published"]  # independent streams per replication


def test_resume_skips_finished_and_recomputes_missing(tmp_path):
    scenario = tiny_scenario(tmp_path)
    out = tmp_path / "out"
    first = pubsim("run", scenario, "--out", out, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summaries = {r: (out / f"rep-{r:03d}" / "summary.json").read_text() for r in (0, 1)}
    mtimes = {r: {n: (out / f"rep-{r:03d}" / n).stat().st_mtime_ns for n in REP_FILES} for r in (0, 1)}
    table = pd.read_csv(out / "summary.csv")

    # everything done: nothing is run again, the summary is printed from the files
    again = pubsim("run", scenario, "--out", out, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "replication 0: already done" in again.stdout and "replication 1: already done" in again.stdout
    assert again.stdout.count("skipped") == 2
    assert "tiny: summary over the measurement window" in again.stdout
    for r in (0, 1):
        assert {n: (out / f"rep-{r:03d}" / n).stat().st_mtime_ns for n in REP_FILES} == mtimes[r]
    pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), table)

    # replication 1 interrupted before it finished: only it runs again, with the same result
    (out / "rep-001" / "summary.json").unlink()
    (out / "rep-001" / "deliveries.parquet").unlink()
    resumed = pubsim("run", scenario, "--out", out, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "replication 0: already done" in resumed.stdout
    assert "replication 1: already done" not in resumed.stdout
    assert resumed.stdout.count("skipped") == 1
    assert {n: (out / "rep-000" / n).stat().st_mtime_ns for n in REP_FILES} == mtimes[0]
    assert (out / "rep-001" / "summary.json").read_text() == summaries[1]
    assert (out / "rep-001" / "deliveries.parquet").exists()
    pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), table)

    # a summary.json cut short by a crash counts as unfinished, not as an error
    (out / "rep-000" / "summary.json").write_text('{"published": 1')
    cut = pubsim("run", scenario, "--out", out, cwd=tmp_path)
    assert cut.returncode == 0, cut.stderr
    assert cut.stdout.count("skipped") == 1 and "replication 1: already done" in cut.stdout
    assert (out / "rep-000" / "summary.json").read_text() == summaries[0]


def test_changed_scenario_is_refused_not_shown_stale(tmp_path):
    """A rerun into the same --out after the scenario changed must not print the old results."""
    scenario = tiny_scenario(tmp_path)
    out = tmp_path / "out"
    assert pubsim("run", scenario, "--out", out, cwd=tmp_path).returncode == 0
    old = (out / "rep-000" / "summary.json").read_text()
    data = yaml.safe_load(scenario.read_text())
    data["topology"]["publishers"][0]["rate_per_s"] = "80/s"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))

    refused = pubsim("run", scenario, "--out", out, cwd=tmp_path)
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("pubsim: error: --out:") and "--force-new" in line and "scenario hash" in line
    assert "skipped" not in refused.stdout and (out / "rep-000" / "summary.json").read_text() == old

    # the same scenario with another driver is another run too
    other = pubsim("run", scenario, "--out", out, "--record", "stream", cwd=tmp_path)
    assert other.returncode == 2

    fresh = pubsim("run", scenario, "--out", out, "--force-new", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert "skipped" not in fresh.stdout
    new = json.loads((out / "rep-000" / "summary.json").read_text())
    assert new["published"] > 1.5 * json.loads(old)["published"]  # twice the rate: the new scenario ran


def test_results_of_an_unknown_scenario_are_refused(tmp_path):
    scenario = tiny_scenario(tmp_path)
    (tmp_path / "out" / "rep-000").mkdir(parents=True)
    (tmp_path / "out" / "rep-000" / "summary.json").write_text('{"published": 3}')
    refused = pubsim("run", scenario, "--out", tmp_path / "out", cwd=tmp_path)
    assert refused.returncode == 2 and "results of an unknown scenario" in refused.stderr


def test_draw_a_five_broker_tree(tmp_path):
    scenario = ROOT / "experiments" / "ildm" / "placement_d_sf.yaml"
    proc = pubsim("draw", scenario, "--out", tmp_path / "d.png", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d.png").stat().st_size > 10_000
    bad = pubsim("draw", scenario, "--out", tmp_path / "d.txt", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_topology_figure_groups_every_client_and_labels_links():
    from pubsim.analysis.draw import topology_figure
    from pubsim.scenario import load_scenario

    g = load_scenario(ROOT / "experiments" / "ildm" / "placement_d_sf.yaml").topology
    fig = topology_figure(g)
    texts = [t.get_text() for t in fig.axes[0].texts]
    counted = sum(int(t.split()[0]) for t in texts if " publisher" in t or " subscriber" in t)
    clients = sum(
        1 for _, d in g.nodes(data=True) if str(getattr(d["kind"], "value", d["kind"])) in ("publisher", "subscriber")
    )
    assert counted == clients  # every client is in exactly one group
    assert sum("n" in t and "relay" in t for t in texts) == 5  # the five broker+relay pairs
    assert sum(t == "1 Gbit/s, 5 ms" for t in texts) == 4  # the four tree edges, labelled


class _SwallowsCtrlC:
    def __del__(self):
        raise KeyboardInterrupt  # what SIGINT does when it lands in a finalizer: Python ignores it


def test_a_ctrl_c_swallowed_by_a_finalizer_still_stops_the_command(capsys):
    """Python ignores an exception raised in ``__del__``: a Ctrl-C landing in a finalizer (pyarrow's
    ParquetWriter while a study writes) must still end the command with status 130."""
    from pubsim.cli import _run_command

    def command(args, console):
        _SwallowsCtrlC()  # dropped at once: its finalizer swallows the interrupt, and the command goes on
        return 0

    assert _run_command(command, None, None) == 130
    assert "pubsim: interrupted" in capsys.readouterr().err
    assert _run_command(lambda args, console: 0, None, None) == 0  # nothing left behind


def test_a_study_stops_after_the_task_whose_writer_swallowed_a_ctrl_c(tmp_path, monkeypatch):
    from pubsim import interrupts
    from pubsim.study import parse_study, run_study, store
    from tests.study.study_cases import study_dict

    write = store.write_tables

    def write_and_swallow(*args):
        write(*args)
        _SwallowsCtrlC()

    monkeypatch.setattr(store, "write_tables", write_and_swallow)
    study = parse_study(study_dict(vary={"grid": {"topology.publishers[0].rate_per_s": ["1k/s", "2k/s"]}}))
    with interrupts.catching(), pytest.raises(KeyboardInterrupt):
        run_study(study, tmp_path / "out", executor="serial")
    assert len(list((tmp_path / "out").glob("points/*/rep*.summary.parquet"))) == 1  # the first task's, kept
