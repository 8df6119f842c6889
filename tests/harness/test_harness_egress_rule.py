"""The sustainability rule's egress counts (issue 18), on a synthetic run.

One publisher sends 1,000 msg/s for 4 s; every copy arrives ``latency`` s
later; the window is [1, 3) s. Hand count: 2,000 messages are sent in the
window. Copies received in the window, whenever sent: also 2,000 (those
sent in [1 - latency, 3 - latency)). Copies of the window's messages that
also arrive in it: 2,000 - 1,000 x latency (the last ``latency`` s of the
window are still in flight), i.e. 1,970 at 30 ms: the rule before issue 18
failed this run (0.985 < 0.99) although the broker kept up.
"""

import dataclasses
import math
import types

import numpy as np
import pytest

from pubsim.analysis.interval_search import is_sustainable
from pubsim.calibration import runner
from pubsim.calibration.campaign import parse_campaign
from pubsim.calibration.harness.loadgen import RECORD_DTYPE, LoadSpec, PublisherBlocked, SetupTimeout
from pubsim.calibration.harness.loadgen.result import LoadResult
from pubsim.calibration.runner import RealHarness
from pubsim.sim.errors import ConfigError

NS = 1_000_000_000
RATE = 1000


def _run(latency_s, *, backlog_growth=0.0):
    """A LoadResult of the synthetic run; latency grows by ``backlog_growth`` s per s of send time."""
    spec = LoadSpec(
        protocol="mqtt", pub_port=1883, sub_port=1883, rate_per_s=RATE, duration_s=4.0, warmup_s=1.0, cooldown_s=1.0
    )
    t_send = np.arange(4 * RATE, dtype=np.int64) * (NS // RATE)
    lat_ns = (latency_s * NS + backlog_growth * t_send).astype(np.int64)
    rec = np.zeros(len(t_send), RECORD_DTYPE)
    rec["seq"], rec["t_send_ns"], rec["t_recv_ns"] = np.arange(len(t_send)), t_send, t_send + lat_ns
    pub = {
        "index": 0,
        "batch_t_send_ns": t_send,
        "batch": 1,
        "sent": len(t_send),
        "interval_ns": NS // RATE,
        "lag_max_ns": 0,
        "cpu_fraction": 0.1,
        "runnable_fraction": 0.1,
        "flushed": 0,
        "flush_s": 0.0,
        "acks": 0,
    }
    flags = np.zeros(len(rec), bool)
    sub = {
        "index": 0,
        "records": rec,
        "duplicate": flags,
        "out_of_order": flags,
        "disconnected": None,
        "cpu_fraction": 0.1,
        "runnable_fraction": 0.1,
    }
    wall = {"setup_s": 0.0, "run_s": 4.0, "drain_s": 0.1, "total_s": 4.1}
    return spec, LoadResult._build(spec, 0, [pub], [sub], wall, True, [[0]])


CPU = {"run_s": 0.4, "cpu_time_s": 0.4, "voluntary_switches": 100, "wall_s": 4.0}


def _row(latency_s, rule, **kw):
    spec, result = _run(latency_s, **kw)
    return RealHarness._row(spec, result, CPU, rule=rule)


def test_three_egress_counts_by_hand():
    row = _row(0.030, "received")
    assert row["egress_received_per_s"] == pytest.approx(1000.0)
    assert row["egress_any_time_per_s"] == pytest.approx(1000.0)
    assert row["egress_sent_and_received_per_s"] == pytest.approx(985.0)  # (2000 - 30) / 2 s
    assert row["ingress_rate_per_s"] == pytest.approx(1000.0)
    assert row["latency_p50_s"] == pytest.approx(0.030)


@pytest.mark.parametrize("rule, ok", [("received", True), ("sent", True), ("sent_and_received", False)])
def test_latency_alone_fails_only_the_old_rule(rule, ok):
    row = _row(0.030, rule)
    assert row["egress_rule"] == rule
    assert (row["sustainability"] >= 0.99) is ok


def test_growing_backlog_fails_by_the_latency_trend():
    """Past the limit by 5 %: latency grows by 0.05 s per s; the received count falls by the same share."""
    row = _row(0.001, "sent", backlog_growth=0.05)
    assert row["sustainability"] >= 0.99  # every copy of the window's messages arrives in the drain
    assert row["latency_trend_s_per_s"] == pytest.approx(0.05, rel=1e-3)
    base = {"brokers": ["mosquitto"], "configurations": [{"name": "x"}]}
    lenient = parse_campaign({**base, "rule": {"egress": "sent"}})
    strict = parse_campaign({**base, "rule": {"egress": "sent", "max_latency_trend": 0.01}})
    assert lenient.sustainable(row) and not strict.sustainable(row)
    received = _row(0.001, "received", backlog_growth=0.05)
    assert received["sustainability"] < 0.99  # 1 / 1.05 of the input comes out within the window


def test_default_rule_is_the_received_count():
    c = parse_campaign({"brokers": ["mosquitto"], "configurations": [{"name": "x"}]})
    assert c.egress_rule == "received" and c.max_latency_trend is None


@pytest.mark.parametrize(
    "rule, field",
    [
        ({"egress": "both"}, "rule.egress"),
        ({"max_latency_trend": -0.1}, "rule.max_latency_trend"),
        ({"max_latency_trend": True}, "rule.max_latency_trend"),
        ({"egres": "sent"}, "rule.egres"),
        ("sent", "rule"),
    ],
)
def test_bad_rule_names_the_field(rule, field):
    with pytest.raises(ConfigError) as err:
        parse_campaign({"brokers": ["mosquitto"], "configurations": [{"name": "x"}], "rule": rule})
    assert err.value.field == field and "\n" not in str(err.value)


def test_a_run_the_busy_broker_cannot_set_up_is_measured_once_more_on_a_fresh_broker(monkeypatch):
    """Past its limit a broker may not answer the next run's clients in time: restart it, once."""
    spec, result = _run(0.001)
    harness = RealHarness(parse_campaign({"brokers": ["mosquitto"], "configurations": [{"name": "x"}]}))
    monkeypatch.setattr(harness, "_settle", lambda s: 0.0)
    calls, closed = [], []

    def measure(run_spec):
        calls.append(run_spec)
        if len(calls) == 1:
            raise SetupTimeout("publisher 0: no 'connected' within the time allowed")
        return None, result, CPU, {}

    monkeypatch.setattr(harness, "_measure", measure)
    monkeypatch.setattr(harness, "close_broker", lambda: closed.append(True))
    monkeypatch.setattr(harness, "_broker_dropped", lambda broker: 0)
    row, _ = harness(spec)
    assert len(calls) == 2 and closed == [True] and row["broker_restarted"]

    calls.clear()
    monkeypatch.setattr(harness, "_measure", lambda s: (_ for _ in ()).throw(SetupTimeout("again")))
    with pytest.raises(SetupTimeout):  # a second failure is not hidden
        harness(spec)


class _Clock:
    """A fake monotonic clock that sleep() advances, and a broker whose CPU use follows ``busy``."""

    def __init__(self, busy):
        self.t, self.busy, self.cpu = 0.0, busy, 0.0

    def sleep(self, dt):
        self.cpu += self.busy(self.t) * dt
        self.t += dt

    def sample(self, pid):
        return types.SimpleNamespace(t_s=self.t, cpu_run_s=self.cpu)


RUN = {"duration": "4s", "warmup": "1s", "cooldown": "1s"}


def _settling(monkeypatch, busy, *, running=True):
    clock = _Clock(busy)
    monkeypatch.setattr(runner.time, "sleep", clock.sleep)
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock.t)
    monkeypatch.setattr(runner.procfs, "sample", clock.sample)
    campaign = parse_campaign({"brokers": ["mosquitto"], "configurations": [{"name": "x"}], "run": RUN})
    harness = RealHarness(campaign)
    spec = campaign.run_spec("mosquitto", campaign.configurations[0], RATE, "light")
    if running:
        harness.broker = types.SimpleNamespace(pid=1)
        harness._key = (spec.broker, spec.cpu_cap_fraction, spec.config)
    return harness, spec


def test_the_next_run_waits_until_the_broker_has_worked_off_the_last_ones_backlog(monkeypatch):
    # busy at its whole 0.2-core cap for 3 s after the previous run, then idle
    harness, spec = _settling(monkeypatch, lambda t: 0.2 if t < 3.0 else 0.0)
    spec = dataclasses.replace(spec, cpu_cap_fraction=0.2)
    harness._key = (spec.broker, spec.cpu_cap_fraction, spec.config)
    waited = harness._settle(spec)
    assert 3.0 <= waited <= 3.0 + 2 * harness.SETTLE_WINDOW_S


def test_an_idle_or_new_broker_is_not_waited_for(monkeypatch):
    harness, spec = _settling(monkeypatch, lambda t: 0.0)
    assert harness._settle(spec) == pytest.approx(harness.SETTLE_WINDOW_S)  # one window to see it idle
    fresh, spec = _settling(monkeypatch, lambda t: 1.0, running=False)
    assert fresh._settle(spec) == 0.0


def test_a_broker_that_never_settles_is_replaced_and_the_row_says_so(monkeypatch):
    harness, spec = _settling(monkeypatch, lambda t: 1.0)
    assert harness._settle(spec) is None
    _, result = _run(0.001)
    closed = []
    monkeypatch.setattr(harness, "close_broker", lambda: closed.append(True))
    monkeypatch.setattr(harness, "_measure", lambda s: (None, result, CPU, {}))
    monkeypatch.setattr(harness, "_broker_dropped", lambda broker: 0)
    row, _ = harness(spec)
    assert closed == [True] and row["broker_restarted"] and math.isnan(row["broker_settle_s"])


def test_a_run_whose_publishers_the_broker_blocks_is_recorded_unsustainable_and_the_broker_replaced(monkeypatch):
    """RabbitMQ's memory alarm can block publishers past the run's deadline: record it, don't abort the campaign."""
    harness, spec = _settling(monkeypatch, lambda t: 0.0)
    closed, logged = [], []

    def blocked(s):
        raise PublisherBlocked("publisher 0: no 'result' within the time allowed")

    monkeypatch.setattr(harness, "_measure", blocked)
    monkeypatch.setattr(harness, "close_broker", lambda: closed.append(True))
    harness.on_run = lambda s, row: logged.append(row)
    row, sample = harness(spec)
    assert closed == [True] and row["broker_restarted"] and "publishers blocked" in row["run_error"]
    assert not is_sustainable(row) and math.isnan(row["ingress_rate_per_s"])
    assert logged == [row] and all(len(v) == 0 for v in sample.values())


@pytest.mark.parametrize(
    "role, expect, error",
    [
        ("publisher", "result", PublisherBlocked),
        ("publisher", "connected", SetupTimeout),
        ("subscriber", "result", None),
    ],
)
def test_a_silent_client_past_its_deadline_raises_the_error_of_its_step(role, expect, error):
    import multiprocessing

    from pubsim.calibration.harness import loadgen
    from pubsim.calibration.harness.loadgen.runner import _Child

    child = _Child.__new__(_Child)
    child.role, child.index = role, 0
    child.conn, other = multiprocessing.Pipe()
    child.proc = types.SimpleNamespace(is_alive=lambda: True, exitcode=None)
    with pytest.raises(loadgen.HarnessError) as err:
        child.recv(expect, deadline=0.0)
    assert type(err.value) is (error or loadgen.HarnessError)
    other.close()


def test_the_progress_log_shows_a_measured_run_and_why_a_blocked_one_has_no_figures():
    from pubsim.calibration.cli import _run_line

    campaign = parse_campaign({"brokers": ["mosquitto"], "configurations": [{"name": "x"}]})
    spec = campaign.run_spec("mosquitto", campaign.configurations[0], 2000, "refine")
    row = {"ingress_rate_per_s": 1999.6, "delivery_ratio": 0.9994, "latency_p50_s": 48e-6}
    assert _run_line(spec, row) == "mosquitto x refine 2,000 msg/s -> ingress 2,000/s, delivery ratio 0.999, p50 48 us"
    blocked = {**row, "run_error": "publishers blocked: publisher 0: no 'result'"}
    assert _run_line(spec, blocked).endswith("-> publishers blocked: publisher 0: no 'result'")
