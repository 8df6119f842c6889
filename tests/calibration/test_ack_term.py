"""The cost per MQTT QoS handshake packet (ack_cost_s) from runs at several QoS levels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.campaign import parse_campaign
from pubsim.calibration.fit import BrokerDemandCalibrator, KneeDemandCalibrator, acks_of, copy_acks_of
from pubsim.calibration.profile import check_profile
from pubsim.calibration.validate import fit_profiles, simulate_run
from pubsim.models.mechanisms.qos.rules import handshake_packets
from pubsim.sim.errors import ConfigError
from tests.calibration.test_connection_term import META, busy
from tests.calibration.test_filter_term import SHAPES as FILTER_SHAPES
from tests.calibration.test_filter_term import TRUE as FILTER_TRUE
from tests.calibration.test_filter_term import shaped_runs

TRUE = {**{k: v for k, v in FILTER_TRUE.items() if k != "filter_scan_cost_s"}, "ack_cost_s": 1.5e-6}
# (name, payload, publishers, subscribers, fanout, qos)
SHAPES = [s[:5] + (0,) for s in FILTER_SHAPES[:3]] + [
    ("p64-f1-q1", 64, 1, 1, 1, 1),
    ("p64-f1-q2", 64, 1, 1, 1, 2),
]


def synthetic_runs(shapes, rng, noise=0.0):
    def acks(subs, fanout, qos):
        return TRUE["ack_cost_s"] * int(handshake_packets(qos)) * (1 + fanout)

    return shaped_runs(shapes, rng, acks, "qos", noise=noise, truth=TRUE)


def test_handshake_packets_per_message_count_the_way_in_and_each_copy():
    runs = pd.DataFrame({"qos": [0, 1, 2, 1, np.nan], "fanout": [1, 1, 1, 4, 2]})
    assert list(acks_of(runs)) == [0.0, 2.0, 6.0, 5.0, 0.0]  # 1 + fan-out exchanges; NaN: QoS 0
    assert list(acks_of(pd.DataFrame({"fanout": [3]}))) == [0.0]  # campaigns before the column


@pytest.mark.parametrize("calibrator", [BrokerDemandCalibrator, KneeDemandCalibrator])
def test_the_fits_recover_a_known_cost_per_handshake_packet(calibrator):
    cal = calibrator(wake_regressor="wakeups", fit_background=True, fit_acks=True).fit(
        synthetic_runs(SHAPES, np.random.default_rng(0))
    )
    for name, value in TRUE.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-4), name
    busy2 = busy(64, 1, 4, 4, TRUE) + 3 * 5 * TRUE["ack_cost_s"]  # QoS 2 at fan-out 4: 15 packets
    assert cal.capacity_per_s(payload_bytes=64, fanout=4, cap=0.2, qos=2) == pytest.approx(
        (0.2 - TRUE["background_cpu_fraction"]) / busy2, rel=1e-4
    )


def test_fit_profiles_fits_it_where_the_runs_vary_their_qos_and_the_twin_pays_it():
    runs = synthetic_runs(SHAPES, np.random.default_rng(3), noise=0.01)
    prof = check_profile(fit_profiles(runs, META, n_boot=20)["mosquitto"])
    broker = prof["broker"]["mosquitto"]
    assert broker["ack_cost_s"] == pytest.approx(TRUE["ack_cost_s"], rel=0.2)
    term = prof["fit_terms"]["terms"]["ack_cost_s"]
    assert term["ci"][0] <= term["value"] <= term["ci"][1]
    assert "per MQTT QoS handshake packet" in broker["provenance"]["note"]
    row = {**runs[runs.config == "p64-f1"].iloc[0].to_dict(), "duration_s": 2.0, "warmup_s": 0.5, "cooldown_s": 0.25}
    plain = simulate_run(row, prof, sample=10)[0]
    two = simulate_run({**row, "qos": 2}, prof, sample=10)[0]
    assert two["delivery_ratio"] == pytest.approx(1.0, abs=0.01)  # the twin's QoS 2 delivers every message
    # light: every message wakes it either way; QoS 2 at fan-out 1: 3 packets in, 3 on the copy
    assert two["demand_s_per_ingress"] - plain["demand_s_per_ingress"] == pytest.approx(
        6 * broker["ack_cost_s"], rel=0.02
    )


def test_at_one_qos_the_term_is_not_fitted_and_says_why():
    runs = synthetic_runs(SHAPES[:3], np.random.default_rng(3))
    prof = check_profile(fit_profiles(runs, META, n_boot=10)["mosquitto"])
    assert "ack_cost_s" not in prof["broker"]["mosquitto"]
    term = prof["fit_terms"]["terms"]["ack_cost_s"]
    assert term["identifiable"] is False and "every training run has QoS 0" in term["reason"]


def test_a_campaign_configuration_takes_qos_and_refuses_it_where_a_broker_has_none():
    spec = {"name": "c", "brokers": ["mosquitto"], "configurations": [{"name": "a", "qos": 2}, {"name": "b"}]}
    camp = parse_campaign(spec)
    assert [c.qos for c in camp.configurations] == [2, 0]
    assert camp.run_spec("mosquitto", camp.configurations[0], 100.0, "light").qos == 2
    for bad, brokers in ((3, ["mosquitto"]), (1, ["mosquitto", "nats"])):
        with pytest.raises(ConfigError) as err:
            parse_campaign({**spec, "brokers": brokers, "configurations": [{"name": "a", "qos": bad}]})
        assert err.value.field == "configurations[0].qos"


# --- the copies' packets apart (copy_ack_cost_s) -------------------------------
COPY_TRUE = {**TRUE, "copy_ack_cost_s": 0.6e-6}
COPY_SHAPES = SHAPES + [("p64-f4-q1", 64, 1, 4, 4, 1), ("p64-f2-q2", 64, 1, 2, 2, 2)]


def copy_runs(shapes, rng, noise=0.0):
    def acks(subs, fanout, qos):
        n = int(handshake_packets(qos))
        return COPY_TRUE["ack_cost_s"] * n + COPY_TRUE["copy_ack_cost_s"] * n * fanout

    return shaped_runs(shapes, rng, acks, "qos", noise=noise, truth=TRUE)


def test_the_copies_packets_are_counted_apart():
    runs = pd.DataFrame({"qos": [0, 1, 2, 1], "fanout": [1, 1, 1, 4]})
    assert list(copy_acks_of(runs)) == [0.0, 1.0, 3.0, 4.0]
    assert list(acks_of(runs) - copy_acks_of(runs)) == [0.0, 1.0, 3.0, 1.0]  # the publisher's exchange


@pytest.mark.parametrize("calibrator", [BrokerDemandCalibrator, KneeDemandCalibrator])
def test_the_fits_recover_the_copies_cost_per_packet_apart(calibrator):
    cal = calibrator(wake_regressor="wakeups", fit_background=True, fit_acks=True, fit_copy_acks=True).fit(
        copy_runs(COPY_SHAPES, np.random.default_rng(0))
    )
    for name, value in COPY_TRUE.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-4), name
    busy2 = busy(64, 1, 4, 4, TRUE) + 3 * (COPY_TRUE["ack_cost_s"] + 4 * COPY_TRUE["copy_ack_cost_s"])
    assert cal.capacity_per_s(payload_bytes=64, fanout=4, cap=0.2, qos=2) == pytest.approx(
        (0.2 - TRUE["background_cpu_fraction"]) / busy2, rel=1e-4
    )
    joint = calibrator(wake_regressor="wakeups", fit_background=True, fit_acks=True).fit(
        copy_runs(SHAPES, np.random.default_rng(0))
    )
    assert joint.params_["copy_ack_cost_s"] == joint.params_["ack_cost_s"]  # not apart: the same cost


def test_fit_profiles_fits_them_apart_only_where_the_runs_identify_them():
    runs = copy_runs(COPY_SHAPES, np.random.default_rng(3), noise=0.01)
    prof = check_profile(fit_profiles(runs, META, n_boot=20)["mosquitto"])
    broker = prof["broker"]["mosquitto"]
    assert broker["ack_cost_s"] == pytest.approx(COPY_TRUE["ack_cost_s"], rel=0.25)
    assert broker["copy_ack_cost_s"] == pytest.approx(COPY_TRUE["copy_ack_cost_s"], rel=0.25)
    assert "per packet of a copy's exchange" in broker["provenance"]["note"]
    term = prof["fit_terms"]["terms"]["copy_ack_cost_s"]
    assert term["ci"][0] <= term["value"] <= term["ci"][1]
    # QoS > 0 only at fan-out 1: one cost per packet, and the profile says why
    joint = check_profile(fit_profiles(copy_runs(SHAPES, np.random.default_rng(3)), META, n_boot=10)["mosquitto"])
    assert "copy_ack_cost_s" not in joint["broker"]["mosquitto"]
    reason = joint["fit_terms"]["terms"]["copy_ack_cost_s"]["reason"]
    assert "not identified" in reason and "the copies' packets cost ack_cost_s" in reason
