"""Calibrators recover known parameters from synthetic measurements."""

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.fit import BrokerDemandCalibrator, LatencyFloorCalibrator, wakeups_of
from pubsim.calibration.profile import BROKER_MODELS
from pubsim.calibration.validate import _wake_regressor
from pubsim.sim.errors import ConfigError

# excess over p01 of two links' jitter: quantiles of gamma(2, 5 us) (sum of two exp(5 us))
EXCESS_P50, EXCESS_P90 = 8.3917e-06, 1.94499e-05
TRUE = {"ingress_cost_s": 5e-6, "delivery_cost_s": 2e-6, "per_byte_cost_s": 1e-9, "idle_wakeup_cost_s": 13e-6}


def synthetic_runs(rng, noise=0.0, cap=1.0):
    """Runs whose demand follows the model exactly (up to relative noise).

    The idle term uses the PASTA estimate 1 - U, which depends on the demand
    itself: solve d = b + w (1 - r d / cap) for d.
    """
    rows = []
    for payload in (64, 1024, 4096):
        for fanout in (1, 2, 5):
            for rate in (1e3, 5e3, 2e4):
                busy = (
                    TRUE["ingress_cost_s"]
                    + fanout * TRUE["delivery_cost_s"]
                    + payload * (1 + fanout) * TRUE["per_byte_cost_s"]
                )
                w = TRUE["idle_wakeup_cost_s"]
                d = (busy + w) / (1 + w * rate / cap)
                if rate * d / cap >= 1:
                    continue
                d *= 1 + noise * rng.standard_normal()
                rows.append(
                    {
                        "payload_bytes": payload,
                        "fanout": fanout,
                        "ingress_rate_per_s": rate,
                        "cpu_cap_fraction": cap,
                        "demand_s_per_ingress": d,
                        "latency_p01_s": 40e-6 + d,
                        "latency_p50_s": 40e-6 + d + EXCESS_P50,
                        "latency_p90_s": 40e-6 + d + EXCESS_P90,
                    }
                )
    return pd.DataFrame(rows)


def test_exact_data_gives_exact_parameters():
    runs = synthetic_runs(np.random.default_rng(1))
    cal = BrokerDemandCalibrator().fit(runs)
    for name, value in TRUE.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-6), name
    assert np.abs(cal.residuals_).max() < 1e-12
    assert cal.params_["n_runs"] == len(runs)


def test_noisy_data_gives_close_parameters():
    runs = synthetic_runs(np.random.default_rng(2), noise=0.02)
    cal = BrokerDemandCalibrator().fit(runs)
    assert cal.params_["ingress_cost_s"] == pytest.approx(TRUE["ingress_cost_s"], rel=0.25)
    assert cal.params_["idle_wakeup_cost_s"] == pytest.approx(TRUE["idle_wakeup_cost_s"], rel=0.15)
    assert cal.params_["delivery_cost_s"] == pytest.approx(TRUE["delivery_cost_s"], rel=0.25)


def test_load_dependence_is_captured():
    # demand per message falls with load (the Mosquitto 21 us -> 8 us effect)
    runs = synthetic_runs(np.random.default_rng(3))
    one = runs[(runs.payload_bytes == 64) & (runs.fanout == 1)].sort_values("ingress_rate_per_s")
    assert one.demand_s_per_ingress.is_monotonic_decreasing
    cal = BrokerDemandCalibrator().fit(runs)
    pred = cal.predict(one)
    assert pred == pytest.approx(one.demand_s_per_ingress.to_numpy(), rel=1e-6)


def test_capacity_is_busy_demand_scaled_by_cap():
    cal = BrokerDemandCalibrator().fit(synthetic_runs(np.random.default_rng(4)))
    busy = TRUE["ingress_cost_s"] + TRUE["delivery_cost_s"] + 64 * 2 * TRUE["per_byte_cost_s"]
    assert cal.capacity_per_s(payload_bytes=64, fanout=1) == pytest.approx(1 / busy, rel=1e-6)
    assert cal.capacity_per_s(payload_bytes=64, fanout=1, cap=0.2) == pytest.approx(0.2 / busy, rel=1e-6)


def test_cap_enters_the_idle_estimate():
    runs = synthetic_runs(np.random.default_rng(5), cap=0.2)
    cal = BrokerDemandCalibrator().fit(runs)
    assert cal.params_["idle_wakeup_cost_s"] == pytest.approx(TRUE["idle_wakeup_cost_s"], rel=1e-6)


def test_wakeup_regressor_uses_measured_switches():
    runs = synthetic_runs(np.random.default_rng(6))
    util = runs.ingress_rate_per_s * runs.demand_s_per_ingress
    runs["wakeups_per_ingress"] = 1 - util
    cal = BrokerDemandCalibrator(wake_regressor="wakeups").fit(runs)
    assert cal.params_["idle_wakeup_cost_s"] == pytest.approx(TRUE["idle_wakeup_cost_s"], rel=1e-6)


def test_without_delivery_or_per_byte_folds_costs():
    runs = synthetic_runs(np.random.default_rng(7))
    runs = runs[(runs.payload_bytes == 64) & (runs.fanout == 1)]
    cal = BrokerDemandCalibrator(fit_delivery=False, fit_per_byte=False).fit(runs)
    assert cal.params_["delivery_cost_s"] == 0 and cal.params_["per_byte_cost_s"] == 0
    folded = TRUE["ingress_cost_s"] + TRUE["delivery_cost_s"] + 128 * TRUE["per_byte_cost_s"]
    assert cal.params_["ingress_cost_s"] == pytest.approx(folded, rel=1e-6)


def test_latency_floor_uses_low_load_runs():
    runs = synthetic_runs(np.random.default_rng(8))
    cal = LatencyFloorCalibrator(max_utilization=0.05).fit(runs)
    assert cal.params_["link_latency_s"] == pytest.approx(20e-6, rel=1e-6)
    assert cal.params_["jitter_mean_s"] == pytest.approx(5e-6, rel=1e-3)  # exp(5 us) per link
    assert cal.params_["jitter_cv"] == pytest.approx(1.0, rel=1e-3)
    assert 1 <= cal.params_["n_runs"] < len(runs)


def test_two_gamma_jitters_reproduce_the_excess_quantiles():
    from pubsim.sim.distributions import Gamma

    runs = synthetic_runs(np.random.default_rng(10))
    p = LatencyFloorCalibrator(max_utilization=0.05).fit(runs).params_
    g = Gamma(mean_value=p["jitter_mean_s"], cv=p["jitter_cv"])
    x = g.sample(np.random.default_rng(0), 400_000) + g.sample(np.random.default_rng(1), 400_000)
    assert np.quantile(x, 0.5) == pytest.approx(EXCESS_P50, rel=0.01)
    assert np.quantile(x, 0.9) == pytest.approx(EXCESS_P90, rel=0.01)


def test_gamma_from_quantiles_edge_cases():
    from pubsim.calibration.fit import gamma_from_quantiles

    assert gamma_from_quantiles(0.0, 1.0) == (0.0, 0.0)
    assert gamma_from_quantiles(2.0, 2.0) == (0.0, 0.0)
    k, theta = gamma_from_quantiles(1.0, 1.0001)  # almost no spread: a very large shape
    assert k > 1e3


def test_bad_measurements_name_the_column():
    with pytest.raises(ConfigError, match="measurements.fanout"):
        BrokerDemandCalibrator().fit(
            pd.DataFrame({"payload_bytes": [1], "ingress_rate_per_s": [1], "demand_s_per_ingress": [1e-5]})
        )
    with pytest.raises(ConfigError, match="wake_regressor"):
        BrokerDemandCalibrator(wake_regressor="magic")
    with pytest.raises(ConfigError, match="at least 4 runs"):
        BrokerDemandCalibrator().fit(synthetic_runs(np.random.default_rng(9)).head(2))


def test_latency_floor_leaves_the_background_out():
    # The background CPU is the broker's timed work, not a step on a message's way:
    # at 1000 msg/s, 0.01 core of it is 10 us per message that no message waits for.
    runs = synthetic_runs(np.random.default_rng(11))
    runs["wakeups_per_ingress"] = 1 - runs.ingress_rate_per_s * runs.demand_s_per_ingress
    own = runs["demand_s_per_ingress"].to_numpy().copy()
    runs["demand_s_per_ingress"] += 0.01 / runs["ingress_rate_per_s"]
    cal = BrokerDemandCalibrator(wake_regressor="wakeups", fit_background=True).fit(runs)
    assert cal.params_["background_cpu_fraction"] == pytest.approx(0.01, rel=1e-6)
    np.testing.assert_allclose(cal.path_demand_s(runs), own, rtol=1e-6)
    floor = LatencyFloorCalibrator(max_utilization=0.05).fit(runs, demand_s=cal.path_demand_s(runs))
    assert floor.params_["link_latency_s"] == pytest.approx(20e-6, rel=1e-6)
    charged = LatencyFloorCalibrator(max_utilization=0.05).fit(runs, demand_s=cal.predict(runs))
    assert charged.params_["link_latency_s"] < 16e-6  # the old rule: background taken out of the links


def test_latency_floor_on_a_simulated_path_is_anchored_at_its_median():
    """Runs whose path is demand plus an idle exit that varies (a real core wakes sooner or later).

    The simulated path has the exit's median (40 us) for every message, the
    real one 10 us at its 1st percentile: a floor from the 1st percentiles
    would be negative. Over the path's median the links' fixed part is
    (p01 - path median) = 10 us for both, and their jitter makes the twin's
    median and 90th percentile the measured ones.
    """
    from pubsim.sim.distributions import Gamma

    runs = synthetic_runs(np.random.default_rng(12))
    exit_p01, exit_p50 = 10e-6, 40e-6
    runs["latency_p01_s"] += exit_p01
    runs["latency_p50_s"] += exit_p50
    runs["latency_p90_s"] += exit_p50
    asked = []

    def path(rows):
        asked.append(len(rows))
        d = rows["demand_s_per_ingress"].to_numpy() + exit_p50
        return pd.DataFrame({"latency_p01_s": d, "latency_p50_s": d, "latency_p90_s": d})

    cal = LatencyFloorCalibrator(max_utilization=0.05).fit(runs, path=path)
    p = cal.params_
    assert asked == [p["n_runs"]]  # simulated for the lightly loaded runs only
    assert p["link_latency_s"] == pytest.approx(5e-6, rel=1e-6)
    g = Gamma(mean_value=p["jitter_mean_s"], cv=p["jitter_cv"])
    both = (
        2 * p["link_latency_s"]
        + g.sample(np.random.default_rng(0), 400_000)
        + g.sample(np.random.default_rng(1), 400_000)
    )
    # the twin's latency is the path's median plus both links: the measured p50 and p90 over it
    assert np.quantile(both, 0.5) == pytest.approx(40e-6 + EXCESS_P50, rel=0.01)
    assert np.quantile(both, 0.9) == pytest.approx(40e-6 + EXCESS_P90, rel=0.01)


def test_wakeups_of_counts_wakeups_not_switches():
    runs = pd.DataFrame(
        {
            "config": ["a", "a", "a", "b", "b"],
            "ingress_rate_per_s": [200.0, 1000.0, 10000.0, 200.0, 4000.0],
            "wakeups_per_ingress": [3.0, 1.5, 0.3, 0.8, 0.2],
        }
    )
    # a: three switches per wake-up at its lightest load; b: under one, read as is
    np.testing.assert_allclose(wakeups_of(runs), [1.0, 0.5, 0.1, 0.8, 0.2])
    np.testing.assert_allclose(wakeups_of(runs.drop(columns="config")), [1.0, 1.0, 0.3, 0.8, 0.2])


def test_wakeup_cost_of_a_broker_that_switches_three_times_per_wakeup():
    # NATS-like: every wake-up is three context switches (read loop, flush, netpoller)
    rows = []
    for payload in (64, 1024):
        for fanout in (1, 4):
            for rate, woken in ((200.0, 1.0), (1000.0, 0.6), (4000.0, 0.25), (16000.0, 0.06)):
                busy = TRUE["ingress_cost_s"] + fanout * TRUE["delivery_cost_s"]
                busy += payload * (1 + fanout) * TRUE["per_byte_cost_s"]
                rows.append(
                    {
                        "config": f"p{payload}-f{fanout}",
                        "payload_bytes": payload,
                        "fanout": fanout,
                        "ingress_rate_per_s": rate,
                        "demand_s_per_ingress": busy + 120e-6 * woken,
                        "wakeups_per_ingress": 3.0 * woken,
                    }
                )
    runs = pd.DataFrame(rows)
    cal = BrokerDemandCalibrator(wake_regressor="wakeup_switches").fit(runs)
    assert cal.params_["idle_wakeup_cost_s"] == pytest.approx(120e-6, rel=1e-6)
    # read as a probability capped at 1, the switches undercount the cost
    clipped = BrokerDemandCalibrator(wake_regressor="wakeups").fit(runs)
    assert clipped.params_["idle_wakeup_cost_s"] < 0.8 * 120e-6


def test_the_brokers_that_switch_several_times_per_wakeup_are_read_so():
    """NATS and the ZeroMQ proxy hand a message between threads (``wakeup_switches``); Mosquitto
    switches once per wake-up, and the Erlang and JVM brokers' runtimes switch on their own."""
    rows = pd.DataFrame({"wakeups_per_ingress": [3.0, 0.5]})
    picked = {kind: _wake_regressor(rows, kind) for kind in BROKER_MODELS}
    assert picked == {
        "mosquitto": "wakeups",
        "nats": "wakeup_switches",
        "rabbitmq-mqtt": "wakeups",
        "zmq-proxy": "wakeup_switches",
        "activemq-mqtt": "wakeups",
        "ejabberd-mqtt": "wakeups",
    }
    assert _wake_regressor(rows.assign(wakeups_per_ingress=[3.0, np.nan]), "nats") == "idle_fraction"


def _reader_runs(sleeps_by_run, wake_s=8e-6):
    """Runs whose demand is 20 us + 10 us a copy + ``wake_s`` a copy that woke its reader."""
    rows = []
    for i, (fanout, sleeps) in enumerate(sleeps_by_run):
        rows.append(
            {
                "config": f"f{fanout}",
                "payload_bytes": 64,
                "fanout": fanout,
                "ingress_rate_per_s": 100.0 * (i + 1),
                "cpu_cap_fraction": 1.0,
                "subscriber_sleeps_per_copy": sleeps,
                "demand_s_per_ingress": 20e-6 + fanout * (10e-6 + sleeps * wake_s),
            }
        )
    return pd.DataFrame(rows)


def test_the_cost_of_a_copy_that_wakes_its_reader_is_fitted_apart():
    from pubsim.calibration.fit import reader_wakes_of

    runs = _reader_runs([(4, 1.0), (4, 0.25), (16, 0.8), (16, 1.0), (100, 0.9)])
    assert reader_wakes_of(runs).tolist() == pytest.approx([4.0, 1.0, 12.8, 16.0, 90.0])
    cal = BrokerDemandCalibrator(fit_per_byte=False, fit_reader_wakes=True).fit(runs)
    assert cal.params_["reader_wake_cost_s"] == pytest.approx(8e-6, rel=1e-3)
    assert cal.params_["delivery_cost_s"] == pytest.approx(10e-6, rel=1e-3)
    without = BrokerDemandCalibrator(fit_per_byte=False).fit(runs)
    assert without.params_["reader_wake_cost_s"] == 0.0
    assert cal.capacity_per_s(payload_bytes=64, fanout=100, reader_sleeps=1.0) == pytest.approx(
        1 / (cal.params_["ingress_cost_s"] + 100 * 18e-6), rel=1e-2
    )


def test_reader_wakes_are_identified_only_where_the_runs_counted_and_varied_them():
    from pubsim.calibration.terms import reader_wakes_identified

    varied = _reader_runs([(4, 1.0), (4, 0.25), (16, 0.8)])
    assert reader_wakes_identified(varied) is None
    assert "did not count" in reader_wakes_identified(varied.drop(columns="subscriber_sleeps_per_copy"))
    assert "did not count" in reader_wakes_identified(varied.assign(subscriber_sleeps_per_copy=[1.0, np.nan, 1.0]))
    assert "every run" in reader_wakes_identified(_reader_runs([(4, 1.0), (16, 0.98)]))
