"""Measure -> fit -> validate against a known ground truth (the virtual harness).

The simulator plays the broker with known costs; the campaign, the fit and
the validation must then recover those costs and report small errors. A
wrong fit (a profile with doubled costs) must show large errors.
"""

import math

import pandas as pd
import pytest

from pubsim.calibration.campaign import parse_campaign, read_results, run_campaign
from pubsim.calibration.profile import build_profile
from pubsim.calibration.validate import bracket_error_pct, fit_profiles, validate
from pubsim.calibration.virtual import VirtualHarness
from tests.calibration.virtual import virtual_meta

TRUE = {"ingress_cost_s": 6e-6, "delivery_cost_s": 3e-6, "per_byte_cost_s": 2e-9, "idle_wakeup_cost_s": 10e-6}
LINK = {"link_latency_s": 30e-6, "jitter_mean_s": 5e-6, "jitter_cv": 1.0, "n_runs": 1}
META = virtual_meta(cpu_cap_fraction=0.2)

CAMPAIGN = {
    "name": "virtual",
    "brokers": ["mosquitto"],
    "run": {"duration": "1.2s", "warmup": "0.3s", "cooldown": "0.1s"},
    "light_rates": ["300/s", "1000/s"],
    "search": {"start_rate": "64000/s", "steps": 10, "max_doublings": 8},
    "fractions": [0.5, 0.8, 1.3],
    "configurations": [
        {"name": "f1-64", "payload_bytes": 64, "subscribers": 1, "fanout": 1, "cpu_cap_fraction": 0.2},
        {"name": "f1-1024", "payload_bytes": 1024, "subscribers": 1, "fanout": 1, "cpu_cap_fraction": 0.2},
        {"name": "f3-64", "payload_bytes": 64, "subscribers": 3, "fanout": 3, "cpu_cap_fraction": 0.2},
        {
            "name": "f2-256",
            "payload_bytes": 256,
            "publishers": 2,
            "subscribers": 2,
            "topics": 2,
            "fanout": 2,
            "cpu_cap_fraction": 0.3,
            "split": "holdout",
        },
    ],
}


def profile(scale=1.0, jitter_on="every_packet"):
    return build_profile(
        name="mosquitto",
        broker_kind="mosquitto",
        demand_params={k: v * scale for k, v in TRUE.items()},
        link_params=LINK,
        metadata=META,
        jitter_on=jitter_on,
    )


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = tmp_path_factory.mktemp("virtual")
    run_campaign(parse_campaign(CAMPAIGN), out, VirtualHarness({"mosquitto": profile()}, seed=3))
    return read_results(out)


@pytest.fixture(scope="module")
def results_dir(measured, tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "virtual0"


def test_fit_recovers_the_true_costs(measured):
    runs, _, _, meta = measured
    fitted = fit_profiles(runs, meta, method="joint", background=False)["mosquitto"]["broker"]["mosquitto"]
    from pubsim.models.params.broker import BrokerParams
    from pubsim.models.params.mapping import from_mapping

    p = from_mapping(BrokerParams, fitted, "fitted")
    assert p.ingress_cost_s.mean == pytest.approx(TRUE["ingress_cost_s"], rel=0.1)
    assert p.delivery_cost_s.mean == pytest.approx(TRUE["delivery_cost_s"], rel=0.1)
    assert p.idle_wakeup_cost_s == pytest.approx(TRUE["idle_wakeup_cost_s"], rel=0.1)
    assert p.provenance.source.value == "measured"


def test_knee_fit_anchors_the_busy_costs(measured):
    # the default two-stage fit: busy costs from the runs nearest each limit
    from pubsim.models.params.broker import BrokerParams
    from pubsim.models.params.mapping import from_mapping

    runs, _, _, meta = measured
    p = from_mapping(BrokerParams, fit_profiles(runs, meta)["mosquitto"]["broker"]["mosquitto"], "knee")
    busy = p.ingress_cost_s.mean + p.delivery_cost_s.mean + 128 * p.per_byte_cost_s
    true = TRUE["ingress_cost_s"] + TRUE["delivery_cost_s"] + 128 * TRUE["per_byte_cost_s"]
    assert busy == pytest.approx(true, rel=0.1)


def test_validation_of_the_fitted_profile_is_accurate(measured):
    runs, sat, lat, meta = measured
    v = validate(runs, sat, lat, fit_profiles(runs, meta))
    assert set(v.per_pair.split) == {"train", "holdout"}
    assert v.per_pair.saturation_error_pct.abs().max() <= 10
    below = v.per_run[v.per_run.below_saturation]
    assert below.p50_error_pct.abs().median() <= 10
    assert below.ks_distance.median() <= 0.2
    above = v.per_run[~v.per_run.below_saturation]
    assert len(above) and above.shortfall_error_pp.abs().median() <= 5


def test_bracket_error_is_zero_inside_the_two_stamp_estimates_and_against_the_nearer_end_outside():
    assert bracket_error_pct(2.0, 1.0, 4.0) == 0.0
    assert bracket_error_pct(2.0, 4.0, 1.0) == 0.0  # whichever estimate is larger
    assert bracket_error_pct(0.5, 1.0, 4.0) == pytest.approx(-50.0)
    assert bracket_error_pct(6.0, 1.0, 4.0) == pytest.approx(50.0)
    assert math.isnan(bracket_error_pct(2.0, 1.0, math.nan))


def test_validation_reports_latency_against_the_stamp_interval(measured):
    """Runs whose every-message estimate is ten times the own-stamp one: a simulated p50 between
    the two has no bracket error; below them the bracket error is the plain one."""
    runs, sat, lat, meta = measured
    runs = runs.assign(latency_any_p50_s=10 * runs["latency_p50_s"], latency_any_p99_s=runs["latency_p99_s"])
    below = validate(runs, sat, lat, fit_profiles(runs, meta)).per_run.query("below_saturation")
    plain, bracket = below["p50_error_pct"], below["p50_bracket_error_pct"]
    inside = (plain >= 0) & (plain <= 900)
    assert inside.any() and (bracket[inside] == 0).all()
    assert (bracket[plain < 0] == plain[plain < 0]).all()
    assert (below["p99_bracket_error_pct"] == below["p99_error_pct"]).all()  # a zero-width interval


def test_validation_exposes_a_wrong_profile(measured):
    runs, sat, lat, _ = measured
    v = validate(runs, sat, lat, {"mosquitto": profile(scale=2.0)})
    assert v.per_pair.saturation_error_pct.max() <= -35  # twice the cost: about half the limit


def test_calibrate_and_validate_commands(results_dir, tmp_path, capsys):
    from pubsim.cli import main

    assert main(["calibrate", str(results_dir)]) == 0
    out = capsys.readouterr().out
    assert "source: measured" in out and "loopback-mosquitto" in out
    assert main(["validate", str(results_dir), "--report", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert "f2-256" in out and "holdout" in out
    acc = pd.read_csv(tmp_path / "rep" / "accuracy.csv")
    assert len(acc) == 4 and acc.meets_saturation_error_pct.all()
    assert (tmp_path / "rep" / "cdf-mosquitto-f1-64.png").stat().st_size > 1000
    assert (tmp_path / "rep" / "saturation-mosquitto-f2-256.png").exists()


def test_calibrate_with_the_wake_curve_says_why_a_campaign_without_one_has_none(results_dir, capsys):
    # the virtual campaign records no reader wake-ups by idle time (meta.json idle_exit wake_idle_s)
    from pubsim.cli import main

    assert main(["calibrate", str(results_dir), "--wake-work", "--no-variability"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "wake_curve:" not in out and "no measured wake-ups by idle time" in out


def test_validate_on_a_missing_directory_is_one_line(tmp_path, capsys):
    from pubsim.cli import main

    assert main(["validate", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pubsim: error: results") and "\n" not in err and "runs.csv" in err


def test_calibrate_write_goes_to_the_user_preset_folder_never_the_package(tmp_path):
    """`pubsim calibrate --write` saves profiles in $PUBSIM_PRESETS (not site-packages); they then
    load by name and shadow the shipped calibrated profile, saying so."""
    import os
    import subprocess
    import sys

    from tests import ROOT

    env = {**os.environ, "PUBSIM_PRESETS": str(tmp_path / "presets"), "COLUMNS": "200"}
    shipped = sorted(p.stat().st_mtime_ns for p in (ROOT / "models" / "presets" / "calibrated").glob("*.yaml"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pubsim",
            "calibrate",
            str(ROOT / "calibration" / "data" / "tier2"),  # a small real campaign (about 20 s to fit)
            "--no-variability",
            "--write",
        ],
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "presets" / "activemq-mqtt.yaml").is_file()
    assert sorted(p.stat().st_mtime_ns for p in (ROOT / "models" / "presets" / "calibrated").glob("*.yaml")) == shipped
    show = subprocess.run(
        [sys.executable, "-m", "pubsim", "presets", "--long", "activemq-mqtt"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    text = " ".join(show.stdout.replace("│", " ").split())  # the note wraps inside the table's borders
    assert show.returncode == 0 and "shadows the built-in activemq-mqtt" in text


def test_tick_stalls_are_fitted_on_the_training_split_only(measured):
    from pubsim.calibration.cli import _tick_stalls

    runs, _, lat, _ = measured
    base = _tick_stalls(runs, lat)
    assert 0 <= base.rate_per_s < 1.0  # the virtual campaign has no stalls
    held = runs.loc[runs.split == "holdout", "config"].unique()
    late = lat.copy()
    sel = late.config.isin(held) & (late.groupby(["config", "run"]).cumcount() % 10 == 0)
    late.loc[sel, "latency_s"] += 2e-3  # a tenth of every held-out message late by half a tick
    assert _tick_stalls(runs, late).rate_per_s == base.rate_per_s
    train = runs.loc[runs.split == "train", "config"].unique()
    sel = late.config.isin(train) & (late.groupby(["config", "run"]).cumcount() % 10 == 0)
    late.loc[sel, "latency_s"] += 2e-3
    assert _tick_stalls(runs, late).rate_per_s > base.rate_per_s + 1.0


def test_calibrated_link_jitter_can_be_paid_by_idle_receivers_only():
    """A fitted loopback link can pay its jitter only when the receiver is idle (messages arriving
    while it wakes up are read with the one that woke it; opt-in, the default is every_packet); the
    twin's links take it from the profile, and a preset written before the field existed loads with
    every_packet."""
    from pubsim.calibration.profile import check_profile
    from pubsim.calibration.virtual import topology_for
    from pubsim.models import presets
    from pubsim.models import topology as T
    from pubsim.models.params.link import LinkParams
    from pubsim.models.params.mapping import from_mapping

    ((_, plain),) = profile()["link"].items()
    assert "jitter_on" not in plain and "idle_receiver" not in plain["provenance"]["note"]  # the default
    prof = check_profile(profile(jitter_on="idle_receiver"))
    ((_, link),) = prof["link"].items()
    assert link["jitter_on"] == "idle_receiver"
    assert "idle_receiver" in link["provenance"]["note"] and "wake" in link["provenance"]["note"]
    row = {
        "broker": "mosquitto",
        "payload_bytes": 64,
        "publishers": 1,
        "subscribers": 2,
        "topics": 1,
        "fanout": 2,
        "rate_per_s": 4000.0,
        "duration_s": 0.2,
        "cpu_cap_fraction": 0.5,
    }
    g = topology_for(row, prof)
    assert {data[T.PARAMS].jitter_on for _, _, data in g.edges(data=True)} == {"idle_receiver"}
    # a link preset written before jitter_on existed (the shipped ones now carry the fit's choice)
    old = {k: v for k, v in presets.load("link", "loopback-mosquitto").items() if k != "jitter_on"}
    assert from_mapping(LinkParams, old, "link.loopback-mosquitto").jitter_on == "every_packet"
