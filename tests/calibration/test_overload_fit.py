"""The socket-buffer calibrator (calibration.overload) on tables whose true parameters are known,
and the selection of runs past the limit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.overload import (
    FlowControlCostCalibrator,
    SocketBufferCalibrator,
    backlog_per_connection,
    compare_past_limit,
    past_limit_runs,
    with_overload,
)
from pubsim.models.params.overload import OverloadParams
from pubsim.models.params.provenance import Source
from pubsim.sim.errors import ConfigError

BUFFER, OVERHEAD = 3_800_000, 24


def _table(buffer_bytes=BUFFER, overhead=OVERHEAD, noise=0.0, seed=0):
    """Runs past the limit: p50 = backlog per connection x connections / throughput."""
    rng = np.random.default_rng(seed)
    rows = []
    for payload, pubs, fanout, rate in [
        (64, 1, 1, 11_000),
        (1024, 1, 1, 9_000),
        (16384, 1, 1, 3_000),
        (64, 8, 1, 8_000),
        (256, 2, 2, 7_000),
        (64, 1, 4, 4_000),
    ]:
        for lag in (0.01, 1.5, 3.0):
            backlog = buffer_bytes / (payload + overhead)
            p50 = backlog * pubs / rate * (1.0 + noise * rng.standard_normal())
            if lag < 1.0:
                p50 = 0.5 * p50  # not yet full: must be left out
            rows.append(
                {
                    "payload_bytes": payload,
                    "publishers": pubs,
                    "fanout": fanout,
                    "egress_received_per_s": rate * fanout,
                    "latency_p50_s": p50,
                    "publisher_lag_max_s": lag,
                }
            )
    return pd.DataFrame(rows)


def test_recovers_known_buffer_and_overhead():
    cal = SocketBufferCalibrator().fit(_table())
    assert cal.params_["socket_buffer_bytes"] == pytest.approx(BUFFER, rel=1e-9)
    assert cal.params_["message_overhead_bytes"] == OVERHEAD
    assert cal.params_["n_runs"] == 12  # the 6 unblocked runs are left out
    assert np.abs(cal.residuals_).max() < 1e-6


def test_fixed_overhead_and_noise():
    cal = SocketBufferCalibrator(fit_overhead=False, overhead_bytes=OVERHEAD).fit(_table(noise=0.05, seed=2))
    assert cal.params_["socket_buffer_bytes"] == pytest.approx(BUFFER, rel=0.05)
    assert cal.params_["message_overhead_bytes"] == OVERHEAD
    exact = SocketBufferCalibrator(fit_overhead=False, overhead_bytes=OVERHEAD).fit(_table())
    assert exact.params_["socket_buffer_bytes"] == BUFFER


def test_backlog_is_littles_law():
    t = _table().iloc[[1]]
    assert backlog_per_connection(t)[0] == pytest.approx(BUFFER / (64 + OVERHEAD))


def test_fitted_params_carry_provenance():
    p = SocketBufferCalibrator().fit(_table()).overload_params(reference="runs.csv (split=train)", date="2026-11-25")
    assert isinstance(p, OverloadParams) and p.provenance.source is Source.MEASURED
    assert p.socket_buffer_bytes == BUFFER and "12 flow-controlled runs" in p.provenance.note


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: SocketBufferCalibrator(min_lag_s=0), "min_lag_s"),
        (lambda: SocketBufferCalibrator(overhead_bytes=-1), "overhead_bytes"),
        (lambda: SocketBufferCalibrator().fit(_table().drop(columns="publishers")), "measurements.publishers"),
        (lambda: SocketBufferCalibrator().fit(_table().assign(publisher_lag_max_s=0.0)), "measurements"),
        (lambda: SocketBufferCalibrator().fit(_table().assign(payload_bytes=64)), "measurements.payload_bytes"),
        (lambda: SocketBufferCalibrator().fit([1, 2]), "measurements"),
    ],
)
def test_bad_input(make, field):
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_past_limit_runs_and_profile():
    runs = pd.DataFrame(
        {
            "broker": ["m"] * 5,
            "config": ["a"] * 5,
            "phase": ["fraction", "fraction", "fraction", "fraction", "doubling"],
            "offered_per_s": [1250.0, 2000.0, 3000.0, 600.0, 2000.0],
        }
    )
    sat = pd.DataFrame({"broker": ["m"], "config": ["a"], "limit_rate_per_s": [1000.0]})
    out = past_limit_runs(runs, sat)
    assert out["fraction"].tolist() == [1.25, 2.0, 3.0]
    prof = {"broker": {"m": {"ingress_cost_s": 1e-5}}, "link": {"l": {}}}
    p = OverloadParams(socket_buffer_bytes=1000)
    assert with_overload(prof, p)["broker"]["m"]["overload"] is p
    assert "overload" not in with_overload(with_overload(prof, p), None)["broker"]["m"]
    assert "overload" not in prof["broker"]["m"]


def test_compare_past_limit_on_a_known_broker():
    # 1 ms per message (1000 msg/s) offered 2000 msg/s; a 5000 B connection holds 50 messages of 100 B
    row = {
        "broker": "m",
        "config": "a",
        "split": "holdout",
        "fraction": 2.0,
        "payload_bytes": 100,
        "publishers": 1,
        "subscribers": 1,
        "topics": 1,
        "fanout": 1,
        "rate_per_s": 2000.0,
        "offered_per_s": 2000.0,
        "duration_s": 2.0,
        "warmup_s": 0.5,
        "cooldown_s": 0.2,
        "cpu_cap_fraction": float("nan"),
        "egress_received_per_s": 1000.0,
        "ingress_rate_per_s": 1000.0,
        "latency_p50_s": 0.05,
    }
    prof = {"broker": {"m": {"ingress_cost_s": "1ms"}}, "link": {"l": {"latency_s": 0.0}}}
    t = compare_past_limit(pd.DataFrame([row]), prof, OverloadParams(socket_buffer_bytes=5000)).iloc[0]
    assert t["egress_plain"] == pytest.approx(1000, rel=0.02) and t["egress_overload"] == pytest.approx(1000, rel=0.02)
    assert t["ingress_plain"] == pytest.approx(2000, rel=0.02)
    assert t["ingress_overload"] == pytest.approx(1000, rel=0.02)
    assert t["p50_overload_s"] == pytest.approx(0.05, rel=0.05)
    assert t["p50_plain_s"] > 0.4  # the backlog grows with the run
    assert t["p50_error_overload_pct"] == pytest.approx(100 * (t["p50_overload_s"] / 0.05 - 1))


def _flow_table(fixed_s=2e-6, per_byte_s=0.3e-9, base_s=10e-6):
    """Per configuration: four sustainable runs costing ``base_s`` (the top three are the
    baseline; the lightest costs more, as light runs do), two held runs costing the extra more,
    and one run past the limit not held yet (left out)."""
    rows = []
    for payload in (1024, 8192, 32768, 65536):
        held_s = base_s + fixed_s + per_byte_s * payload
        for rate, sus, lag, demand in [
            (1000, True, 0.0, 3 * base_s),
            (5000, True, 0.0, base_s),
            (6000, True, 0.0, base_s),
            (7000, True, 0.0, base_s),
            (9000, False, 0.2, 0.5 * held_s),
            (20000, False, 1.5, held_s),
            (40000, False, 2.5, held_s),
        ]:
            rows.append(
                {
                    "config": f"p{payload}",
                    "payload_bytes": payload,
                    "rate_per_s": rate,
                    "sustainable": sus,
                    "publisher_lag_max_s": lag,
                    "demand_s_per_ingress": demand,
                }
            )
    return pd.DataFrame(rows)


def test_flow_control_cost_recovers_known_fixed_and_per_byte_parts():
    cal = FlowControlCostCalibrator().fit(_flow_table())
    assert cal.params_["flow_control_cost_s"] == pytest.approx(2e-6, rel=1e-6)
    assert cal.params_["flow_control_cost_s_per_byte"] == pytest.approx(0.3e-9, rel=1e-6)
    assert cal.params_["n_configs"] == 4
    t = cal.table_.set_index("config")
    assert t.loc["p1024", "baseline_s"] == pytest.approx(10e-6) and t.loc["p1024", "n_held"] == 2
    assert np.allclose(t["fitted_s"], t["extra_s"])


def test_flow_control_cost_per_byte_only_and_negative_extras_clip_to_zero():
    cal = FlowControlCostCalibrator(fit_fixed=False, overhead_bytes=0).fit(_flow_table(fixed_s=0.0))
    assert cal.params_["flow_control_cost_s"] == 0.0
    assert cal.params_["flow_control_cost_s_per_byte"] == pytest.approx(0.3e-9, rel=1e-6)
    cheaper = FlowControlCostCalibrator().fit(_flow_table(fixed_s=-5e-6, per_byte_s=0.0))
    assert cheaper.params_["flow_control_cost_s"] == 0.0 and cheaper.params_["flow_control_cost_s_per_byte"] == 0.0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"min_lag_s": 0}, "min_lag_s"),
        ({"baseline_runs": 0}, "baseline_runs"),
        ({"overhead_bytes": -1}, "overhead_bytes"),
    ],
)
def test_flow_control_cost_bad_settings(kwargs, field):
    with pytest.raises(ConfigError) as err:
        FlowControlCostCalibrator(**kwargs)
    assert err.value.field == field


def test_flow_control_cost_needs_held_runs():
    t = _flow_table()
    t["publisher_lag_max_s"] = 0.0
    with pytest.raises(ConfigError) as err:
        FlowControlCostCalibrator().fit(t)
    assert err.value.field == "measurements"
    with pytest.raises(ConfigError):
        FlowControlCostCalibrator().fit(t.drop(columns="demand_s_per_ingress"))
