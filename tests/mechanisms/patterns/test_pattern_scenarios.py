"""The pattern scenario files run and their reports say what the theory says;
bad ``patterns`` entries are one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from pubsim.models.mechanisms.patterns.reports import report
from pubsim.scenario import load_scenario, parse_scenario
from pubsim.sim import theory
from pubsim.sim.errors import ConfigError
from tests import ROOT

EXP = ROOT / "experiments"


def _run(name, **overrides):
    sc = load_scenario(EXP / f"{name}.yaml")
    result = sc.simulate(0, **overrides)
    return sc, result, [report(result, sc.topology, e, seed=sc.seed) for e in sc.patterns]


def test_push_pull_scenario_deals_evenly():
    _, _, (rows,) = _run("push_pull", duration_s=3.0, warmup_s=0.5)
    for _, grp in rows.groupby("publisher"):
        assert grp["delivered"].max() - grp["delivered"].min() <= 1
    assert (rows["ack_latency_mean_s"] > 0).all()


def test_request_reply_scenario_matches_mva():
    _, result, (rows,) = _run("request_reply")
    # 2 clients x W = 2: 4 customers, D = 1 ms exponential, delay 2 x (1 ms + 178 B / 12.5 MB/s)
    exact = theory.mva([1e-3], 2 * (1e-3 + 178 / 12.5e6), 4)
    assert rows["replies_per_s"].sum() == pytest.approx(exact["throughput_per_s"], rel=0.03)
    assert rows["mva_all_clients_per_s"].iloc[0] == pytest.approx(exact["throughput_per_s"], rel=1e-12)


def test_polling_scenario_matches_closed_forms():
    _, _, (hmi, scada) = _run("polling", duration_s=200.0)
    assert hmi["lost_fraction"].iloc[0] == pytest.approx(0.6, abs=0.01)
    assert scada["duplicate_fraction"].iloc[0] == pytest.approx(0.375, abs=0.01)
    assert scada["lost"].iloc[0] == 0 and hmi["duplicated_polls"].iloc[0] == 0


def test_serialization_scenario_text_is_five_times_larger_and_slower():
    _, _, (rows,) = _run("serialization_text_vs_binary", duration_s=2.0, warmup_s=0.5)
    rows = rows.set_index("publisher")
    assert rows.loc["txt", "size_bytes_mean"] == 5 * rows.loc["bin", "size_bytes_mean"] == 5000
    assert rows.loc["txt", "latency_mean_s"] > 3 * rows.loc["bin", "latency_mean_s"]


def test_cli_writes_pattern_csv(tmp_path):
    data = yaml.safe_load((EXP / "polling.yaml").read_text())
    data["run"]["duration"] = "60s"
    path = tmp_path / "poll.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = subprocess.run(
        [sys.executable, "-m", "pubsim", "run", str(path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "250"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "polling (replication 0)" in proc.stdout
    rows = pd.read_csv(tmp_path / "out" / "rep-000" / "pattern-polling.csv")
    assert len(rows) == 2 and {"lost_fraction", "expected_lost_fraction"} <= set(rows.columns)


@pytest.mark.parametrize(
    "patterns,field",
    [
        ([{"kind": "gossip"}], r"patterns\[0\]\.kind"),
        ([{"kind": "polling", "poller": "hmi"}], r"patterns\[0\]\.sensor"),
        (
            [{"kind": "polling", "poller": "nobody", "sensor": "sensor", "sample_interval": "1s"}],
            r"patterns\[0\]\.poller",
        ),
        ([{"kind": "push_pull", "ack": {"ack_bytes": "-4B"}}], r"ack_bytes"),
        ([{"kind": "request_reply", "window": 3}], r"patterns\[0\]\.window"),
        ("polling", r"patterns"),
    ],
)
def test_bad_pattern_entries_are_one_line_errors(patterns, field):
    data = yaml.safe_load((EXP / "polling.yaml").read_text())
    data["patterns"] = patterns
    with pytest.raises(ConfigError, match=field) as err:
        parse_scenario(data)
    assert "\n" not in str(err.value)


def test_patterns_need_full_records():
    data = yaml.safe_load((EXP / "polling.yaml").read_text())
    data["run"]["record"] = "stream"
    with pytest.raises(ConfigError, match="run.record"):
        parse_scenario(data)
