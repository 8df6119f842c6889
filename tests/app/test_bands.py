"""Predictions carry their model's error band: RunResult.accuracy(), summary() and `pubsim run`
give each broker's held-out band and warn when a run leaves the profile's fitted range."""

from __future__ import annotations

import math

import pytest
import yaml

from pubsim.cli import main
from pubsim.models import presets
from pubsim.models import topology as T
from pubsim.scenario import parse_scenario


def _scenario(preset="mosquitto", *, payload="128B", subscribers=2, cpu_fraction=0.2, publishers=1):
    return {
        "name": "bands",
        "seed": 3,
        "run": {"duration": "0.3s", "warmup": "0.1s", "record": "stream"},
        "topology": {
            "builder": "star",
            "protocol": "mqtt",
            "broker": {"preset": preset, "cpu_fraction": cpu_fraction},
            "link": {"preset": "gigabit-lan"},
            "publishers": [
                {
                    "name": "p{i}",
                    "count": publishers,
                    "topics": ["pubsim/t0"],
                    "arrival": "poisson",
                    "rate_per_s": "500/s",
                    "size_bytes": payload,
                }
            ],
            "subscribers": [{"name": "s{i}", "count": subscribers, "subscriptions": ["pubsim/t0"]}],
        },
    }


def _run(**kwargs):
    return parse_scenario(_scenario(**kwargs), ".").simulate(0)


def _recorded(name):
    return presets.load("broker", name)["provenance"]["accuracy"]


def test_a_calibrated_preset_inside_its_range_has_its_band_and_no_warning():
    acc = _recorded("mosquitto")
    fitted = acc["fitted_range"]
    # the scenario lies inside the fitted range (checked here, not assumed)
    assert fitted["payload_bytes"][0] <= 128 <= fitted["payload_bytes"][1]
    assert fitted["fanout"][0] <= 2 <= fitted["fanout"][1] and fitted["cpu_cap_cores"] == [0.2, 0.2]
    r = _run()
    (row,) = r.accuracy().to_dict("records")
    held = acc["holdout"]
    assert row["validation"] == "held-out" and row["holdout_configurations"] == held["configurations"]
    for m in ("saturation", "p50", "p99"):
        assert (row[f"{m}_error_low_pct"], row[f"{m}_error_high_pct"]) == (
            held[f"{m}_error_pct"]["low"],
            held[f"{m}_error_pct"]["high"],
        )
    assert row["extrapolated"] == "" and row["extrapolation"] == ""
    s = r.summary()
    assert s["model_validation"] == "held-out" and s["model_extrapolation"] == ""
    assert s["model_saturation_error_low_pct"] == held["saturation_error_pct"]["low"]
    assert s["model_p99_error_high_pct"] == held["p99_error_pct"]["high"]
    assert f"{held['saturation_error_pct']['low']:+.0f}" in s["model_band"]


@pytest.mark.parametrize(
    "kwargs, flagged, text",
    [
        ({"payload": "4096B"}, ["payload_bytes"], "payload_bytes 4096 outside the fitted 64..1024"),
        ({"cpu_fraction": 1.0}, ["cpu_cap_cores"], "cpu_cap_cores 1 outside the fitted 0.2"),
        ({"subscribers": 8}, ["fanout", "installed_subscriptions"], "fanout 8 outside the fitted 1..4"),
        ({"publishers": 3}, ["publishers"], "publishers 3 outside the fitted 1"),
    ],
)
def test_extrapolation_is_flagged_with_value_and_range(kwargs, flagged, text):
    r = _run(**kwargs)
    (row,) = r.accuracy().to_dict("records")
    assert row["extrapolated"].split(", ") == flagged
    assert text in row["extrapolation"]
    assert text in r.summary()["model_extrapolation"]
    assert row["validation"] == "held-out"  # a warning, not a lost band


def test_a_placeholder_preset_says_no_validation():
    r = _run(preset="mosquitto-placeholder", cpu_fraction=1.0)
    (row,) = r.accuracy().to_dict("records")
    assert row["validation"] == "none" and row["source"] == "placeholder"
    assert "no validation" in row["band"] and row["extrapolation"] == ""
    s = r.summary()
    assert s["model_validation"] == "none" and "no validation" in s["model_band"]
    assert all(math.isnan(s[f"model_{m}_error_{e}_pct"]) for m in ("saturation", "p50", "p99") for e in ("low", "high"))


def test_graphml_keeps_the_accuracy(tmp_path):
    g = parse_scenario(_scenario(), ".").topology
    T.write_graphml(g, tmp_path / "g.graphml")
    h = T.read_graphml(tmp_path / "g.graphml")
    assert h.nodes["broker"][T.PARAMS].provenance == g.nodes["broker"][T.PARAMS].provenance
    assert h.nodes["broker"][T.PARAMS].provenance.accuracy == _recorded("mosquitto")


def test_pubsim_run_prints_the_band_and_the_warning(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(_scenario(cpu_fraction=1.0)))
    assert main(["run", str(f)]) == 0
    out = capsys.readouterr().out
    held = _recorded("mosquitto")["holdout"]["saturation_error_pct"]
    assert "model accuracy" in out and f"{held['low']:+.0f} .. {held['high']:+.0f} %" in out
    assert "outside the profile's fitted range" in out and "cpu_cap_cores 1 outside the fitted 0.2" in out
    f.write_text(yaml.safe_dump(_scenario()))
    assert main(["run", str(f)]) == 0
    assert "fitted range" not in capsys.readouterr().out


def test_overriding_a_fitted_cost_drops_the_band_but_a_cap_keeps_it():
    raw = _scenario()
    raw["topology"]["broker"]["ingress_cost_s"] = "50us"
    (row,) = parse_scenario(raw, ".").simulate(0).accuracy().to_dict("records")
    assert row["validation"] == "none" and math.isnan(row["saturation_error_low_pct"])
    prov = parse_scenario(raw, ".").topology.nodes["broker"][T.PARAMS].provenance
    assert prov.accuracy is None and "ingress_cost_s overridden" in prov.note
    assert _run(cpu_fraction=0.5).accuracy()["validation"].iloc[0] == "held-out"


def test_saturate_lines_give_the_real_limit_the_band_implies():
    from pubsim.analysis.saturate_cli import model_lines
    from pubsim.bands import accuracy_table

    sat = _recorded("mosquitto")["holdout"]["saturation_error_pct"]
    table = accuracy_table(parse_scenario(_scenario(cpu_fraction=1.0), ".").topology)
    lines = [text for text, _ in model_lines(table, 10_000.0)]
    low, high = 10_000.0 / (1 + sat["high"] / 100), 10_000.0 / (1 + sat["low"] / 100)
    assert any(f"{low:,.0f} .. {high:,.0f} msg/s" in t for t in lines)
    assert any(t.startswith("warning:") and "cpu_cap_cores 1" in t for t in lines)
    assert any(f"> {low:,.0f} msg/s" in t for t, _ in model_lines(table, 10_000.0, lower_bound=True))
    placeholder = accuracy_table(parse_scenario(_scenario("mosquitto-placeholder"), ".").topology)
    (only,) = model_lines(placeholder, 10_000.0)
    assert "no validation" in only[0]


def test_each_broker_of_a_chain_has_its_row_and_a_transit_broker_is_checked_on_its_cpu():
    from pubsim.bands import accuracy_table, summary_fields
    from pubsim.models.params.broker import BrokerParams
    from pubsim.models.params.client import PublisherParams, SubscriberParams
    from pubsim.models.params.link import LinkParams
    from pubsim.models.params.mapping import from_mapping
    from pubsim.sim.distributions import Constant

    calibrated = from_mapping(BrokerParams, {**presets.load("broker", "mosquitto"), "cpu_fraction": 0.2}, "b")
    placeholder = from_mapping(BrokerParams, presets.load("broker", "mosquitto-placeholder"), "b")
    g = T.chain(
        brokers={"b0": calibrated, "b1": calibrated, "b2": placeholder},
        bridge=LinkParams(latency_s=1e-4),
        publishers={"p": ("b0", PublisherParams(topics=("t",), rate_per_s=10.0, size_bytes=Constant(value=128.0)))},
        subscribers={f"s{i}": ("b2", SubscriberParams(subscriptions=("t",))) for i in range(2)},
        link=LinkParams(latency_s=1e-4),
    )
    t = accuracy_table(g).set_index("broker")
    assert list(t["validation"]) == ["held-out", "held-out", "none"]
    # b0: one publisher, no local subscriber (fan-out 0 below the fitted range); b1 has no clients:
    # only its CPU is checked, and 0.2 core is the fitted cap
    assert t.loc["b0", "extrapolated"] == "fanout, installed_subscriptions"
    assert t.loc["b1", "extrapolation"] == ""
    f = summary_fields(t.reset_index())
    assert f["model_validation"] == "held-out, none"
    assert math.isnan(f["model_saturation_error_low_pct"])  # no band for the whole run: b2 has none
    assert f["model_extrapolation"].startswith("b0: fanout 0 outside the fitted")
    assert "b0, b1: held out (" in f["model_band"] and " | b2: no validation" in f["model_band"]
