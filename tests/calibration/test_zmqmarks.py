"""The ZeroMQ high-water marks of campaign runs: one rule, and fits that refuse mixed marks."""

import math
from pathlib import Path

import pandas as pd
import pytest

from pubsim.calibration.campaign import RunSpec, read_results
from pubsim.calibration.iofit import fit_io_profiles
from pubsim.calibration.validate import fit_profiles
from pubsim.calibration.zmqmarks import check_one_marks, client_mark, marks_note, marks_of
from pubsim.cli import main
from pubsim.sim.errors import ConfigError

DATA = Path(__file__).resolve().parents[2] / "calibration" / "data"


@pytest.mark.parametrize(
    ("proxy", "clients", "expected"),
    [(None, None, None), (0, None, 0), (1000, 0, 0), (0, 1000, 1000), (math.nan, math.nan, None), (5.0, math.nan, 5)],
)
def test_the_clients_follow_the_proxy_mark_unless_given_apart(proxy, clients, expected):
    assert client_mark(proxy, clients) == expected


def test_a_run_spec_and_its_csv_row_give_the_same_marks():
    spec = RunSpec(
        broker="zmq-proxy",
        config="c",
        payload_bytes=64,
        publishers=1,
        subscribers=1,
        topics=1,
        fanout=1,
        rate_per_s=100.0,
        duration_s=1.0,
        warmup_s=0.1,
        cooldown_s=0.1,
        zmq_hwm=0,
    )
    row = pd.DataFrame([spec.as_row()]).to_dict("records")[0]  # as runs.csv gives it back: NaN for unset
    assert spec.client_hwm == 0 and marks_of(row) == (0, 0)


def test_the_note_names_both_marks_and_says_nothing_for_the_defaults():
    assert marks_note({}) == ""
    assert marks_note({"zmq_hwm": math.nan, "zmq_client_hwm": math.nan}) == ""
    assert marks_note({"zmq_hwm": 0}) == "ZeroMQ high-water marks (0 = none): proxy 0, clients 0"
    assert marks_note({"zmq_client_hwm": 0}).endswith("proxy 1000 (ZeroMQ's default), clients 0")


def test_runs_of_one_set_of_marks_pass_the_check():
    for folder in ("zmq-nomarks", "zmq-caps", "loopback"):  # no marks; default marks; no mark columns at all
        runs = read_results(DATA / folder)[0]
        for _, rows in runs.groupby("broker"):
            check_one_marks(rows)


def test_a_fit_over_runs_of_different_marks_is_refused_naming_the_field():
    runs, _, _, meta = read_results(DATA / "zmq-hwm-side")
    runs = runs.assign(split="train")
    for fit in (fit_profiles, fit_io_profiles):
        with pytest.raises(ConfigError, match=r"zmq-proxy runs zmq_hwm: .*proxy 0, clients 1000.*fit or validate"):
            fit(runs, meta)


def test_calibrate_says_so_in_one_line(tmp_path, capsys):
    assert main(["calibrate", str(DATA / "zmq-hwm-side"), "--write", str(tmp_path), "--no-variability"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pubsim: error: zmq-proxy runs zmq_hwm:") and "\n" not in err
    assert not list(tmp_path.iterdir())
