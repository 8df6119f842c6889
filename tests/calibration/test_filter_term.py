"""The cost per installed subscription (filter_scan_cost_s) from runs with idle subscriptions (idle_filters)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.campaign import parse_campaign
from pubsim.calibration.fit import BrokerDemandCalibrator, KneeDemandCalibrator, filters_of
from pubsim.calibration.profile import check_profile
from pubsim.calibration.validate import fit_profiles, simulate_run
from pubsim.calibration.workload import installed_filters
from pubsim.sim.errors import ConfigError
from tests.calibration.test_connection_term import META, busy, run_row

TRUE = {
    "ingress_cost_s": 6e-6,
    "delivery_cost_s": 3e-6,
    "per_byte_cost_s": 1e-9,
    "idle_wakeup_cost_s": 12e-6,
    "background_cpu_fraction": 0.01,
    "filter_scan_cost_s": 2e-9,
}
# (name, payload, publishers, subscribers, fanout, idle filters)
SHAPES = [
    ("p64-f1", 64, 1, 1, 1, 0),
    ("p1024-f1", 1024, 1, 1, 1, 0),
    ("p64-f4", 64, 1, 4, 4, 0),
    ("p64-f1-i1000", 64, 1, 1, 1, 1000),
    ("p64-f1-i10000", 64, 1, 1, 1, 10000),
]


def synthetic_runs(shapes, rng, noise=0.0, cap=0.2, truth=TRUE):
    rows = []
    for name, payload, pubs, subs, fanout, idle in shapes:
        b = busy(payload, pubs, subs, fanout, truth) + truth["filter_scan_cost_s"] * (subs + idle)
        limit = (cap - truth["background_cpu_fraction"]) / b
        for frac in (0.02, 0.1, 0.3, 0.5, 0.7, 0.85, 0.92, 0.96):
            rate = frac * limit
            wake = (1.0 - frac) ** 2 if frac < 0.9 else 0.0
            d = b + truth["idle_wakeup_cost_s"] * wake + truth["background_cpu_fraction"] / rate
            d = d * (1 + noise * rng.standard_normal())
            rows.append(run_row(len(rows), name, payload, pubs, subs, fanout, cap, rate, d, wake, idle_filters=idle))
    return pd.DataFrame(rows)


def test_installed_filters_count_the_workloads_and_the_idle_ones():
    row = {"publishers": 2, "subscribers": 4, "topics": 2, "fanout": 2}
    assert installed_filters(row) == 4  # 2 topics x fan-out 2
    assert installed_filters({**row, "idle_filters": 500}) == 504
    assert installed_filters({**row, "idle_filters": float("nan")}) == 4  # campaigns before the column
    assert list(filters_of(pd.DataFrame([row, {**row, "idle_filters": 10}]))) == [4.0, 14.0]


@pytest.mark.parametrize("calibrator", [BrokerDemandCalibrator, KneeDemandCalibrator])
def test_the_fits_recover_a_known_cost_per_installed_subscription(calibrator):
    runs = synthetic_runs(SHAPES, np.random.default_rng(0))
    cal = calibrator(wake_regressor="wakeups", fit_background=True, fit_filters=True).fit(runs)
    for name, value in TRUE.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-4), name
    assert cal.capacity_per_s(payload_bytes=64, fanout=1, cap=0.2, filters=10001) == pytest.approx(
        (0.2 - TRUE["background_cpu_fraction"]) / (busy(64, 1, 1, 1, TRUE) + 10001 * TRUE["filter_scan_cost_s"]),
        rel=1e-4,
    )


SCANNING = "rabbitmq-mqtt"  # a broker whose matching BROKER_MODELS does not declare a lookup


def test_fit_profiles_fits_it_where_the_runs_vary_their_idle_subscriptions():
    runs = synthetic_runs(SHAPES, np.random.default_rng(3), noise=0.01).assign(broker=SCANNING)
    prof = check_profile(fit_profiles(runs, META, n_boot=40)[SCANNING])
    broker = prof["broker"][SCANNING]
    assert broker["filter_scan_cost_s"] == pytest.approx(TRUE["filter_scan_cost_s"], rel=0.3)
    term = prof["fit_terms"]["terms"]["filter_scan_cost_s"]
    assert term["ci"][0] <= term["value"] <= term["ci"][1]
    assert "per installed subscription" in broker["provenance"]["note"]


def test_without_idle_subscriptions_the_term_is_not_fitted_and_says_why():
    runs = synthetic_runs([s[:5] + (0,) for s in SHAPES[:3]], np.random.default_rng(3))
    prof = check_profile(fit_profiles(runs, META, n_boot=10)["mosquitto"])
    assert "filter_scan_cost_s" not in prof["broker"]["mosquitto"]
    term = prof["fit_terms"]["terms"]["filter_scan_cost_s"]
    assert term["identifiable"] is False and "do not vary idle_filters" in term["reason"]


def test_a_broker_that_matches_by_lookup_is_not_charged_per_subscription():
    """Mosquitto's subscription tree (src/subs.c sub__search): the term is 0 and says why, although
    these runs would fit one."""
    runs = synthetic_runs(SHAPES, np.random.default_rng(3), noise=0.01)
    prof = check_profile(fit_profiles(runs, META, n_boot=10)["mosquitto"])
    assert "filter_scan_cost_s" not in prof["broker"]["mosquitto"]
    term = prof["fit_terms"]["terms"]["filter_scan_cost_s"]
    assert (
        term["identifiable"] is False and "matching is a lookup" in term["reason"] and "sub__search" in term["reason"]
    )


def test_the_twin_installs_the_idle_subscriptions_and_pays_for_them():
    runs = synthetic_runs(SHAPES, np.random.default_rng(3)).assign(broker=SCANNING)
    prof = fit_profiles(runs, META, n_boot=0, speed_drift=False)[SCANNING]
    row = {**runs[runs.config == "p64-f1"].iloc[0].to_dict(), "duration_s": 2.0, "warmup_s": 0.5, "cooldown_s": 0.25}
    plain = simulate_run({**row, "idle_filters": 0}, prof, sample=10)[0]
    idle = simulate_run({**row, "idle_filters": 10000}, prof, sample=10)[0]
    cost = prof["broker"][SCANNING]["filter_scan_cost_s"]
    assert idle["demand_s_per_ingress"] - plain["demand_s_per_ingress"] == pytest.approx(
        10000 * cost, rel=0.02
    )  # light: every message wakes it either way


def test_a_campaign_configuration_takes_idle_filters():
    spec = {
        "name": "c",
        "brokers": ["mosquitto"],
        "configurations": [{"name": "a", "idle_filters": 1000}, {"name": "b"}],
    }
    camp = parse_campaign(spec)
    assert [c.idle_filters for c in camp.configurations] == [1000, 0]
    assert camp.run_spec("mosquitto", camp.configurations[0], 100.0, "light").idle_filters == 1000
    with pytest.raises(ConfigError) as err:
        parse_campaign({**spec, "configurations": [{"name": "a", "idle_filters": -1}]})
    assert err.value.field.endswith("idle_filters")


def test_variability_with_no_unthrottled_run_in_the_band_is_constant_and_says_why():
    """A campaign whose every run the quota throttled (NATS at 0.1 core, idle-filters 2026-12-02)
    leaves the cost variability unidentified: constant costs, said in the profile, not an error."""
    runs = synthetic_runs(SHAPES[:3], np.random.default_rng(3))
    runs = runs.assign(cap_throttled_period_fraction=0.5, latency_p99_s=runs.latency_p90_s * 2)
    prof = check_profile(fit_profiles(runs, META, n_boot=0, variability=True, speed_drift=False)["mosquitto"])
    broker = prof["broker"]["mosquitto"]
    assert "variability not identified" in broker["provenance"]["note"]
    assert "cv" not in str(broker["ingress_cost_s"])  # a constant cost, not a distribution


def test_a_proxy_campaign_refuses_more_idle_subscriptions_than_its_high_water_mark():
    base = {"name": "c", "brokers": ["zmq-proxy"]}
    with pytest.raises(ConfigError) as err:
        parse_campaign({**base, "configurations": [{"name": "a", "idle_filters": 999}]})  # 1 topic + 999 = the mark
    assert err.value.field == "configurations[0].idle_filters" and "high-water mark (1000)" in str(err.value)
    assert "\n" not in str(err.value)
    ok = [{"name": "a", "idle_filters": 998}, {"name": "b", "idle_filters": 50_000, "zmq_hwm": 0}]
    assert [c.idle_filters for c in parse_campaign({**base, "configurations": ok}).configurations] == [998, 50_000]
    with pytest.raises(ConfigError):
        parse_campaign({**base, "configurations": [{"name": "a", "idle_filters": 5000, "zmq_hwm": 5000}]})
    # the other brokers have no such mark
    parse_campaign({"name": "c", "brokers": ["nats"], "configurations": [{"name": "a", "idle_filters": 50_000}]})
