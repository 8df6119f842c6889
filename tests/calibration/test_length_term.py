"""The per-length-byte cost (Mosquitto 2.0 reads a PUBLISH's remaining length one byte per read(2)):
fitted where the payload sizes straddle a step besides identifying the per-byte cost, not elsewhere."""

import numpy as np
import pytest

from pubsim.calibration.fit import BrokerDemandCalibrator, KneeDemandCalibrator, extra_length_bytes_of
from pubsim.calibration.profile import check_profile
from pubsim.calibration.terms import busy_identified
from pubsim.calibration.validate import fit_profiles
from tests.calibration.test_connection_term import META, ONE_PUBLISHER, WIDE, synthetic_runs

TRUTH = {
    "ingress_cost_s": 6e-6,
    "delivery_cost_s": 3e-6,
    "per_byte_cost_s": 0.1e-9,
    "length_byte_cost_s": 2.5e-6,
    "idle_wakeup_cost_s": 12e-6,
    "background_cpu_fraction": 0.01,
}


def runs(configs=ONE_PUBLISHER, noise=0.0, seed=0):
    return synthetic_runs(configs, np.random.default_rng(seed), noise=noise, truth=TRUTH)


def test_extra_length_bytes_of_the_campaign_payloads():
    """With the harness's 9-byte topics: 64 B -> 0, 1 KiB -> 1, 16 KiB and 32 KiB -> 2 extra bytes;
    a topic_bytes column moves the step (116 B on a 10-byte topic: 128 B remaining)."""
    r = runs(WIDE).drop_duplicates("config")
    assert extra_length_bytes_of(r).tolist() == [0, 1, 0, 2, 0]
    r = r.assign(payload_bytes=116, topic_bytes=[9, 10, 9, 10, 9])
    assert extra_length_bytes_of(r).tolist() == [0, 1, 0, 1, 0]


@pytest.mark.parametrize("calibrator", [BrokerDemandCalibrator, KneeDemandCalibrator])
def test_fit_recovers_the_length_byte_cost(calibrator):
    cal = calibrator(wake_regressor="wakeups", fit_background=True, fit_length_bytes=True).fit(runs())
    for name, value in TRUTH.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-3), name
    cap = cal.capacity_per_s(payload_bytes=32768, fanout=1, cap=0.2)
    busy = 6e-6 + 3e-6 + 32768 * 2 * 0.1e-9 + 2 * 2.5e-6
    assert cap == pytest.approx((0.2 - 0.01) / busy, rel=1e-3)


def test_a_linear_per_byte_cost_alone_misses_both_ends():
    """Without the term the step is spread over every byte: 1 KiB underestimated, 32 KiB overestimated."""
    cal = KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True).fit(runs())
    assert cal.params_["length_byte_cost_s"] == 0.0
    fitted = cal.params_
    linear_1024 = fitted["ingress_cost_s"] + fitted["delivery_cost_s"] + 2048 * fitted["per_byte_cost_s"]
    true_1024 = 6e-6 + 3e-6 + 2048 * 0.1e-9 + 2.5e-6
    assert linear_1024 < 0.95 * true_1024
    linear_32k = fitted["ingress_cost_s"] + fitted["delivery_cost_s"] + 65536 * fitted["per_byte_cost_s"]
    assert linear_32k > 1.1 * (6e-6 + 3e-6 + 65536 * 0.1e-9 + 5e-6)


def test_identified_only_with_a_third_payload_size():
    """64 B and 1 KiB (the 4-broker campaign) identify the per-byte cost or the step, not both."""
    three = busy_identified(runs(), length_bytes=True)
    assert three["per_byte_cost_s"] is None and three["length_byte_cost_s"] is None
    two = busy_identified(runs(ONE_PUBLISHER[:3]), length_bytes=True)
    assert two["per_byte_cost_s"] is None and two["length_byte_cost_s"].startswith("not identified")
    assert "length_byte_cost_s" not in busy_identified(runs())


def test_fit_profiles_fits_it_for_mosquitto_only():
    data = runs(noise=0.01, seed=3)
    prof = check_profile(fit_profiles(data, META, n_boot=40)["mosquitto"])
    broker = prof["broker"]["mosquitto"]
    assert broker["length_byte_cost_s"] == pytest.approx(TRUTH["length_byte_cost_s"], rel=0.15)
    lo, hi = prof["fit_terms"]["terms"]["length_byte_cost_s"]["ci"]
    assert lo <= TRUTH["length_byte_cost_s"] <= hi
    assert "per MQTT remaining-length byte beyond the first" in broker["provenance"]["note"]
    nats = check_profile(fit_profiles(data.assign(broker="nats"), META, n_boot=0)["nats"])
    assert "length_byte_cost_s" not in nats["broker"]["nats"]


def test_fit_profiles_records_why_two_sizes_do_not_identify_it():
    prof = fit_profiles(runs(ONE_PUBLISHER[:3]), META, n_boot=10)["mosquitto"]
    term = prof["fit_terms"]["terms"]["length_byte_cost_s"]
    assert term["identifiable"] is False and term["reason"].startswith("not identified")
    assert "length_byte_cost_s" not in prof["broker"]["mosquitto"]
