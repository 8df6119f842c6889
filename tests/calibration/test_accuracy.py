"""The accuracy a calibrated profile records: computed from a small validation table this test
writes, stored in the profile's provenance, read back by the preset loader."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pubsim.calibration.accuracy import campaign_accuracy, record_accuracy, validation_accuracy
from pubsim.calibration.evidence import read_evidence
from pubsim.calibration.evidence_fit import EvidenceCalibrator, evidence_profile
from pubsim.calibration.profile import build_profile, profile_yaml
from pubsim.cli import main
from pubsim.models import presets
from pubsim.models.params.accuracy import parse_accuracy
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.mapping import from_mapping
from pubsim.sim.errors import ConfigError
from pubsim.sim.safeyaml import safe_load
from tests import ROOT

# (config, split, payload, fanout, publishers, subscribers, cap, sat %, p50 %, p99 %, limit reached)
_CONFIGS = [
    ("a", "train", 64, 1, 1, 1, 0.2, -5.0, 10.0, -20.0, True),
    ("b", "train", 512, 2, 1, 2, 0.2, 3.0, -30.0, 40.0, False),
    ("c", "holdout", 256, 2, 2, 4, 0.4, 12.0, math.nan, -8.0, True),
]


def _campaign(tmp_path):
    runs, val, sat = [], [], []
    for name, split, payload, fanout, pubs, subs, cap, e_sat, e50, e99, reached in _CONFIGS:
        for run in range(2):
            runs.append(
                {
                    "broker": "mosquitto",
                    "config": name,
                    "payload_bytes": payload,
                    "publishers": pubs,
                    "subscribers": subs,
                    "topics": 1,
                    "fanout": fanout,
                    "cpu_cap_fraction": cap,
                    "qos": 0,
                    "run": run,
                    "split": split,
                }
            )
        val.append(
            {
                "broker": "mosquitto",
                "config": name,
                "split": split,
                "saturation_error_pct": e_sat,
                "p50_error_pct": e50,
                "p99_error_pct": e99,
            }
        )
        sat.append({"broker": "mosquitto", "config": name, "split": split, "limit_reached": reached})
    pd.DataFrame(runs).to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame(val).to_csv(tmp_path / "validation-accuracy.csv", index=False)
    pd.DataFrame(sat).to_csv(tmp_path / "saturation.csv", index=False)
    return pd.DataFrame(runs), pd.DataFrame(val), pd.DataFrame(sat)


def _stats(*errors):
    return {
        "n": len(errors),
        "median_abs": float(pd.Series(errors).abs().median()),
        "max_abs": max(abs(e) for e in errors),
        "low": min(errors),
        "high": max(errors),
    }


def test_accuracy_block_from_a_small_validation_table(tmp_path):
    runs, val, sat = _campaign(tmp_path)
    acc = validation_accuracy(val, runs, "mosquitto", saturation=sat, reference="v.csv")
    assert acc["basis"] == "held-out validation" and acc["reference"] == "v.csv"
    # b's limit was not reached: its saturation error is left out, its latency errors kept
    assert acc["train"] == {
        "configurations": 2,
        "saturation_error_pct": _stats(-5.0),
        "p50_error_pct": _stats(10.0, -30.0),
        "p99_error_pct": _stats(-20.0, 40.0),
    }
    assert acc["holdout"] == {
        "configurations": 1,
        "saturation_error_pct": _stats(12.0),
        "p99_error_pct": _stats(-8.0),
    }
    assert "(b)" in acc["note"]
    # the training configurations only; b installs 2 filters (fan-out 2 over 2 subscribers)
    assert acc["fitted_range"] == {
        "payload_bytes": [64, 512],
        "fanout": [1, 2],
        "publishers": [1, 1],
        "cpu_cap_cores": [0.2, 0.2],
        "qos": [0, 0],
        "installed_subscriptions": [1, 2],
    }
    assert parse_accuracy(acc) == acc


def _profile():
    return build_profile(
        name="mosquitto",
        broker_kind="mosquitto",
        demand_params={
            "ingress_cost_s": 2e-6,
            "delivery_cost_s": 5e-6,
            "per_byte_cost_s": 1e-9,
            "idle_wakeup_cost_s": 1e-5,
            "background_cpu_fraction": 0.01,
        },
        link_params={"link_latency_s": 5e-6, "jitter_mean_s": 2e-5, "jitter_cv": 0.5, "n_runs": 3},
        metadata={"data": "runs.csv", "date": "2026-11-25", "n_runs": 6, "rms_residual_s": 1e-6},
    )


def test_record_accuracy_rewrites_only_the_provenance(tmp_path):
    _campaign(tmp_path)
    presets = tmp_path / "presets"
    presets.mkdir()
    before = _profile()
    (presets / "mosquitto.yaml").write_text(profile_yaml(before))
    assert main(["accuracy", str(tmp_path), "--write", str(presets)]) == 0
    after = safe_load((presets / "mosquitto.yaml").read_text())
    expected = campaign_accuracy(tmp_path)["mosquitto"]
    prov = after["broker"]["mosquitto"]["provenance"]
    assert prov.pop("accuracy") == expected
    assert after == before  # nothing else changed
    params = from_mapping(BrokerParams, safe_load((presets / "mosquitto.yaml").read_text())["broker"]["mosquitto"], "b")
    assert params.provenance.accuracy == expected
    # idempotent
    text = (presets / "mosquitto.yaml").read_text()
    assert record_accuracy(tmp_path, presets) == {"mosquitto": presets / "mosquitto.yaml"}
    assert (presets / "mosquitto.yaml").read_text() == text


def test_shipped_profiles_carry_the_accuracy_of_their_data():
    for data, kinds in (
        ("loopback", ("mosquitto", "nats", "zmq-proxy", "rabbitmq-mqtt")),
        ("tier2", ("activemq-mqtt",)),
    ):
        blocks = campaign_accuracy(ROOT / "calibration" / "data" / data)
        for kind in kinds:
            shipped = safe_load((ROOT / "models" / "presets" / "calibrated" / f"{kind}.yaml").read_text())
            got = shipped["broker"][kind]["provenance"]["accuracy"]
            assert {k: v for k, v in got.items() if k != "reference"} == {
                k: v for k, v in blocks[kind].items() if k != "reference"
            }, kind
            assert got["reference"] == f"calibration/data/{data}/validation-accuracy.csv"


def test_evidence_profile_records_its_fit_intervals():
    table = read_evidence(ROOT / "calibration" / "data" / "evidence" / "example.yaml")
    rows = table[table.broker == "mosquitto"].reset_index(drop=True)
    cal = EvidenceCalibrator(n_boot=20, seed=1).fit(rows)
    profile = evidence_profile("mosquitto", rows, cal, source="example.yaml", date="2026-11-25")
    acc = profile["broker"]["mosquitto"]["provenance"]["accuracy"]
    assert acc["basis"] == "evidence fit" and "holdout" not in acc
    p = cal.params_
    identified = [n for n, t in profile["evidence"]["terms"].items() if t.get("ci")]
    assert sorted(acc["fit"]["intervals"]) == sorted(identified)
    assert acc["fit"]["rms_residual_pct"] == pytest.approx(100 * p["rms_relative_error"], abs=0.01)
    assert acc["fitted_range"]["payload_bytes"] == p["ranges"]["payload_bytes"]
    from_mapping(BrokerParams, profile["broker"]["mosquitto"], "b")  # loads as a preset


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"basis": "vibes"}, "provenance.accuracy.basis"),
        ({"basis": "evidence fit", "fitted_range": {"colour": [1, 2]}}, "provenance.accuracy.fitted_range.colour"),
        ({"basis": "evidence fit", "fitted_range": {"fanout": [4, 1]}}, "provenance.accuracy.fitted_range.fanout"),
        (
            {"basis": "held-out validation", "holdout": {"configurations": 1, "p50_error_pct": {"low": 1}}},
            "provenance.accuracy.holdout.p50_error_pct.median_abs",
        ),
        ({"basis": "evidence fit", "surprise": 1}, "provenance.accuracy.surprise"),
    ],
)
def test_bad_accuracy_is_one_config_error(bad, field):
    with pytest.raises(ConfigError) as err:
        parse_accuracy(bad)
    assert err.value.field == field


def test_calibrate_records_the_campaign_accuracy(tmp_path):
    data = ROOT / "calibration" / "data" / "tier2"
    assert main(["calibrate", str(data), "--no-variability", "--write", str(tmp_path)]) == 0
    blocks = campaign_accuracy(data)
    for kind in ("activemq-mqtt", "ejabberd-mqtt"):
        written = safe_load((tmp_path / f"{kind}.yaml").read_text())
        assert written["broker"][kind]["provenance"]["accuracy"] == blocks[kind]


def test_presets_long_shows_the_accuracy_or_says_none(capsys):
    assert main(["presets", "--long", "mosquitto"]) == 0
    out = capsys.readouterr().out
    n = presets.load("broker", "mosquitto")["provenance"]["accuracy"]["holdout"]["configurations"]
    assert f"holdout ({n} configurations)" in out and "fitted range" in out
    assert main(["presets", "--long", "mosquitto-placeholder"]) == 0
    assert "no validation" in capsys.readouterr().out


def test_a_broken_validation_table_is_one_line(tmp_path, capsys):
    _campaign(tmp_path)
    (tmp_path / "validation-accuracy.csv").write_text("broker,split\nmosquitto,train\n")
    assert main(["accuracy", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config" in err
    with pytest.raises(ConfigError):
        parse_accuracy({1: "x", "basis": "evidence fit"})
