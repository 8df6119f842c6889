"""An event loop's sleep entry fitted on counted wake-ups (calibration.sleep).

Unit level: a fake twin whose wake-ups fall with the window as evenly paced
arrivals' would. End to end: a virtual Mosquitto-like campaign (passes, a
wake-up cost, several publishers) made with a known sleep entry; the fit
must find it on the grid, and find none in a campaign made without one.
"""

import math

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.campaign import parse_campaign, read_results, run_campaign
from pubsim.calibration.profile import build_profile
from pubsim.calibration.sleep import SleepEntryCalibrator
from pubsim.calibration.validate import _measured_wakeups, fit_profiles
from pubsim.calibration.virtual import VirtualHarness
from pubsim.sim.errors import ConfigError
from tests.calibration.virtual import virtual_meta


def _runs():
    # gaps after the loop's work: exponential with mean 1 / rate; the measured wake-ups are those of
    # a 12 us window: P(gap >= s) = exp(-rate s)
    rates = np.array([2_000.0, 8_000.0, 20_000.0, 40_000.0, 60_000.0])
    return pd.DataFrame(
        {
            "config": ["a"] * 5,
            "rate_per_s": rates,
            "sustainable": [True] * 5,
            "cap_throttled_period_fraction": [0.0, 0.0, 0.0, 0.0, 0.5],
        }
    ), np.exp(-rates * 12e-6)


def _fake(row, s):
    return {"wakeups_per_ingress": math.exp(-row["rate_per_s"] * s)}


def test_the_window_of_the_counted_wakeups_is_chosen():
    runs, measured = _runs()
    cal = SleepEntryCalibrator(simulate=_fake, grid_s=(0.0, 6e-6, 12e-6, 24e-6), max_runs=5).fit(runs, measured)
    assert cal.params_["sleep_entry_s"] == 12e-6 and cal.params_["identified"]
    assert cal.params_["objective"][12e-6] == pytest.approx(0.0, abs=1e-12)
    # the throttled run and the one whose every message woke the loop (measured 0.976 > 0.95) are left out
    assert cal.params_["n_runs"] == 3


def test_a_window_that_changes_nothing_is_not_identified():
    runs, measured = _runs()
    cal = SleepEntryCalibrator(simulate=lambda row, s: {"wakeups_per_ingress": 0.5}).fit(runs, measured)
    assert cal.params_["sleep_entry_s"] == 0.0 and not cal.params_["identified"]


def test_bad_settings_and_inputs_are_named():
    runs, measured = _runs()
    with pytest.raises(ConfigError, match="grid_s"):
        SleepEntryCalibrator(simulate=_fake, grid_s=(5e-6, 10e-6))
    with pytest.raises(ConfigError, match="min_wakeups"):
        SleepEntryCalibrator(simulate=_fake, min_wakeups=0.9, max_wakeups=0.5)
    with pytest.raises(ConfigError, match="no run"):
        SleepEntryCalibrator(simulate=_fake).fit(runs, np.ones(5))


@pytest.mark.parametrize("wake", ["wakeups", "wakeup_switches"])
def test_measured_wakeups_keep_the_runs_index(wake):
    # a configuration's runs are a slice of a campaign's: the readings must stay on its labels
    rows = pd.DataFrame(
        {"config": ["a"] * 3, "ingress_rate_per_s": [200.0, 1000.0, 4000.0], "wakeups_per_ingress": [3.0, 1.5, 0.3]},
        index=[17, 18, 19],
    )
    got = _measured_wakeups(rows, wake)
    assert list(got.index) == [17, 18, 19]
    expect = [1.0, 0.5, 0.1] if wake == "wakeup_switches" else [1.0, 1.0, 0.3]  # over those of one wake-up
    assert got.tolist() == pytest.approx(expect)


TRUE = {
    "ingress_cost_s": 8e-6,
    "delivery_cost_s": 4e-6,
    "per_byte_cost_s": 0.0,
    "idle_wakeup_cost_s": 15e-6,
    "pass_cost_s": 3e-6,
}
LINK = {"link_latency_s": 20e-6, "jitter_mean_s": 40e-6, "jitter_cv": 1.0, "n_runs": 1}  # spreads a batch
CAMPAIGN = {
    "name": "virtual-sleep",
    "brokers": ["mosquitto"],
    "run": {"duration": "1.5s", "warmup": "0.3s", "cooldown": "0.1s"},
    "light_rates": ["300/s", "1500/s", "3000/s", "6000/s", "12000/s"],
    "search": {"start_rate": "64000/s", "steps": 4, "max_doublings": 8},
    "fractions": [0.5],
    "configurations": [
        {"name": "c1", "payload_bytes": 64, "subscribers": 1, "fanout": 1, "publishers": 1},
        {"name": "c8", "payload_bytes": 64, "subscribers": 8, "topics": 8, "fanout": 1, "publishers": 8},
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("true_s", [0.0, 20e-6])
def test_the_true_sleep_entry_is_recovered(tmp_path_factory, true_s):
    out = tmp_path_factory.mktemp(f"sleep{true_s}")
    meta = virtual_meta(cpu_cap_fraction=1.0)
    truth = build_profile(
        name="mosquitto",
        broker_kind="mosquitto",
        demand_params={**TRUE, "sleep_entry_s": true_s},
        link_params=LINK,
        metadata=meta,
    )
    run_campaign(parse_campaign(CAMPAIGN), out, VirtualHarness({"mosquitto": truth}, seed=3))
    runs, _, _, meta = read_results(out)
    prof = fit_profiles(runs, meta, background=False, method="joint", n_boot=0, connection_form="per_pass")
    broker = prof["mosquitto"]["broker"]["mosquitto"]
    found_s = float(broker.get("sleep_entry_s", "0us").removesuffix("us")) * 1e-6
    # the fitted link's jitter is not the truth's, so the twin's arrival gaps are not either: the
    # window is found within a grid step of the truth, and none where the truth has none
    assert (10e-6 <= found_s <= 30e-6) if true_s else found_s == 0.0
    assert (
        "training runs whose wake-ups a window changes (mean |log ratio| by sleep entry" in broker["provenance"]["note"]
    )
