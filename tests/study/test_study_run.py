"""Running studies: layout, determinism, common random numbers, executors, resume rules, CIs."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pubsim.sim.errors import ConfigError
from pubsim.study import (
    load_latency,
    load_parameters,
    load_series,
    load_stations,
    load_summary,
    parse_study,
    read_manifest,
    run_study,
    summary_with_ci,
)
from pubsim.study.tasks import QUANTILES
from tests.study.study_cases import study_dict

RATE = "topology.publishers[0].rate_per_s"
QUEUE = "topology.broker.queue_messages"
LOADERS = (load_summary, load_latency, load_stations, load_series, load_parameters)


def _run(tmp_path, data, name="out", **kw):
    out = tmp_path / name
    return run_study(parse_study(data), out, progress=False, **{"executor": "serial", **kw}), out


def _tables(out):
    return [f(out) for f in LOADERS]


def test_layout_and_tables(tmp_path):
    df, out = _run(tmp_path, study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}}))
    study = parse_study(study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}}))
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    expected = ["manifest.json"]
    for p in study.points:
        expected.append(f"points/{p.point_id}/parameters.parquet")
        for r in range(2):
            expected += [
                f"points/{p.point_id}/rep{r}.{k}.parquet" for k in ("latency", "series", "stations", "summary")
            ]
    assert files == sorted(expected)  # no temporary files left behind
    assert list(df.columns[:3]) == ["point_id", "replication", RATE]
    assert df[RATE].tolist() == ["1k/s", "1k/s", "3k/s", "3k/s"]
    assert df.attrs["varied"] == [RATE]
    assert {"egress_per_s", "latency_p99_s", "loss_rate", "sustainability"} <= set(df.columns)
    pd.testing.assert_frame_equal(df, load_summary(out))
    lat = load_latency(out)
    assert list(lat.columns) == ["point_id", "replication", "quantile", "latency_s"]
    assert len(lat) == 4 * len(QUANTILES) and 190 <= len(QUANTILES) <= 210
    assert {0.001, 0.5, 0.9, 0.99, 0.999} <= set(QUANTILES)
    # the stored quantiles come from the same tallies as the summary: equal to the last bit
    for row in df.itertuples():
        one = lat[(lat.point_id == row.point_id) & (lat.replication == row.replication)].set_index("quantile")
        assert one.loc[0.99, "latency_s"] == row.latency_p99_s and one.loc[0.5, "latency_s"] == row.latency_p50_s
        assert one["latency_s"].is_monotonic_increasing
    st = load_stations(out)
    assert list(st.columns[:3]) == ["point_id", "replication", "station"] and "utilization" in st
    se = load_series(out)
    assert list(se.columns[:3]) == ["point_id", "replication", "time_s"]
    par = load_parameters(out)
    assert list(par.columns[:2]) == ["point_id", "component"]
    assert set(par.point_id) == {p.point_id for p in study.points}
    broker = par[(par.kind == "broker")].iloc[0]
    assert '"queue_messages": 200' in broker.parameters and broker.provenance
    manifest = read_manifest(out)
    assert manifest["config_hash"] == study.config_hash and manifest["replications"] == 2
    assert [p["point_id"] for p in manifest["points"]] == [p.point_id for p in study.points]
    assert manifest["points"][1]["overrides"] == {RATE: "3k/s"}
    assert {"numpy", "scipy", "pandas", "pyarrow", "dask"} <= set(manifest["versions"])
    assert manifest["git_revision"] and manifest["created"] <= manifest["updated"]


def test_stream_records_give_histogram_quantiles(tmp_path):
    df, out = _run(tmp_path, study_dict(replications=1), run_overrides={"record": "stream"})
    lat = load_latency(out)
    assert lat.set_index("quantile").loc[0.99, "latency_s"] == df.latency_p99_s.iloc[0]
    full, _ = _run(tmp_path, study_dict(replications=1), name="full")
    assert df.latency_p99_s.iloc[0] == pytest.approx(full.latency_p99_s.iloc[0], rel=0.02)  # 200 bins/decade


def test_common_random_numbers_and_determinism(tmp_path):
    # the scenario name changes nothing simulated: identical configurations, identical results
    crn = {"grid": {"name": ["a", "b"], QUEUE: [5, 200]}}
    busy = {RATE: "20k/s"}  # 80k msg/s, 2 copies each: the broker is about 90 % busy
    df, _ = _run(tmp_path, study_dict(vary=crn, replications=2, set=busy))
    values = [c for c in df.columns if c not in ("point_id", "name")]
    a = df[df.name == "a"][values].reset_index(drop=True)
    b = df[df.name == "b"][values].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    # common random numbers: replication r publishes the same messages at every point...
    pub = df.pivot_table(index="replication", columns=QUEUE, values="published", aggfunc="first")
    assert (pub[5] == pub[200]).all()
    # ...which the queue size then treats differently; replications differ
    assert pub.loc[0, 5] != pub.loc[1, 5]
    lost = df.groupby(QUEUE).loss_rate.mean()
    assert lost[5] > lost[200]
    again, _ = _run(tmp_path, study_dict(vary=crn, set=busy), name="again")
    pd.testing.assert_frame_equal(df, again)
    # another study seed: other streams
    other, _ = _run(tmp_path, study_dict(vary=crn, seed=12, set=busy), name="other")
    assert not other.published.equals(df.published)


def test_process_pool_gives_the_serial_tables(tmp_path):
    data = study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}})
    _run(tmp_path, data, name="serial")
    _run(tmp_path, data, name="pool", executor="local", workers=2)
    for ser, pool in zip(_tables(tmp_path / "serial"), _tables(tmp_path / "pool")):
        assert len(ser) > 0
        pd.testing.assert_frame_equal(ser, pool, check_exact=True)


def test_a_changed_preset_is_a_changed_study(tmp_path, monkeypatch):
    # the study names a user preset; refitting it (pubsim calibrate --write) changes no line of the
    # study, yet the results made with the old parameters must not be taken as this study's
    presets = tmp_path / "presets"
    presets.mkdir()
    monkeypatch.setenv("PUBSIM_PRESETS", str(presets))

    def write_preset(ingress):
        text = f"broker:\n  mine:\n    workers: 1\n    ingress_cost_s: {ingress}\n    delivery_cost_s: 3us\n"
        (presets / "mine.yaml").write_text(text)

    data = study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}}, replications=1)
    data["scenario"]["topology"]["broker"]["preset"] = "mine"
    write_preset("3us")
    before = parse_study(data)
    _run(tmp_path, data)
    write_preset("3us")
    assert parse_study(data).config_hash == before.config_hash  # same parameters, same study
    _run(tmp_path, data)
    write_preset("5us")
    assert parse_study(data).config_hash != before.config_hash
    with pytest.raises(ConfigError, match=r"point p0000-\w+ config hash \w+ is now \w+\); use --force-new"):
        _run(tmp_path, data)


def test_resume_skips_finished_tasks_and_more_replications_add_only(tmp_path):
    data = study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}}, replications=1)
    df1, out = _run(tmp_path, data)
    before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in out.rglob("*.parquet")}
    df2, _ = _run(tmp_path, {**data, "replications": 2})
    assert len(df2) == 4
    for p, stamp in before.items():
        assert (p.stat().st_mtime_ns, p.stat().st_ino) == stamp, p
    pd.testing.assert_frame_equal(df2[df2.replication == 0].reset_index(drop=True), df1)
    assert read_manifest(out)["replications"] == 2


def test_a_changed_study_is_refused_unless_force_new(tmp_path):
    _, out = _run(tmp_path, study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}}, replications=1))
    changed = study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}}, replications=1)
    changed["scenario"]["topology"]["broker"]["queue_messages"] = 300
    with pytest.raises(ConfigError) as err:
        _run(tmp_path, changed)
    msg = str(err.value)
    assert msg.startswith(f"{out / 'manifest.json'}: 'config hash ") and "--force-new" in msg and "\n" not in msg
    assert "point p0000-" in msg and "is now" in msg
    df, _ = _run(tmp_path, changed, force_new=True)
    assert len(df) == 2 and read_manifest(out)["config_hash"] == parse_study(changed).config_hash
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"^--out: .*new or empty directory"):
        _run(tmp_path, changed, name="other")


def test_summary_with_ci_is_the_student_t_interval():
    df = pd.DataFrame(
        {
            "point_id": ["a"] * 3 + ["b"] * 2 + ["c"],
            "replication": [0, 1, 2, 0, 1, 0],
            "load": [1, 1, 1, 2, 2, 3],
            "x": [1.0, 2.0, 3.0, 5.0, np.nan, 7.0],
        }
    )
    df.attrs["varied"] = ["load"]
    ci = summary_with_ci(df, confidence=0.9).set_index("load")
    assert list(ci.metric) == ["x"] * 3
    assert ci.loc[1, "mean"] == 2.0 and ci.loc[1, "n"] == 3
    assert ci.loc[1, "half_width"] == pytest.approx(stats.t.ppf(0.95, 2) * 1.0 / math.sqrt(3))
    assert ci.loc[1, "half_width"] == pytest.approx(1.6859, abs=1e-4)  # t_{0.95,2} = 2.919986
    assert ci.loc[2, "n"] == 1 and math.isnan(ci.loc[2, "half_width"]) and ci.loc[2, "mean"] == 5.0
    assert math.isnan(ci.loc[3, "half_width"])
    wide = summary_with_ci(df, by=["point_id"], value_cols=["x", "load"])
    assert len(wide) == 6 and set(wide.metric) == {"x", "load"}


@pytest.mark.dask
@pytest.mark.timeout(300)
def test_dask_local_cluster_gives_the_serial_tables(tmp_path):
    data = study_dict(vary={"grid": {RATE: ["1k/s", "3k/s"]}})
    _run(tmp_path, data, name="serial")
    _run(tmp_path, data, name="dask", executor="dask", dask_address="local", workers=2)
    for ser, dsk in zip(_tables(tmp_path / "serial"), _tables(tmp_path / "dask")):
        assert len(ser) > 0
        pd.testing.assert_frame_equal(ser, dsk, check_exact=True)


def test_bad_executor_arguments():
    study = parse_study(study_dict())
    with pytest.raises(ConfigError, match=r"^--executor: 'threads'"):
        run_study(study, os.devnull, executor="threads", progress=False)
    with pytest.raises(ConfigError, match=r"^--workers: 0"):
        run_study(study, os.devnull, workers=0, progress=False)
    with pytest.raises(ConfigError, match=r"^--dask: 'somewhere'"):
        run_study(study, os.devnull, dask_address="somewhere", progress=False)


def test_mixed_value_types_become_one_text_column(tmp_path):
    df, out = _run(tmp_path, study_dict(vary={"grid": {RATE: [1000, "2k/s"], QUEUE: [50, 100]}}, replications=1))
    assert df[RATE].tolist() == ["1000", "1000", "2k/s", "2k/s"]
    assert df[QUEUE].tolist() == [50, 100, 50, 100]
    df.to_parquet(tmp_path / "all.parquet")  # one type per column
    assert load_summary(out)[QUEUE].dtype.kind == "i"
