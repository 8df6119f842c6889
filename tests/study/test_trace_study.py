"""The trace-driven section of the main study: scaled-up trace on brokers,
written at the edge, shown in the report (or skipped with a note)."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.analysis import trace_study as TS
from pubsim.models.loads import generators
from pubsim.report import to_markdown, trace_section


@pytest.fixture(scope="module")
def frames():
    # a stand-in for a CampusIoT device: a reading every 60 s (+- 2 s) for a day. (Near-periodic
    # on purpose: the resampler starts a copy at U x a drawn gap, so a source with exponential
    # gaps would start with a rate E[1/G]-inflated for minutes, see the report.)
    src = generators.constant_rate(
        np.random.default_rng(0),
        rate_per_s=1 / 60,
        duration_s=86400.0,
        jitter_s=4.0,
        topics=("application/rx",),
        size_bytes=32,
    )
    return TS.run_trace_study(
        src,
        brokers=("mosquitto", "rabbitmq-mqtt"),
        devices_per_gateway=(30, 3000),
        gateways=10,
        duration_s=2.0,
        warmup_s=0.5,
        settle_s=0.5,
        replications=2,
    )


def test_frames_are_study_shaped(frames):
    s = frames["summary"]
    assert len(s) == 2 * 2 * 2 and set(s["devices"]) == {300, 30000}
    assert s.groupby("point_id")["replication"].nunique().eq(2).all()
    # both brokers see the same city (same resampled trace per size and replication)
    by = s.pivot_table(index=["devices", "replication"], columns="broker", values="offered_per_s")
    assert (by["mosquitto"] == by["rabbitmq-mqtt"]).all()
    # ~ devices / 60 s per device (each copy keeps the source's mean rate)
    rate = s.groupby("devices")["offered_per_s"].mean()
    assert rate[30000] == pytest.approx(30000 / 60, rel=0.15)
    lat = frames["latency"]
    assert set(lat.columns) == {"point_id", "replication", "quantile", "latency_s"}
    assert (lat.groupby(["point_id", "replication"])["latency_s"].apply(lambda x: x.is_monotonic_increasing)).all()
    assert "publisher" not in set(frames["parameters"]["kind"])


def test_main_writes_results_and_the_report_shows_them(frames, tmp_path, monkeypatch):
    out = tmp_path / "study" / "trace"
    monkeypatch.setattr(TS, "find_trace", lambda d: str(tmp_path / "fake.ndjson.gz"))
    monkeypatch.setattr(TS, "read_campusiot", lambda p: (None, "fake trace"))
    monkeypatch.setattr(TS, "run_trace_study", lambda trace, **kw: frames)
    assert TS.main(["--traces", str(tmp_path), "--out", str(out)]) == 0
    md = to_markdown(trace_section(tmp_path / "study"))
    assert "fake.ndjson.gz" in md and "| rabbitmq-mqtt | 30,000 | 2 |" in md
    assert md.count("data:image/png;base64,") == 2
    assert "model band (held-out errors)" in md and "held out (" in md  # calibrated profiles carry their band


def test_absent_traces_leave_a_note(tmp_path):
    out = tmp_path / "study" / "trace"
    assert TS.main(["--traces", str(tmp_path / "nowhere"), "--out", str(out)]) == 0
    md = to_markdown(trace_section(tmp_path / "study"))
    assert "skipped" in md and "nowhere" in md and "data:image" not in md
    assert "Not run" in to_markdown(trace_section(tmp_path / "elsewhere"))
