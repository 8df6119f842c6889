"""Service-time variability chosen by simulation (calibration.variability).

A virtual campaign whose broker has gamma-distributed costs of a known
coefficient of variation: the calibrator must pick that cv from a grid, and
a constant-cost campaign must give cv 0.
"""

import math

import pandas as pd
import pytest

from pubsim.calibration.campaign import parse_campaign, read_results, run_campaign
from pubsim.calibration.profile import build_profile
from pubsim.calibration.validate import fit_profiles
from pubsim.calibration.variability import ServiceVariabilityCalibrator
from pubsim.calibration.virtual import VirtualHarness
from pubsim.sim.errors import ConfigError
from tests.calibration.virtual import virtual_meta

TRUE = {"ingress_cost_s": 20e-6, "delivery_cost_s": 10e-6, "per_byte_cost_s": 0.0, "idle_wakeup_cost_s": 0.0}
LINK = {"link_latency_s": 20e-6, "jitter_mean_s": 2e-6, "jitter_cv": 0.5, "n_runs": 1}
META = virtual_meta(cpu_cap_fraction=1.0)
CAMPAIGN = {
    "name": "virtual-cv",
    "brokers": ["mosquitto"],
    "run": {"duration": "2s", "warmup": "0.4s", "cooldown": "0.1s"},
    "light_rates": ["300/s"],
    "search": {"start_rate": "64000/s", "steps": 6, "max_doublings": 8},
    "fractions": [0.5, 0.7, 0.85],
    "configurations": [{"name": "f1-64", "payload_bytes": 64, "subscribers": 1, "fanout": 1, "publishers": 1}],
}


def _campaign(tmp_path_factory, cv):
    out = tmp_path_factory.mktemp(f"cv{cv}")
    truth = build_profile(
        name="mosquitto", broker_kind="mosquitto", demand_params=TRUE, link_params=LINK, metadata=META, service_cv=cv
    )
    run_campaign(parse_campaign(CAMPAIGN), out, VirtualHarness({"mosquitto": truth}, seed=5))
    return read_results(out)


@pytest.mark.slow
@pytest.mark.parametrize("true_cv", [0.0, 1.5])
def test_the_true_cv_is_recovered(tmp_path_factory, true_cv):
    runs, _, _, meta = _campaign(tmp_path_factory, true_cv)
    prof = fit_profiles(runs, meta, background=False, method="joint", variability=True, cv_grid=(0.0, 1.5, 3.0))[
        "mosquitto"
    ]["broker"]["mosquitto"]
    if true_cv:
        assert prof["ingress_cost_s"].startswith("gamma(") and "cv=1.5" in prof["ingress_cost_s"]
    else:
        assert not prof["ingress_cost_s"].startswith("gamma(")
    assert "chosen from [0.0, 1.5, 3.0]" in prof["provenance"]["note"]


def _rows(cv_true, n=3):
    # P-K shape: excess latency grows with (1 + cv^2)
    return pd.DataFrame(
        {
            "config": ["c"] * n,
            "ingress_rate_per_s": [500.0, 600.0, 700.0][:n],
            "demand_s_per_ingress": [1e-3] * n,
            "latency_p01_s": [1e-4] * n,
            **{
                f"latency_{q}_s": [1e-4 + k * (1 + cv_true**2) * 1e-3] * n
                for q, k in (("p50", 1), ("p90", 3), ("p99", 8))
            },
        }
    )


def _fake(row, cv):
    k = 1 + cv**2
    return {
        "latency_p50_s": 1e-4 + k * 1e-3,
        "latency_p90_s": 1e-4 + 3 * k * 1e-3,
        "latency_p99_s": 1e-4 + 8 * k * 1e-3,
    }


def test_calibrator_picks_the_grid_point_closest_in_log_ratio():
    cal = ServiceVariabilityCalibrator(simulate=_fake, cv_grid=(0.0, 0.5, 1.0, 2.0)).fit(_rows(1.0))
    assert cal.params_["service_cv"] == 1.0
    assert cal.params_["objective"][1.0] == pytest.approx(0.0, abs=1e-12)
    ratios = [math.log((1e-4 + k * 5e-3) / (1e-4 + k * 2e-3)) for k in (1, 3, 8)]
    assert cal.params_["objective"][2.0] == pytest.approx(sum(ratios) / 3)
    assert cal.residuals_.abs().max() < 1e-12 and len(cal.residuals_) == 3


def test_runs_outside_the_utilization_band_are_not_used():
    rows = _rows(1.0)
    rows["ingress_rate_per_s"] = [100.0, 950.0, 600.0]  # utilization 0.1, 0.95, 0.6
    cal = ServiceVariabilityCalibrator(simulate=_fake, cv_grid=(0.0, 1.0)).fit(rows)
    assert cal.params_["n_runs"] == 1 and list(cal.residuals_.index) == [2]


def test_runs_the_cpu_quota_throttled_are_not_used():
    # run 0's tails are periods waited out (cv 2 would fit them); runs 1 and 2 say cv 1
    rows = pd.concat([_rows(2.0, n=1), _rows(1.0).iloc[1:]], ignore_index=True)
    rows["cap_throttled_period_fraction"] = [0.2, 0.0, float("nan")]  # NaN: not measured, kept
    cal = ServiceVariabilityCalibrator(simulate=_fake, cv_grid=(0.0, 1.0, 2.0)).fit(rows)
    assert cal.params_["service_cv"] == 1.0 and sorted(cal.residuals_.index) == [1, 2]
    everything = ServiceVariabilityCalibrator(simulate=_fake, cv_grid=(0.0, 1.0, 2.0), max_throttled_fraction=1.0)
    assert everything.fit(rows).params_["n_runs"] == 3


def test_no_run_in_the_band_is_a_one_line_error():
    rows = _rows(1.0)
    rows["ingress_rate_per_s"] = 10.0
    with pytest.raises(ConfigError, match="utilization"):
        ServiceVariabilityCalibrator(simulate=_fake).fit(rows)
    with pytest.raises(ConfigError, match="cv_grid"):
        ServiceVariabilityCalibrator(simulate=_fake, cv_grid=(-1.0,))
