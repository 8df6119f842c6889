"""``trace inspect`` and ``trace convert`` handlers, through a parser built here."""

from __future__ import annotations

import argparse
import json

import pytest

from pubsim.models.loads import generators as G
from pubsim.models.loads.cli import add_commands
from pubsim.models.loads.trace import Trace
from pubsim.sim.errors import ConfigError
from pubsim.sim.rng import StreamFactory
from tests.loads.test_loads_readers import write_campusiot_sample, write_pcap_sample


def _run(argv):
    parser = argparse.ArgumentParser(prog="pubsim")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args, None)


@pytest.fixture
def saved(tmp_path):
    t = G.weather_sensors(StreamFactory(1).generator("cli"), n_gateways=2, sensors_per_gateway=100, duration_s=600)
    return t, t.save(tmp_path / "w.parquet")


def test_inspect_prints_the_summary(saved, capsys):
    trace, path = saved
    assert _run(["trace", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"messages   {len(trace)}" in out and "devices    2" in out and "rate by hour" in out
    assert "size (B)" in out and "gap (s)" in out


def test_inspect_json_and_plot(saved, tmp_path, capsys):
    _, path = saved
    png = tmp_path / "t.png"
    assert _run(["trace", "inspect", str(path), "--json", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out[: out.rindex("}") + 1])["trace"]
    assert summary["devices"] == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", ["ndjson", "pcap"])
def test_convert_readers_to_parquet(tmp_path, kind, capsys):
    src = write_campusiot_sample(tmp_path) if kind == "ndjson" else write_pcap_sample(tmp_path)
    out = tmp_path / "out.parquet"
    assert _run(["trace", "convert", str(src), str(out)]) == 0
    back = Trace.load(out)
    assert len(back) == (11 if kind == "ndjson" else 9)
    text = capsys.readouterr().out
    assert "written to" in text and ("upstream loss" in text or "PUBLISH" in text)
    assert _run(["trace", "inspect", str(src)]) == 0


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="missing"):
        _run(["trace", "inspect", str(tmp_path / "nope.parquet")])
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ConfigError, match=".pcap"):
        _run(["trace", "inspect", str(tmp_path / "x.txt")])
    src = write_campusiot_sample(tmp_path)
    with pytest.raises(ConfigError, match=".parquet"):
        _run(["trace", "convert", str(src), str(tmp_path / "out.json")])
