"""Measure -> fit -> validate a broker whose idle core takes time to wake (BrokerParams.idle_exit).

The simulator plays the broker with a known idle-exit curve, and the
virtual harness reports that curve before each pair (as the real harness
measures it, ``pair_facts``). With the curve, the fit must carry it into
the profile and fit the links over the simulated path, so that the light
runs' medians come out right at every rate; without it (the control) one
link cannot serve both the 200 msg/s runs (5 ms idle: 60 us exit) and the
2000 msg/s ones (0.5 ms idle: 5 us).
"""

import numpy as np
import pytest

from pubsim.calibration.campaign import parse_campaign, read_results, run_campaign
from pubsim.calibration.profile import build_profile
from pubsim.calibration.validate import fit_profiles, idle_exit_preset, pair_machine, validate
from pubsim.calibration.virtual import VirtualHarness
from tests.calibration.virtual import virtual_meta

TRUE = {"ingress_cost_s": 6e-6, "delivery_cost_s": 3e-6, "per_byte_cost_s": 0.0, "idle_wakeup_cost_s": 5e-6}
LINK = {"link_latency_s": 30e-6, "jitter_mean_s": 4e-6, "jitter_cv": 1.0, "n_runs": 1}
CURVE = {"idle_s": [1e-4, 5e-4, 5e-3], "exit_s": [1e-6, 5e-6, 6e-5], "method": "truth", "messages": 0}
META = virtual_meta(cpu_cap_fraction=0.2)
CAMPAIGN = {
    "name": "virtual-exit",
    "brokers": ["mosquitto"],
    "run": {"duration": "1.2s", "warmup": "0.3s", "cooldown": "0.1s"},
    "light_rates": ["200/s", "2000/s"],
    "search": {"start_rate": "64000/s", "steps": 6, "max_doublings": 6},
    "fractions": [0.5],
    "configurations": [
        {"name": "f1-64", "payload_bytes": 64, "subscribers": 1, "fanout": 1, "cpu_cap_fraction": 0.2},
        {"name": "f2-64", "payload_bytes": 64, "subscribers": 2, "fanout": 2, "cpu_cap_fraction": 0.2},
        {
            "name": "f1-256",
            "payload_bytes": 256,
            "subscribers": 1,
            "fanout": 1,
            "cpu_cap_fraction": 0.3,
            "split": "holdout",
        },
    ],
}


class ExitHarness(VirtualHarness):
    """The virtual harness, telling the machine's idle-exit curve before each pair as the real one does."""

    def pair_facts(self, broker, config):
        return {"idle_exit": dict(CURVE)}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    truth = build_profile(
        name="mosquitto",
        broker_kind="mosquitto",
        demand_params=TRUE,
        link_params=LINK,
        metadata=META,
        idle_exit={"idle_s": CURVE["idle_s"], "exit_s": CURVE["exit_s"]},
    )
    out = tmp_path_factory.mktemp("virtual-exit")
    run_campaign(parse_campaign(CAMPAIGN), out, ExitHarness({"mosquitto": truth}, seed=5))
    return read_results(out)


def _light_p50_errors(measured, idle_exit_on):
    runs, sat, lat, meta = measured
    profiles = fit_profiles(runs, meta, n_boot=0, idle_exit_on=idle_exit_on)
    v = validate(runs, sat, lat, profiles, steps=6, machine=pair_machine(meta) if idle_exit_on else None)
    light = v.per_run[v.per_run["phase"] == "light"]
    return profiles["mosquitto"], light.set_index(["config", "rate_per_s"])["p50_error_pct"]


def test_the_campaign_keeps_each_pairs_curve_and_the_profile_their_median(measured):
    *_, meta = measured
    assert set(meta["pair_facts"]) == {"mosquitto/f1-64", "mosquitto/f2-64", "mosquitto/f1-256"}
    preset = idle_exit_preset(meta)
    assert preset["idle_s"] == CURVE["idle_s"] and preset["exit_s"] == CURVE["exit_s"]
    assert "median of 3 curves" in preset["provenance"]["reference"]


def test_with_the_curve_light_medians_are_right_at_every_rate(measured):
    profile, err = _light_p50_errors(measured, True)
    assert profile["broker"]["mosquitto"]["idle_exit"]["exit_s"] == CURVE["exit_s"]
    assert np.abs(err).max() < 12, err.round(1).to_dict()


def test_without_it_one_link_misses_one_rate_or_the_other(measured):
    profile, err = _light_p50_errors(measured, False)
    assert "idle_exit" not in profile["broker"]["mosquitto"]
    assert np.abs(err).max() > 25, err.round(1).to_dict()
