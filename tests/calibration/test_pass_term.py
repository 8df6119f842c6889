"""The cost per event-loop pass (issue 18): fitted on counted passes, written as the broker's I/O cycles."""

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.fit import BrokerDemandCalibrator, KneeDemandCalibrator, passes_of
from pubsim.calibration.profile import check_profile
from pubsim.calibration.terms import passes_identified
from pubsim.calibration.validate import fit_profiles
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.mapping import from_mapping

from .test_connection_term import META, WIDE, busy, run_row

TRUE = {
    "ingress_cost_s": 6e-6,
    "delivery_cost_s": 3e-6,
    "per_byte_cost_s": 1e-9,
    "pass_cost_s": 2.0e-6,
    "idle_wakeup_cost_s": 12e-6,
    "background_cpu_fraction": 0.01,
}


def pass_runs(configs, rng, noise=0.0, cap=0.2, counted=True):
    """Runs whose demand has a pass cost shared by one message of each backed-up publisher."""
    rows = []
    for name, payload, pubs, subs, fanout in configs:
        b = busy(payload, pubs, subs, fanout, TRUE)
        limit = (cap - TRUE["background_cpu_fraction"]) / (b + TRUE["pass_cost_s"] / pubs)
        for frac in (0.02, 0.1, 0.3, 0.5, 0.7, 0.85, 0.92, 0.96):
            rate = frac * limit
            wake = (1.0 - frac) ** 2 if frac < 0.9 else 0.0
            passes = 1.0 / pubs + (1.0 - 1.0 / pubs) * (1.0 - frac)  # one per message idle, 1 / pubs backed up
            d = b + TRUE["pass_cost_s"] * passes + TRUE["idle_wakeup_cost_s"] * wake
            d += TRUE["background_cpu_fraction"] / rate
            d = d * (1 + noise * rng.standard_normal())
            extra = {"broker_passes_per_ingress": passes if counted else np.nan}
            rows.append(run_row(len(rows), name, payload, pubs, subs, fanout, cap, rate, d, wake, **extra))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("calibrator", [BrokerDemandCalibrator, KneeDemandCalibrator])
def test_fit_recovers_the_pass_cost(calibrator):
    runs = pass_runs(WIDE, np.random.default_rng(0))
    cal = calibrator(wake_regressor="wakeups", fit_background=True, connection_form="per_pass").fit(runs)
    for name, value in TRUE.items():
        assert cal.params_[name] == pytest.approx(value, rel=1e-3), name
    # eight publishers backed up share each pass: an eighth of its cost per message
    assert cal.capacity_per_s(payload_bytes=64, fanout=1, cap=0.2, publishers=8) == pytest.approx(
        0.19 / (busy(64, 8, 8, 1, TRUE) + TRUE["pass_cost_s"] / 8), rel=1e-3
    )


def test_runs_without_counted_passes():
    one = pass_runs(WIDE[:1], np.random.default_rng(0), counted=False)
    many = pass_runs(WIDE[4:], np.random.default_rng(0), counted=False)
    assert (passes_of(one) == 1.0).all()  # one publisher: one pass per message, counted at every rate
    assert np.isnan(passes_of(many)).all()  # eight: not known
    counted = pass_runs(WIDE, np.random.default_rng(0))
    cal = BrokerDemandCalibrator(wake_regressor="wakeups", fit_background=True, connection_form="per_pass")
    both = pd.concat([counted, many], ignore_index=True)
    assert cal.fit(both).params_["n_runs"] == len(counted)  # the uncounted eight-publisher runs left out
    assert cal.params_["pass_cost_s"] == pytest.approx(TRUE["pass_cost_s"], rel=1e-3)


def test_identified_only_where_passes_vary():
    assert passes_identified(pass_runs(WIDE, np.random.default_rng(0))) is None
    one_publisher = passes_identified(pass_runs(WIDE[:4], np.random.default_rng(0)))
    assert one_publisher.startswith("not identified: every training run read about one message per pass")
    uncounted = pass_runs(WIDE[4:], np.random.default_rng(0), counted=False)
    assert passes_identified(uncounted).startswith("not identified: no training run counted its passes")


def test_profile_writes_the_passes_as_io_cycles_of_one_message_per_connection():
    runs = pass_runs(WIDE, np.random.default_rng(3), noise=0.005)
    prof = check_profile(fit_profiles(runs, META, n_boot=20, connection_form="per_pass")["mosquitto"])
    broker = prof["broker"]["mosquitto"]
    io = from_mapping(BrokerParams, {k: v for k, v in broker.items() if k != "provenance"}, "broker").io
    assert io.cycle_max_per_connection == 1
    assert io.cycle_cost_s == pytest.approx(TRUE["pass_cost_s"], rel=0.1)
    assert "per event-loop pass" in broker["provenance"]["note"]
    lo, hi = prof["fit_terms"]["terms"]["pass_cost_s"]["ci"]
    assert lo <= TRUE["pass_cost_s"] <= hi
    # not identified from one publisher: no io, the reason in the terms
    one = check_profile(
        fit_profiles(pass_runs(WIDE[:4], np.random.default_rng(3)), META, n_boot=0, connection_form="per_pass")[
            "mosquitto"
        ]
    )
    assert "io" not in one["broker"]["mosquitto"]
    assert "pass_cost_s (per-connection cost) not identified" in one["broker"]["mosquitto"]["provenance"]["note"]


def test_not_fitted_for_a_broker_that_reads_whole_buffers():
    runs = pass_runs(WIDE, np.random.default_rng(3)).assign(broker="nats")
    meta = {**META, "versions": {"nats": "2.9.10"}}
    prof = check_profile(fit_profiles(runs, meta, n_boot=0, connection_form="per_pass")["nats"])
    assert "io" not in prof["broker"]["nats"]
    assert (
        "pass_cost_s (per-connection cost) not fitted: nats is not modelled as reading one packet"
        in (prof["broker"]["nats"]["provenance"]["note"])
    )


def test_auto_form_fits_passes_for_mosquitto_and_connections_for_the_others():
    runs = pass_runs(WIDE, np.random.default_rng(3))
    mosq = fit_profiles(runs, META, n_boot=0)["mosquitto"]["broker"]["mosquitto"]
    assert mosq["io"]["cycle_max_per_connection"] == 1
    assert mosq["connection_cost_s"] == 0.0
    meta = {**META, "versions": {"nats": "2.9.10"}}
    nats = fit_profiles(runs.assign(broker="nats"), meta, n_boot=0)["nats"]["broker"]["nats"]
    assert "io" not in nats
    assert "per client connection per message" in nats["provenance"]["note"]
