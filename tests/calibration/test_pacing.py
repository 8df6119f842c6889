"""The load generator's pacing and its simulated twin (calibration.pacing, calibration.virtual).

The real publishing loop (``loadgen.publisher._pace``) runs here on a fake
clock whose sleeps wake a given lateness late and whose sends take a given
time: the twin must give the same batch send times, to the nanosecond, and
with no lateness the due times the simulated publishers are scheduled at.
The calibrator must recover the lateness and the back-to-back gap from send
times the twin made.
"""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from pubsim.calibration.harness.loadgen import LoadSpec, batch_size
from pubsim.calibration.harness.loadgen import publisher as P
from pubsim.calibration.pacing import (
    PacingLag,
    PacingLagCalibrator,
    batch_count,
    batch_due_ns,
    batch_send_times_ns,
    pacing_fields,
    pacing_from_runs,
    read_pacing,
    run_pacing_from_runs,
    shared_core_send_times_ns,
    write_pacing,
)
from pubsim.calibration.virtual import paced_publisher
from pubsim.calibration.workload import topic_name
from pubsim.sim.errors import ConfigError

T0 = 5_000_000_000


class FakeTime:
    """``monotonic_ns`` and ``sleep`` of a clock that wakes ``lags`` late, in order."""

    def __init__(self, now, lags):
        self.now = now
        self.lags = list(lags)
        self.used = 0

    def monotonic_ns(self):
        return self.now

    def sleep(self, s):
        self.now += round(s * 1e9)
        if self.used < len(self.lags):
            self.now += self.lags[self.used]
        self.used += 1


def run_real_loop(monkeypatch, spec, lags, gap_ns):
    """The generator's ``_pace`` on a fake clock; ``(batch, send ns after t0)`` per batch sent."""
    fake = FakeTime(T0 - 1_000_000, lags)
    monkeypatch.setattr(P, "time", fake)
    sent = []

    def send_batch(n, now):
        sent.append((n, now - T0))
        fake.now += gap_ns

    ctl = SimpleNamespace(start_ns=T0, abort=False, poll=lambda: None)
    report = P._pace(spec, 0, ctl, batch_size(spec), send_batch, lambda: None)
    assert list(report["batch_t_send_ns"] - T0) == [t for _, t in sent]
    return np.array([n for n, _ in sent]), np.array([t for _, t in sent], dtype=np.int64)


SPEC = LoadSpec(
    protocol="mqtt", pub_port=1883, rate_per_s=3000.0, duration_s=0.02, publishers=2, subscribers=2, topics=2
)


def test_the_generator_sends_at_the_due_times_the_twin_schedules(monkeypatch):
    b = batch_size(SPEC)
    rate = SPEC.rate_per_s / SPEC.publishers
    n, sent = run_real_loop(monkeypatch, SPEC, [0] * 1000, 0)
    assert b == 2 and list(n) == list(range(len(n)))
    due = batch_due_ns(rate, b, SPEC.duration_s)
    assert np.array_equal(sent, due)
    assert batch_count(rate, b, SPEC.duration_s) == len(sent) == 15  # 1333333.3 ns apart, the last at 18.67 ms
    # the simulated publishers: every message at its batch's send time, topics (seq + index) mod topics
    row = {"rate_per_s": SPEC.rate_per_s, "publishers": 2, "payload_bytes": 64, "duration_s": SPEC.duration_s}
    topics = tuple(topic_name(k) for k in range(2))
    for index in (0, 1):
        pub = paced_publisher(row, index, topics)
        seq = np.arange(len(sent) * b)
        assert np.array_equal(np.asarray(pub.schedule_time_s), sent[seq // b] / 1e9)
        assert list(pub.schedule_topic) == [topic_name(k) for k in (seq + index) % 2]


@pytest.mark.parametrize("gap_ns", [0, 30_000])
def test_the_twin_reproduces_a_late_generator_to_the_nanosecond(monkeypatch, gap_ns):
    rng = np.random.default_rng(4)
    lags = rng.integers(0, 400_000, 40)
    lags[3] = 4_100_000  # about a scheduler tick: the next three batches go out back to back
    lags[9] = 12_000_000  # so late that the run's end passes first: the rest is not sent
    rate = SPEC.rate_per_s / SPEC.publishers
    b = batch_size(SPEC)
    _, real = run_real_loop(monkeypatch, SPEC, lags, gap_ns)
    twin = batch_send_times_ns(rate, b, SPEC.duration_s, wake_lag_ns=lags, gap_ns=gap_ns)
    assert np.array_equal(real, twin)
    assert np.all(np.diff(real[3:7]) == gap_ns)  # caught up back to back after the tick
    assert len(real) == 12 < batch_count(rate, b, SPEC.duration_s)  # batch 12 woke after the end


def _deliveries(lags_ns, gap_ns, rate, b, duration_s, publishers=2):
    frames = []
    for p in range(publishers):
        send = batch_send_times_ns(rate, b, duration_s, wake_lag_ns=lags_ns[p], gap_ns=gap_ns)
        seq = np.arange(len(send) * b)
        frames.append(pd.DataFrame({"publisher": p, "seq": seq, "t_send_s": send[seq // b] / 1e9}))
    return pd.concat(frames, ignore_index=True)


def test_calibrator_recovers_the_lateness_and_the_gap():
    rng = np.random.default_rng(7)
    rate, b, duration = 2000.0, 2, 2.0
    n = batch_count(rate, b, duration)
    lags = []
    for _ in range(2):
        x = rng.exponential(60_000, n).astype(np.int64)
        x[rng.random(n) < 0.02] = 3_000_000  # a few tick-long stalls: back-to-back catch-up
        lags.append(x)
    gap = 20_000
    d = _deliveries(lags, gap, rate, b, duration)
    cal = PacingLagCalibrator().fit([(d, rate, b)])
    assert cal.params_["gap_s"] == pytest.approx(gap / 1e9)
    assert cal.params_["n_batches"] == 2 * n
    got = np.sort(cal.params_["wake_lag_s"])
    expect = np.sort(np.concatenate([_used_lags(x, rate, b, duration, gap) for x in lags])) / 1e9
    assert got.shape == expect.shape and np.allclose(got, expect, atol=1e-12)
    assert cal.params_["lag_p99_s"] == pytest.approx(np.quantile(expect, 0.99))


def _used_lags(lags, rate, b, duration, gap):
    """The lateness values the loop consumed (one per sleep)."""
    send = batch_send_times_ns(rate, b, duration, wake_lag_ns=lags, gap_ns=gap)
    due = batch_due_ns(rate, b, duration)[: len(send)]
    ready = np.r_[-(10**18), send[:-1] + gap]
    slept = ready < due
    return (send - due)[slept]


def test_pacing_file_round_trip_and_twin_draws(tmp_path):
    lag = PacingLag(wake_lag_s=(1e-5, 2e-5, 4e-3), gap_s=2e-5, source="test")
    write_pacing(tmp_path / "p.json", lag)
    back = read_pacing(tmp_path / "p.json")
    assert back == lag
    (t,) = back.send_times_s(2000.0, 2, 0.5, np.random.default_rng(0))
    due = batch_due_ns(2000.0, 2, 0.5)[: len(t)] / 1e9
    assert np.all(t >= due) and np.all(np.diff(t) >= 2e-5 - 1e-12)
    zero = PacingLag(wake_lag_s=(0.0,), gap_s=0.0)
    (t0,) = zero.send_times_s(2000.0, 2, 0.5, np.random.default_rng(0))
    assert np.array_equal(t0, batch_due_ns(2000.0, 2, 0.5) / 1e9)
    with pytest.raises(ConfigError, match="wake_lag_s"):
        PacingLag(wake_lag_s=(), gap_s=0.0)


def test_one_publisher_on_the_shared_core_is_the_loop():
    rng = np.random.default_rng(2)
    lags = rng.integers(0, 2_000_000, 2000)
    (one,) = shared_core_send_times_ns(1500.0, 2, 0.5, [lags], 25_000)
    assert np.array_equal(one, batch_send_times_ns(1500.0, 2, 0.5, wake_lag_ns=lags, gap_ns=25_000))


def test_publishers_sharing_the_core_send_one_after_another():
    # hand timeline: 1000 msg/s each, b = 1, due at 0, 1, 2 ms; a send takes 0.1 ms of the core
    gap = 100_000
    a, b = shared_core_send_times_ns(1000.0, 1, 0.003, [[0, 0, 0], [0, 50_000, 2_500_000]], gap)
    assert list(a) == [0, 1_000_000, 2_000_000]
    # batch 0: due with publisher 0, waits for its send; batch 1: wakes 50 us late, the core is
    # free again at 1.1 ms; batch 2 wakes 2.5 ms late, at 4.5 ms: after the run's end, not sent
    assert list(b) == [100_000, 1_100_000]


def test_a_runs_pacing_fields_are_the_calibrators_on_its_batches():
    """The row fields of a measured run: the calibrator on its publishers' batch send times."""
    rng = np.random.default_rng(11)
    rate, b, duration = 2000.0, 2, 1.0
    n = batch_count(rate, b, duration)
    lags = [rng.exponential(70_000, n).astype(np.int64) for _ in range(2)]
    lags[0][rng.random(n) < 0.03] = 2_500_000
    sends = [batch_send_times_ns(rate, b, duration, wake_lag_ns=x, gap_ns=30_000) for x in lags]
    interval = b * 1e9 / rate
    f = pacing_fields([{"batch": b, "interval_ns": interval, "send_ns": s} for s in sends])
    cal = PacingLagCalibrator().fit([(_deliveries(lags, 30_000, rate, b, duration), rate, b)]).params_
    assert f["pacing_gap_s"] == pytest.approx(cal["gap_s"]) == pytest.approx(30e-6)
    assert f["pacing_wakeups"] == cal["n_wakeups"] and f["pacing_batches"] == 2 * n
    assert f["pacing_wake_q50_s"] == pytest.approx(np.quantile(cal["wake_lag_s"], 0.5))
    assert f["pacing_wake_q99_9_s"] == pytest.approx(np.quantile(cal["wake_lag_s"], 0.999))
    assert np.isnan(pacing_fields([])["pacing_gap_s"])


def test_the_twins_pacing_comes_from_one_publisher_runs():
    """Quantile functions resampled evenly, one-publisher runs only; the gap among runs that caught up."""
    cols = {f"pacing_wake_q{q}_s": v for q, v in zip(("1", "10", "25", "50", "75", "90", "99", "99_9"), range(1, 9))}
    runs = pd.DataFrame(
        [
            {"publishers": 1, "pacing_wakeups": 100, "pacing_batches": 120, "pacing_gap_s": 3e-5, **cols},
            {"publishers": 1, "pacing_wakeups": 100, "pacing_batches": 100, "pacing_gap_s": 0.0, **cols},
            {
                "publishers": 8,
                "pacing_wakeups": 100,
                "pacing_batches": 150,
                "pacing_gap_s": 9e-5,
                **{k: 100.0 for k in cols},
            },
            {  # held back by the broker (TCP flow control), not late
                "publishers": 1,
                "pacing_wakeups": 100,
                "pacing_batches": 900,
                "pacing_gap_s": 1e-4,
                **{k: 50.0 for k in cols},
                "sustainable": False,
            },
        ]
    )
    runs["sustainable"] = runs["sustainable"].fillna(True).astype(bool)
    lag = pacing_from_runs(runs, values_per_run=10)
    assert len(lag.wake_lag_s) == 20 and max(lag.wake_lag_s) <= 8.0  # the 8-publisher run left out
    assert lag.gap_s == pytest.approx(3e-5)  # the run with no back-to-back batch has no gap to tell
    # evenly spaced probabilities 0.05, 0.15, ...: 0.05 lies between q1 (1) and q10 (2)
    assert lag.wake_lag_s[0] == pytest.approx(1 + (0.05 - 0.01) / 0.09)
    assert pacing_from_runs(runs.drop(columns=["pacing_wake_q50_s"])) is None


def test_a_twin_whose_generator_cannot_offer_the_rate_is_not_sustainable():
    """The twin is judged against the rate asked for, as the real harness judges a run: four
    publishers whose batches hold the shared client core 1 ms each offer at most 1,000 msg/s."""
    from pubsim.calibration.profile import build_profile
    from pubsim.calibration.virtual import VirtualHarness

    from .virtual import virtual_meta

    meta = virtual_meta(cpu_cap_fraction=1.0)
    demand = {"ingress_cost_s": 5e-6, "delivery_cost_s": 2e-6, "per_byte_cost_s": 0.0, "idle_wakeup_cost_s": 0.0}
    link = {"link_latency_s": 5e-5, "jitter_mean_s": 0.0, "jitter_cv": 0.0, "n_runs": 1}
    prof = build_profile(
        name="mosquitto", broker_kind="mosquitto", demand_params=demand, link_params=link, metadata=meta
    )
    row = {
        "broker": "mosquitto",
        "config": "c4",
        "payload_bytes": 64,
        "publishers": 4,
        "subscribers": 4,
        "topics": 4,
        "fanout": 1,
        "cpu_cap_fraction": 1.0,
        "duration_s": 1.0,
        "warmup_s": 0.2,
        "cooldown_s": 0.2,
    }
    slow = PacingLag(wake_lag_s=(0.0,), gap_s=1e-3)
    for pacing, rate, saturated in ((None, 4000.0, False), (slow, 800.0, False), (slow, 4000.0, True)):
        out, _ = VirtualHarness({"mosquitto": prof}, pacing=pacing)({**row, "rate_per_s": rate})
        assert out["generator_saturated"] is saturated
        assert out["sustainability"] == pytest.approx(1.0, abs=0.01)  # the broker keeps up with what came
        assert (out["delivery_ratio"] < 0.5) is saturated  # 1,000 of 4,000 msg/s asked for


def _paced_row(config, rate, level, publishers=8, sustainable=True):
    cols = ("1", "10", "25", "50", "75", "90", "99", "99_9")
    return {
        "broker": "mosquitto",
        "config": config,
        "rate_per_s": rate,
        "publishers": publishers,
        "pacing_wakeups": 100,
        "pacing_batches": 120,
        "pacing_gap_s": 9e-4,
        "sustainable": sustainable,
        **{f"pacing_wake_q{q}_s": level for q in cols},
    }


def test_each_twin_replays_its_own_runs_lateness():
    """The sustainable run of the same configuration nearest in rate (log scale); retries at one
    rate pooled; past the limit the last sustainable one; elsewhere the one-publisher model."""
    runs = pd.DataFrame(
        [
            _paced_row("c8", 1000.0, 1e-4),
            _paced_row("c8", 10000.0, 2e-4),
            _paced_row("c8", 10000.0, 4e-4),  # a retry at the same rate
            _paced_row("c8", 20000.0, 9e-3, sustainable=False),  # held back by the broker: left out
            _paced_row("c32", 5000.0, 5e-4, publishers=32),
        ]
    )
    one = PacingLag(wake_lag_s=(7e-5,), gap_s=3e-5, source="one publisher")
    pacing = run_pacing_from_runs(runs, fallback=one, values_per_run=5)

    def lag(config, rate):
        return pacing.lag_for({"broker": "mosquitto", "config": config, "rate_per_s": rate})

    assert set(lag("c8", 2000.0).wake_lag_s) == {1e-4}  # log(2) from 1000, log(5) from 10000
    assert set(lag("c8", 4000.0).wake_lag_s) == {2e-4, 4e-4} and len(lag("c8", 4000.0).wake_lag_s) == 10
    assert set(lag("c8", 30000.0).wake_lag_s) == {2e-4, 4e-4}
    assert set(lag("c32", 100.0).wake_lag_s) == {5e-4}
    assert lag("c2", 100.0) is one
    got = lag("c8", 1000.0)
    assert got.shared_core is False and got.gap_s == one.gap_s  # the publisher's own loop gap
    assert run_pacing_from_runs(runs.drop(columns=["pacing_wake_q50_s"]), fallback=one) is one
    assert "3 rates of 2 configurations (4 measured runs)" in pacing.describe()


def test_measured_lateness_is_drawn_per_publisher_without_a_modelled_core():
    """With lateness measured on the run's own publishers (their turns on the core included),
    each publisher runs its loop alone; on one modelled core they would go one after another."""
    lag = (5e-5,)
    own = PacingLag(wake_lag_s=lag, gap_s=1e-4, shared_core=False)
    shared = PacingLag(wake_lag_s=lag, gap_s=1e-4)
    rng = np.random.default_rng(0)
    a = own.send_times_s(1000.0, 1, 0.003, rng, publishers=3)
    b = shared.send_times_s(1000.0, 1, 0.003, rng, publishers=3)
    assert [x.tolist() for x in a] == [[5e-5, 1.05e-3, 2.05e-3]] * 3
    assert [x[0] for x in b] == pytest.approx([5e-5, 1.5e-4, 2.5e-4])
