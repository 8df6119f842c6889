"""Large messages' pages faulted in again: the pages from the broker's design, their cost fitted
(calibration.heapfit, ``heap_fault_cost_s``; models.params.heap)."""

import numpy as np
import pytest

from pubsim.calibration.fit import KneeDemandCalibrator, heap_pages_of
from pubsim.calibration.heapfit import heap_rule, heap_rule_reason
from pubsim.calibration.profile import check_profile
from pubsim.calibration.validate import fit_profiles
from tests.calibration.test_connection_term import META, TRUE, synthetic_runs

FAULT_S = 1.8e-6
SHAPES = [
    ("p64-f1", 64, 1, 1, 1),
    ("p16384-f1", 16384, 1, 1, 1),
    ("p64-f4", 64, 1, 4, 4),
    ("p65536-f1", 65536, 1, 1, 1),
    ("p196608-f1", 196608, 1, 1, 1),
]


def _runs(shapes=SHAPES):
    """The connection-term campaign's synthetic runs, each message also faulting in
    2 x payload - 128 KiB again at FAULT_S a page."""
    runs = synthetic_runs(shapes, np.random.default_rng(3), noise=0.0)
    pages = np.ceil(np.maximum(2 * runs["payload_bytes"] - 131072, 0) / 4096)
    return runs.assign(demand_s_per_ingress=runs["demand_s_per_ingress"] + FAULT_S * pages)


def test_the_rule_is_the_brokers_and_only_mosquittos():
    rule = heap_rule("mosquitto")
    assert (rule.live_buffers, rule.top_pad_bytes, rule.page_bytes) == (2, 131072, 4096)
    assert heap_rule("nats") is None and "not known" in heap_rule_reason("nats")
    assert list(heap_pages_of(_runs().drop_duplicates("config"), rule)) == [0, 0, 0, 0, 64]


def test_knee_fit_recovers_the_cost_per_page_with_the_busy_costs():
    cal = KneeDemandCalibrator(wake_regressor="wakeups", fit_background=True, heap_rule=heap_rule("mosquitto"))
    cal.fit(_runs())
    assert cal.params_["heap_fault_cost_s"] == pytest.approx(FAULT_S, rel=1e-3)
    assert cal.params_["per_byte_cost_s"] == pytest.approx(TRUE["per_byte_cost_s"], rel=1e-3)


def _fit(runs, **kw):
    prof = fit_profiles(runs, META, n_boot=20, connection_form=None, idle_exit_on=False, **kw)["mosquitto"]
    return check_profile(prof)


def test_profile_carries_it_with_its_interval_and_provenance():
    prof = _fit(_runs())
    ht = prof["broker"]["mosquitto"]["heap_trim"]
    assert ht["live_buffers"] == 2 and ht["top_pad_bytes"] == 131072
    assert float(ht["fault_cost_s"].removesuffix("us")) * 1e-6 == pytest.approx(FAULT_S, rel=1e-2)
    assert "mallopt(3)" in ht["provenance"]["note"] and "split=train" in ht["provenance"]["reference"]
    term = prof["fit_terms"]["terms"]["heap_fault_cost_s"]
    assert term["ci"][0] <= term["value"] <= term["ci"][1]
    # a 512 KiB message, busy: without the pages the cost is linear in its bytes and falls far short
    plain = _fit(_runs(), heap_trim=False)
    assert "heap_trim" not in plain["broker"]["mosquitto"]
    assert "not asked for" in plain["fit_terms"]["terms"]["heap_fault_cost_s"]["reason"]
    size = 524288
    truth = TRUE["ingress_cost_s"] + TRUE["delivery_cost_s"] + 2 * size * TRUE["per_byte_cost_s"] + 224 * FAULT_S
    for p, heap in ((prof, True), (plain, False)):
        v = {k: p["fit_terms"]["terms"][k]["value"] for k in ("ingress_cost_s", "delivery_cost_s", "per_byte_cost_s")}
        busy = v["ingress_cost_s"] + v["delivery_cost_s"] + 2 * size * v["per_byte_cost_s"]
        busy += 224 * p["fit_terms"]["terms"]["heap_fault_cost_s"]["value"]
        assert busy == pytest.approx(truth, rel=0.02) if heap else busy < 0.8 * truth


def test_no_training_payload_faulting_pages_leaves_it_out_and_says_why():
    prof = _fit(_runs(SHAPES[:4]))
    assert "heap_trim" not in prof["broker"]["mosquitto"]
    term = prof["fit_terms"]["terms"]["heap_fault_cost_s"]
    assert term["identifiable"] is False and "fault none" in term["reason"]
