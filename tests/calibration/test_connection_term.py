"""The per-connection cost (issue 18): fitted where connection counts vary, not identified elsewhere."""

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.fit import HARNESS_TOPIC_BYTES, BrokerDemandCalibrator, KneeDemandCalibrator
from pubsim.calibration.profile import check_profile
from pubsim.calibration.terms import bootstrap_intervals, busy_identified
from pubsim.calibration.validate import fit_profiles
from pubsim.models.protocol import mqtt_length_bytes
from pubsim.sim.errors import ConfigError

TRUE = {
    "ingress_cost_s": 6e-6,
    "delivery_cost_s": 3e-6,
    "per_byte_cost_s": 1e-9,
    "connection_cost_s": 0.4e-6,
    "idle_wakeup_cost_s": 12e-6,
    "background_cpu_fraction": 0.01,
}
# (name, payload, publishers, subscribers, fanout): the extended campaign's training shapes
WIDE = [
    ("p64-f1", 64, 1, 1, 1),
    ("p1024-f1", 1024, 1, 1, 1),
    ("p64-f4", 64, 1, 4, 4),
    ("p16384-f1", 16384, 1, 1, 1),
    ("p64-f1-c8", 64, 8, 8, 1),
]
ONE_PUBLISHER = WIDE[:4]  # connections = 1 + subscribers = 1 + fan-out: collinear


def busy(payload, pubs, subs, fanout, p=TRUE):
    """Busy demand per message, s; the harness's topic names ("pubsim/t0", 9 B) for the length bytes."""
    length = int(mqtt_length_bytes(payload, HARNESS_TOPIC_BYTES)) - 1
    return (
        p["ingress_cost_s"]
        + fanout * p["delivery_cost_s"]
        + payload * (1 + fanout) * p["per_byte_cost_s"]
        + (pubs + subs) * p.get("connection_cost_s", 0.0)
        + length * p.get("length_byte_cost_s", 0.0)
    )


def run_row(run, name, payload, pubs, subs, fanout, cap, rate, demand_s, wake, **extra):
    """One sustainable training run of the campaign's shape, with demand ``demand_s`` per message."""
    return {
        "broker": "mosquitto",
        "config": name,
        "split": "train",
        "run": run,
        "payload_bytes": payload,
        "publishers": pubs,
        "subscribers": subs,
        "topics": pubs,
        "fanout": fanout,
        "cpu_cap_fraction": cap,
        "rate_per_s": rate,
        "ingress_rate_per_s": rate,
        "demand_s_per_ingress": demand_s,
        "wakeups_per_ingress": wake,
        "sustainable": True,
        "latency_p01_s": 60e-6 + demand_s,
        "latency_p50_s": 70e-6 + demand_s,
        "latency_p90_s": 90e-6 + demand_s,
        **extra,
    }


def synthetic_runs(configs, rng, noise=0.0, cap=0.2, truth=TRUE):
    """Sustainable runs of each configuration whose demand follows the model (wake-ups given)."""
    rows = []
    for name, payload, pubs, subs, fanout in configs:
        b = busy(payload, pubs, subs, fanout, truth)
        limit = (cap - truth["background_cpu_fraction"]) / b
        for frac in (0.02, 0.1, 0.3, 0.5, 0.7, 0.85, 0.92, 0.96):
            rate = frac * limit
            wake = (1.0 - frac) ** 2 if frac < 0.9 else 0.0  # falls with load; none near the limit
            d = b + truth["idle_wakeup_cost_s"] * wake + truth["background_cpu_fraction"] / rate
            d = d * (1 + noise * rng.standard_normal())
            rows.append(run_row(len(rows), name, payload, pubs, subs, fanout, cap, rate, d, wake))
    return pd.DataFrame(rows)


META = {"campaign": "synthetic", "date": "2026-11-25", "host": "test", "versions": {"mosquitto": "2.0.11"}}


def test_joint_fit_recovers_the_connection_cost_exactly():
    runs = synthetic_runs(WIDE, np.random.default_rng(0))
    cal = BrokerDemandCalibrator(wake_regressor="wakeups", fit_background=True, connection_form="per_message")
    cal.fit(runs)
    for name, value in TRUE.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-6), name
    assert cal.capacity_per_s(payload_bytes=64, fanout=1, cap=0.2, connections=16) == pytest.approx(
        (0.2 - TRUE["background_cpu_fraction"]) / busy(64, 8, 8, 1), rel=1e-6
    )


def test_knee_fit_puts_the_connection_cost_with_the_busy_costs():
    runs = synthetic_runs(WIDE, np.random.default_rng(0))
    cal = KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True, connection_form="per_message")
    cal.fit(runs)
    for name, value in TRUE.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-3), name


def test_without_the_term_the_many_connection_configuration_is_underestimated():
    runs = synthetic_runs(WIDE, np.random.default_rng(0))
    cal = KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True).fit(runs)
    assert cal.params_["connection_cost_s"] == 0.0
    c8 = runs[runs.config == "p64-f1-c8"].tail(3)  # near its limit (85-96 %)
    assert (cal.predict(c8) < 0.9 * c8.demand_s_per_ingress.to_numpy()).all()


def test_one_publisher_campaign_does_not_identify_the_term():
    status = busy_identified(synthetic_runs(ONE_PUBLISHER, np.random.default_rng(0)))
    assert status["ingress_cost_s"] is status["delivery_cost_s"] is status["per_byte_cost_s"] is None
    assert status["connection_cost_s"].startswith("not identified: its column is a combination of")
    assert busy_identified(synthetic_runs(WIDE, np.random.default_rng(0)))["connection_cost_s"] is None
    # the committed loopback campaign's three training shapes: more terms than configurations
    status = busy_identified(synthetic_runs(ONE_PUBLISHER[:1] + ONE_PUBLISHER[1:3], np.random.default_rng(0)))
    assert status["per_byte_cost_s"] is None and status["connection_cost_s"].startswith("not identified")


def test_unknown_form_is_refused():
    with pytest.raises(ConfigError, match="connection_form"):
        BrokerDemandCalibrator(connection_form="per_socket")


def test_bootstrap_intervals_cover_the_truth_and_shrink_with_less_noise():
    rng = np.random.default_rng(5)
    cal = KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True, connection_form="per_message")
    noisy = synthetic_runs(WIDE, rng, noise=0.03)
    ci = bootstrap_intervals(cal.fit(noisy), noisy, n_boot=100, seed=1)
    lo, hi = ci["connection_cost_s"]
    assert lo <= TRUE["connection_cost_s"] <= hi
    quiet = synthetic_runs(WIDE, rng, noise=0.003)
    lo2, hi2 = bootstrap_intervals(cal.fit(quiet), quiet, n_boot=100, seed=1)["connection_cost_s"]
    assert 0 < hi2 - lo2 < hi - lo


def test_fit_profiles_fits_the_term_where_identified_with_intervals():
    runs = synthetic_runs(WIDE, np.random.default_rng(3), noise=0.01)
    prof = check_profile(fit_profiles(runs, META, n_boot=60, connection_form="per_message")["mosquitto"])
    broker = prof["broker"]["mosquitto"]
    assert broker["connection_cost_s"] == pytest.approx(TRUE["connection_cost_s"], rel=0.2)
    terms = prof["fit_terms"]["terms"]
    for name in ("ingress_cost_s", "delivery_cost_s", "per_byte_cost_s", "connection_cost_s"):
        lo, hi = terms[name]["ci"]
        assert lo <= terms[name]["value"] <= hi, name
    assert "per client connection per message" in broker["provenance"]["note"]


def test_fit_profiles_reports_the_term_not_identified_from_one_publisher():
    runs = synthetic_runs(ONE_PUBLISHER, np.random.default_rng(3))
    prof = check_profile(fit_profiles(runs, META, n_boot=20, connection_form="per_message")["mosquitto"])
    broker = prof["broker"]["mosquitto"]
    assert broker["connection_cost_s"] == 0.0
    term = prof["fit_terms"]["terms"]["connection_cost_s"]
    assert term["identifiable"] is False and term["reason"].startswith("not identified")
    assert "connection_cost_s (per-connection cost) not identified" in broker["provenance"]["note"]
    # the other costs absorb the connections' share (delivery holds the subscriber's, ingress the rest)
    assert prof["fit_terms"]["terms"]["delivery_cost_s"]["value"] == pytest.approx(
        TRUE["delivery_cost_s"] + TRUE["connection_cost_s"], rel=0.02
    )


def test_fit_profiles_without_the_form_leaves_it_out():
    runs = synthetic_runs(WIDE, np.random.default_rng(3))
    prof = fit_profiles(runs, META, n_boot=0, connection_form=None)["mosquitto"]
    assert prof["broker"]["mosquitto"]["connection_cost_s"] == 0.0
    assert "fit_terms" not in prof
