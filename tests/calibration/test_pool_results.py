"""Several campaign directories read as one (``pool_results``; ``pubsim validate A B``)."""

from __future__ import annotations

import json
import shutil

import pytest

from pubsim.calibration.campaign import pool_results, read_results
from pubsim.cli import main
from pubsim.sim.errors import ConfigError
from tests import ROOT

DATA = ROOT / "calibration" / "data" / "mosquitto-length-step"


def _copy(tmp_path, name, version=None):
    d = tmp_path / name
    shutil.copytree(DATA, d)
    if version is not None:
        meta = json.loads((d / "meta.json").read_text())
        meta["versions"]["mosquitto"] = version
        (d / "meta.json").write_text(json.dumps(meta))
    return d


def test_the_second_campaign_keeps_its_runs_under_suffixed_names(tmp_path):
    a, b = _copy(tmp_path, "morning"), _copy(tmp_path, "evening")
    runs, sat, lat, meta = pool_results([a, b])
    one = read_results(a)
    assert len(runs) == 2 * len(one[0]) and len(sat) == 2 * len(one[1]) and len(lat) == 2 * len(one[2])
    configs = sorted(one[1].config)
    assert sorted(sat.config) == sorted(configs + [f"{c}@evening" for c in configs])
    for c in configs:  # each copy keeps its own runs, latency samples and split
        assert (runs.config == f"{c}@evening").sum() == (one[0].config == c).sum()
        assert (lat.config == f"{c}@evening").sum() == (one[2].config == c).sum()
        assert set(runs.loc[runs.config == f"{c}@evening", "split"]) == set(one[0].loc[one[0].config == c, "split"])
    keys = set(one[3]["pair_facts"])
    assert set(meta["pair_facts"]) == keys | {f"{k}@evening" for k in keys}
    assert meta["pooled"] == [str(a), str(b)] and meta["date"] == one[3]["date"]


def test_one_directory_pools_to_itself(tmp_path):
    a = _copy(tmp_path, "only")
    runs, sat, _, meta = pool_results([a])
    assert runs.equals(read_results(a)[0]) and sat.equals(read_results(a)[1]) and meta["pooled"] == [str(a)]


@pytest.mark.parametrize(
    "case, field",
    [("versions", "versions.mosquitto"), ("same-name", "results"), ("none", "results")],
)
def test_campaigns_that_cannot_pool_are_one_line_errors(tmp_path, case, field):
    if case == "versions":
        dirs = [_copy(tmp_path, "a"), _copy(tmp_path, "b", version="2.0.18")]
    elif case == "same-name":
        dirs = [_copy(tmp_path / "x", "a"), _copy(tmp_path / "y", "a")]
    else:
        dirs = []
    with pytest.raises(ConfigError) as err:
        pool_results(dirs)
    assert err.value.field.endswith(field)


def test_the_command_refuses_an_evidence_table_among_pooled_directories(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("broker\nmosquitto\n")
    assert main(["validate", str(_copy(tmp_path, "a")), str(table)]) == 2
    assert "campaign result directories only" in capsys.readouterr().err
