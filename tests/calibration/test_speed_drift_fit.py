"""SpeedDriftCalibrator: recovers a known drift from throttled fractions of simulated runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.drift import MAX_LOG_SD, SpeedDriftCalibrator, _Fluid
from pubsim.calibration.profile import build_profile, check_profile


def runs_table(utilization, throttled=None):
    n = len(utilization)
    return pd.DataFrame(
        {
            "config": [f"c{i % 3}" for i in range(n)],
            "rate_per_s": 1000.0 * np.arange(1, n + 1),
            "sustainable": True,
            "cpu_cap_fraction": 0.2,
            "duration_s": 4.0,
            "ingress_rate_per_s": 1000.0,
            "demand_s_per_ingress": np.asarray(utilization) * 0.2 / 1000.0,
            "cap_throttled_period_fraction": np.zeros(n) if throttled is None else throttled,
        }
    )


def measured(utilization, sigma, tau, seed):
    """One simulated run per utilization, each with draws of its own (the fluid model)."""
    out = []
    for i, u in enumerate(utilization):
        table = runs_table([u])
        table["utilization"] = u
        out.append(_Fluid(table, 1, np.random.default_rng([seed, i])).fractions(sigma, tau)[0, 0])
    return np.array(out)


@pytest.mark.parametrize("sigma, tau", [(0.06, 3.0), (0.1, 0.0)])
def test_recovers_a_known_drift(sigma, tau):
    u = np.tile(np.linspace(0.8, 0.97, 12), 5)
    f = measured(u, sigma, tau, seed=42)
    fit = SpeedDriftCalibrator(replications=100, n_boot=0, seed=1).fit(runs_table(u, f))
    assert fit.params_["identified"]
    assert fit.params_["speed_drift_log_sd"] == pytest.approx(sigma, rel=0.25)
    if tau == 0.0:
        assert fit.params_["speed_drift_time_s"] <= 0.1  # independent periods: no run-to-run spread
    else:
        assert fit.params_["speed_drift_time_s"] >= 1.0  # a slow drift: runs differ
    assert fit.table_["simulated_mean"].mean() == pytest.approx(f.mean(), rel=0.05)


def test_bootstrap_interval_covers_the_estimate():
    u = np.tile(np.linspace(0.8, 0.97, 12), 3)
    f = measured(u, 0.08, 1.0, seed=7)
    fit = SpeedDriftCalibrator(replications=100, n_boot=20, seed=1, time_grid_s=(0.0, 1.0)).fit(runs_table(u, f))
    lo, hi = fit.intervals_["speed_drift_log_sd"]
    assert lo <= fit.params_["speed_drift_log_sd"] <= hi


def test_no_throttling_is_reported_not_fitted():
    fit = SpeedDriftCalibrator(n_boot=0).fit(runs_table(np.linspace(0.6, 0.95, 10)))
    assert not fit.params_["identified"]
    assert fit.params_["speed_drift_log_sd"] == 0.0
    assert "no throttled periods" in fit.params_["reason"]
    few = SpeedDriftCalibrator(n_boot=0).fit(runs_table([0.9, 0.95], [0.1, 0.3]))
    assert "at least 4" in few.params_["reason"]


def test_profile_carries_the_drift():
    u = np.tile(np.linspace(0.8, 0.97, 12), 2)
    fit = SpeedDriftCalibrator(replications=50, n_boot=0, time_grid_s=(1.0,)).fit(
        runs_table(u, measured(u, 0.07, 1.0, seed=3))
    )
    demand = {"ingress_cost_s": 1e-5, "delivery_cost_s": 2e-6, "per_byte_cost_s": 0.0, "idle_wakeup_cost_s": 0.0}
    meta = {"data": "x/runs.csv", "date": "2026-11-27", "n_runs": 24, "rms_residual_s": 1e-6}
    profile = build_profile(
        name="m",
        broker_kind="mosquitto",
        demand_params=demand,
        link_params=None,
        metadata=meta,
        speed_drift=fit,
    )
    broker = check_profile(profile)["broker"]["m"]
    assert broker["speed_drift_log_sd"] == pytest.approx(fit.params_["speed_drift_log_sd"], rel=1e-3)
    assert broker["speed_drift_time_s"] == 1.0
    assert "speed drift per quota period" in broker["provenance"]["note"]


def test_a_campaign_without_throttle_counts_is_not_fitted():
    fit = SpeedDriftCalibrator(n_boot=0).fit(runs_table([0.9] * 6).drop(columns="cap_throttled_period_fraction"))
    assert not fit.params_["identified"]
    assert "cap_throttled_period_fraction" in fit.params_["reason"]


def test_a_drift_few_runs_cannot_pin_down_is_reported_not_fitted():
    """Five runs whose two throttled ones are the least loaded: resamples that repeat them need a
    large drift, those that leave them out none; the bootstrap interval of the log-sd is wide."""
    u = np.array([0.55, 0.6, 0.9, 0.93, 0.96])
    f = np.array([0.5, 0.3, 0.0, 0.0, 0.0])
    fit = SpeedDriftCalibrator(replications=50, n_boot=20, seed=2, time_grid_s=(0.0, 1.0)).fit(runs_table(u, f))
    lo, hi = fit.intervals_["speed_drift_log_sd"]
    assert hi > 3 * fit.params_["speed_drift_log_sd"]
    assert not fit.params_["identified"]
    assert "not identified" in fit.params_["reason"]


def test_fitted_costs_load_the_fluid_model_when_given():
    """With ``demand_s`` the runs' utilizations are those of the given costs, not the measured ones;
    the same throttling at a lower utilization needs a larger drift."""
    u = np.tile(np.linspace(0.8, 0.97, 12), 3)
    f = measured(u, 0.08, 1.0, seed=11)
    table = runs_table(u, f)
    own = SpeedDriftCalibrator(replications=50, n_boot=0, time_grid_s=(1.0,)).fit(table)
    lower = SpeedDriftCalibrator(replications=50, n_boot=0, time_grid_s=(1.0,)).fit(
        table, demand_s=table["demand_s_per_ingress"] * 0.9
    )
    assert lower.table_["utilization"].to_numpy() == pytest.approx(0.9 * own.table_["utilization"].to_numpy())
    assert lower.params_["speed_drift_log_sd"] > own.params_["speed_drift_log_sd"]


def test_a_log_sd_at_the_search_bound_is_reported_not_fitted():
    """Runs throttled in most periods at 60-70 % of their quota (as at fan-out 100, where one
    message costs a whole period's quota): no slow drift up to the bound explains that."""
    u = np.tile(np.linspace(0.6, 0.7, 6), 2)
    fit = SpeedDriftCalibrator(replications=50, n_boot=5, seed=3, time_grid_s=(0.0, 10.0)).fit(
        runs_table(u, np.full(len(u), 0.9))
    )
    assert fit.params_["speed_drift_log_sd"] == MAX_LOG_SD
    assert not fit.params_["identified"]
    assert "search bound" in fit.params_["reason"]
    assert fit.table_["simulated_mean"].mean() < 0.9
    demand = {"ingress_cost_s": 1e-5, "delivery_cost_s": 2e-6, "per_byte_cost_s": 0.0, "idle_wakeup_cost_s": 0.0}
    meta = {"data": "x/runs.csv", "date": "2026-12-02", "n_runs": 12, "rms_residual_s": 1e-6}
    profile = build_profile(
        name="m", broker_kind="mosquitto", demand_params=demand, link_params=None, metadata=meta, speed_drift=fit
    )
    broker = check_profile(profile)["broker"]["m"]
    assert "speed_drift_log_sd" not in broker
    assert "search bound" in broker["provenance"]["note"]
