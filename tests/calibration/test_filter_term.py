"""The cost per installed subscription (filter_scan_cost_s) from runs with idle subscriptions (idle_filters)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.campaign import parse_campaign
from pubsim.calibration.fit import BrokerDemandCalibrator, KneeDemandCalibrator, filters_of
from pubsim.calibration.forms import choose_filter_form
from pubsim.calibration.profile import check_profile
from pubsim.calibration.validate import fit_profiles, simulate_run
from pubsim.calibration.workload import installed_filters
from pubsim.models.params.broker import BrokerParams, filter_load
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


def shaped_runs(shapes, rng, extra, column, *, noise=0.0, cap=0.2, truth=TRUE):
    """Sustainable runs of ``(name, payload, publishers, subscribers, fanout, value)`` shapes whose
    busy demand is the model's plus ``extra(subscribers, fanout, value)``; ``value`` in ``column``."""
    rows = []
    for name, payload, pubs, subs, fanout, value in shapes:
        b = busy(payload, pubs, subs, fanout, truth) + extra(subs, fanout, value)
        limit = (cap - truth["background_cpu_fraction"]) / b
        for frac in (0.02, 0.1, 0.3, 0.5, 0.7, 0.85, 0.92, 0.96):
            rate = frac * limit
            wake = (1.0 - frac) ** 2 if frac < 0.9 else 0.0
            d = b + truth["idle_wakeup_cost_s"] * wake + truth["background_cpu_fraction"] / rate
            d = d * (1 + noise * rng.standard_normal())
            rows.append(run_row(len(rows), name, payload, pubs, subs, fanout, cap, rate, d, wake, **{column: value}))
    return pd.DataFrame(rows)


def synthetic_runs(shapes, rng, noise=0.0, cap=0.2, truth=TRUE, form="linear", exponent=1.0):
    def scan(subs, fanout, idle):
        return truth["filter_scan_cost_s"] * filter_load(subs + idle, form, exponent)

    return shaped_runs(shapes, rng, scan, "idle_filters", noise=noise, cap=cap, truth=truth)


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
    assert "filter_cost_form" not in broker  # linear data, linear form
    assert "linear form: leave-one-configuration-out" in broker["provenance"]["note"]


LOG_TRUTH = {**TRUE, "filter_scan_cost_s": 0.4e-6}  # per unit of ln(1 + installed subscriptions)


def test_fit_profiles_chooses_the_log_form_where_held_out_configurations_follow_it():
    """NATS's cost per idle subscription grew concavely (its garbage collector, idle-filters
    2026-12-02): a linear term fitted on few counts misses the others; the log form is kept when it
    predicts each held-out configuration better."""
    runs = synthetic_runs(SHAPES, np.random.default_rng(3), noise=0.01, truth=LOG_TRUTH, form="log")
    prof = check_profile(fit_profiles(runs.assign(broker=SCANNING), META, n_boot=20)[SCANNING])
    broker = prof["broker"][SCANNING]
    assert broker["filter_cost_form"] == "log"
    assert broker["filter_scan_cost_s"] == pytest.approx(LOG_TRUTH["filter_scan_cost_s"], rel=0.1)
    assert "ln(1 + installed subscriptions)" in broker["provenance"]["note"]
    assert "log form: leave-one-configuration-out rms relative error" in broker["provenance"]["note"]
    assert "filter_cost_exponent" not in broker
    assert BrokerParams(filter_scan_cost_s=1e-6, filter_cost_form="log").filter_cost_form == "log"


def _make(form, exponent):
    return BrokerDemandCalibrator(
        wake_regressor="wakeups", fit_background=True, fit_filters=True, filter_form=form, filter_exponent=exponent
    )


def _errors(why):
    """``{form: error %}`` of a choice's sentence."""
    parts = why.split(": ", 1)[1].split("; ")[0].split(", ")
    out = {}
    for part in parts:
        name, value = part.rsplit(" ", 1)
        out[name.split(" (")[0]] = float(value.rstrip("%"))
    return out


def test_the_form_needs_three_subscription_counts_and_compares_held_out_errors():
    two = synthetic_runs(SHAPES[:4], np.random.default_rng(0), truth=LOG_TRUTH, form="log")
    two = two[two.config != "p64-f4"]  # installed subscriptions 1 and 1001 only
    form, exponent, why = choose_filter_form(_make, two)
    assert (form, exponent) == ("linear", 1.0) and "2 installed-subscription counts cannot tell the forms apart" in why
    lin = synthetic_runs(SHAPES, np.random.default_rng(0), noise=0.01)
    assert choose_filter_form(_make, lin)[:2] == ("linear", 1.0)
    log = synthetic_runs(SHAPES, np.random.default_rng(0), truth=LOG_TRUTH, form="log")
    form, _, why = choose_filter_form(_make, log)
    errors = _errors(why)
    assert form == "log" and errors["log"] < 0.5 and errors["linear"] > 50
    # with 1 % noise, a power of exponent 0.1 is as good as the log: a concave form either way
    noisy = synthetic_runs(SHAPES, np.random.default_rng(0), noise=0.01, truth=LOG_TRUTH, form="log")
    form, exponent, _ = choose_filter_form(_make, noisy)
    assert form == "log" or (form == "power" and exponent <= 0.2)


def test_a_power_law_is_found_with_its_exponent():
    """Costs growing as installed subscriptions ** 0.3 (the shape of NATS's 0.1-core CPU per message
    over 1,000 to 30,000 idle subscriptions, idle-filters 2026-12-02)."""
    truth = {**TRUE, "filter_scan_cost_s": 300e-9}
    runs = synthetic_runs(SHAPES, np.random.default_rng(0), noise=0.005, truth=truth, form="power", exponent=0.3)
    form, exponent, why = choose_filter_form(_make, runs)
    assert (form, exponent) == ("power", 0.3), why
    cal = _make(form, exponent).fit(runs)
    assert cal.params_["filter_scan_cost_s"] == pytest.approx(300e-9, rel=0.1)
    b = BrokerParams(filter_scan_cost_s=300e-9, filter_cost_form="power", filter_cost_exponent=0.3)
    assert b.filter_cost_exponent == 0.3


def test_a_broker_refuses_an_unknown_subscription_cost_form():
    with pytest.raises(ConfigError) as err:
        BrokerParams(filter_cost_form="quadratic")
    assert err.value.field == "filter_cost_form" and "quadratic" in str(err.value)
    with pytest.raises(ConfigError) as err:
        BrokerDemandCalibrator(filter_form="quadratic")
    assert err.value.field == "filter_form"
    for bad in ({"filter_cost_form": "power", "filter_cost_exponent": 1.5}, {"filter_cost_exponent": 0.5}):
        with pytest.raises(ConfigError) as err:
            BrokerParams(**bad)
        assert err.value.field == "filter_cost_exponent"


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


def test_the_twin_pays_the_log_form_by_the_logarithm_of_its_subscriptions():
    runs = synthetic_runs(SHAPES, np.random.default_rng(3), truth=LOG_TRUTH, form="log").assign(broker=SCANNING)
    prof = fit_profiles(runs, META, n_boot=0, speed_drift=False)[SCANNING]
    assert prof["broker"][SCANNING]["filter_cost_form"] == "log"
    row = {**runs[runs.config == "p64-f1"].iloc[0].to_dict(), "duration_s": 2.0, "warmup_s": 0.5, "cooldown_s": 0.25}
    plain = simulate_run({**row, "idle_filters": 0}, prof, sample=10)[0]
    idle = simulate_run({**row, "idle_filters": 10000}, prof, sample=10)[0]
    cost = prof["broker"][SCANNING]["filter_scan_cost_s"]
    # 1 workload subscription, then 10,001: ln(10002) - ln(2)
    assert idle["demand_s_per_ingress"] - plain["demand_s_per_ingress"] == pytest.approx(
        cost * (np.log(10002) - np.log(2)), rel=0.02
    )


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
