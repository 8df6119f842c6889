"""The interval search of SYSTEMS.md §4 against oracles with a known limit."""

import math

import numpy as np
import pytest

from pubsim.analysis.interval_search import interval_search, is_sustainable, latency_trend_s_per_s
from pubsim.sim.errors import ConfigError


def oracle(limit_interval_s, calls=None):
    """A broker that keeps up exactly when interval >= limit_interval_s."""

    def measure(interval_s):
        if calls is not None:
            calls.append(interval_s)
        return {"sustainability": 1.0 if interval_s >= limit_interval_s else 0.9}

    return measure


@pytest.mark.parametrize("limit_s", [1.37e-3, 2.0e-3, 5.5e-3, 0.0101, 0.0639])
def test_search_finds_limit_within_five_percent(limit_s):
    res = interval_search(oracle(limit_s), start_interval_s=1e-3, publishers=4)
    assert res.limit_reached and not res.saturated_everywhere
    assert res.interval_s >= limit_s  # never reports an unsustainable interval
    assert (res.interval_s - limit_s) / res.interval_s <= 0.05 + 1e-12
    assert res.error_bound <= 0.05 + 1e-12
    assert res.rate_per_s == pytest.approx(4 / res.interval_s)


def test_search_follows_the_paper_grid():
    calls = []
    interval_search(oracle(5.5e-3, calls), start_interval_s=1e-3, steps=20)
    assert calls[:4] == [1e-3, 2e-3, 4e-3, 8e-3]  # doubling until 8 ms passes
    refine = calls[4:]
    assert len(refine) == 19  # [4, 8] ms in 20 steps: 19 inner points
    assert refine == pytest.approx(sorted(4e-3 + 0.2e-3 * np.arange(1, 20))[::-1])


def test_stop_at_first_failure_measures_less_and_agrees():
    full, short = [], []
    a = interval_search(oracle(5.5e-3, full), start_interval_s=1e-3)
    b = interval_search(oracle(5.5e-3, short), start_interval_s=1e-3, stop_at_first_failure=True)
    assert a.interval_s == b.interval_s
    assert len(short) < len(full)


def test_noisy_non_monotone_takes_smallest_sustainable():
    # a lucky sustainable point below an unsustainable one: the paper's rule keeps it
    def measure(interval_s):
        ok = interval_s >= 6e-3 or math.isclose(interval_s, 4.4e-3)
        return {"sustainability": 1.0 if ok else 0.5}

    res = interval_search(measure, start_interval_s=1e-3)
    assert res.interval_s == pytest.approx(4.4e-3)


def test_limit_above_range_and_below_range_are_flagged():
    fast = interval_search(oracle(1e-4), start_interval_s=1e-3)
    assert not fast.limit_reached and fast.interval_s == 1e-3
    slow = interval_search(oracle(10.0), start_interval_s=1e-3, max_doublings=3)
    assert slow.saturated_everywhere and math.isnan(slow.rate_per_s)
    assert len(slow.records) == 4


def test_records_are_tagged():
    res = interval_search(oracle(3e-3), start_interval_s=1e-3, steps=4)
    phases = [r["phase"] for r in res.records]
    assert phases[:3] == ["doubling"] * 3 and set(phases[3:]) == {"refine"}
    assert [r["sustainable"] for r in res.records[:3]] == [False, False, True]


def test_sustainability_rule_and_trend():
    assert is_sustainable({"sustainability": 0.99})
    assert not is_sustainable({"sustainability": 0.9899})
    assert not is_sustainable({"sustainability": math.nan})
    assert not is_sustainable({"sustainability": 1.0, "delivery_ratio": 0.8})  # back-pressured
    assert is_sustainable({"sustainability": 1.0, "delivery_ratio": 0.995})
    assert not is_sustainable({"sustainability": 1.0, "latency_trend_s_per_s": 0.2}, max_trend=0.01)
    t = np.linspace(0, 10, 200)
    assert latency_trend_s_per_s(t, 0.001 + 0.3 * t) == pytest.approx(0.3)
    assert abs(latency_trend_s_per_s(t, np.full_like(t, 0.002))) < 1e-12


@pytest.mark.parametrize(
    "kw",
    [{"start_interval_s": 0}, {"start_interval_s": 1e-3, "steps": 0}, {"start_interval_s": 1e-3, "max_doublings": -1}],
)
def test_bad_settings_name_the_field(kw):
    with pytest.raises(ConfigError) as err:
        interval_search(oracle(1e-3), **kw)
    assert next(iter(k for k in kw if k != "start_interval_s" or kw[k] == 0)) in str(err.value)


def indexed(measure, calls):
    """``measure_many`` over ``measure`` that notes ``(interval, serial position)`` of every point it runs."""

    def many(intervals_s, first):
        calls.extend((v, first + i) for i, v in enumerate(intervals_s))
        return [dict(measure(v), position=first + i) for i, v in enumerate(intervals_s)]

    return many


def serial_positions(measure):
    """``measure`` that tags each record with its position in the serial order."""
    count = {"k": 0}

    def one(interval_s):
        count["k"] += 1
        return dict(measure(interval_s), position=count["k"] - 1)

    return one


@pytest.mark.parametrize("limit_s", [0.9e-3, 1.37e-3, 5.5e-3, 0.0639, 10.0])
@pytest.mark.parametrize("batch", [None, 1, 2, 3, 5])
@pytest.mark.parametrize("stop", [False, True])
def test_batched_search_keeps_the_serial_records(limit_s, batch, stop):
    kw = dict(start_interval_s=1e-3, publishers=3, steps=20, max_doublings=8, stop_at_first_failure=stop)
    serial = interval_search(serial_positions(oracle(limit_s)), **kw)
    calls, seen = [], []
    many = interval_search(
        serial_positions(oracle(limit_s)),
        measure_many=indexed(oracle(limit_s), calls),
        batch=batch,
        on_record=seen.append,
        **kw,
    )
    assert many.records == serial.records  # positions included: every point seeded as in the serial order
    assert seen == many.records
    for f in ("interval_s", "rate_per_s", "error_bound", "saturated_everywhere", "limit_reached"):
        a, b = getattr(serial, f), getattr(many, f)
        assert a == b or (math.isnan(a) and math.isnan(b)), f
    # every point handed over at once was measured at its serial position; speculative ones are only dropped
    kept = {r["interval_s"]: r["position"] for r in many.records}
    assert all(kept.get(v, k) == k for v, k in calls)


def test_doubling_bracket_runs_ahead_and_drops_the_rest():
    calls = []
    res = interval_search(
        oracle(5.5e-3), start_interval_s=1e-3, measure_many=indexed(oracle(5.5e-3), calls), batch=3, steps=4
    )
    doubling = [v for v, _ in calls][:6]
    assert doubling == [1e-3, 2e-3, 4e-3, 8e-3, 16e-3, 32e-3]  # two brackets of 3; 8 ms passes in the second
    assert [r["interval_s"] for r in res.records if r["phase"] == "doubling"] == [1e-3, 2e-3, 4e-3, 8e-3]
    assert res.records[4]["position"] == 4  # the refine grid starts right after the kept doubling points


def test_bad_batch_names_the_field():
    with pytest.raises(ConfigError, match="batch"):
        interval_search(oracle(1e-3), start_interval_s=1e-3, measure_many=lambda v, k: [], batch=0)


def noisy(seed_limits):
    """A non-monotone broker: sustainable at the intervals of ``seed_limits`` (a set of rounded ms) and
    above the first limit; records carry the point's serial position (``measure_many`` style)."""

    def many(intervals_s, first):
        return [
            {
                "sustainability": 1.0
                if interval_s >= seed_limits[0] or round(interval_s * 1e4) in seed_limits[1]
                else 0.5,
                "position": first + i,
            }
            for i, interval_s in enumerate(intervals_s)
        ]

    return many


@pytest.mark.parametrize(
    "limits", [(5.5e-3, set()), (6.1e-3, {44}), (7.9e-3, {41, 60}), (4.05e-3, set()), (8e-3, set())]
)
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_upward_refine_finds_the_full_grids_limit_and_the_point_below(limits, batch):
    """Measuring the refine grid upwards until the first sustainable point gives the full grid's
    limit and its unsustainable point just below (non-monotone outcomes included), measures no point
    above the limit, and measures every point at its position in the full search."""
    kw = dict(start_interval_s=1e-3, publishers=3, steps=20)
    full = interval_search(lambda v: None, measure_many=noisy(limits), batch=batch, **kw)
    up = interval_search(lambda v: None, measure_many=noisy(limits), batch=batch, stop_at_first_success=True, **kw)
    for f in ("interval_s", "rate_per_s", "error_bound", "saturated_everywhere", "limit_reached"):
        assert getattr(full, f) == getattr(up, f), f
    by_interval = {r["interval_s"]: r for r in full.records}
    assert all(by_interval[r["interval_s"]] == r for r in up.records)  # same point, same position, same outcome
    refine = [r["interval_s"] for r in up.records if r["phase"] == "refine"]
    assert refine == sorted(refine) and all(v <= up.interval_s for v in refine)
    below = [r for r in full.records if not r["sustainable"] and r["interval_s"] < full.interval_s]
    assert max(r["interval_s"] for r in below) in {r["interval_s"] for r in up.records}
    assert len(up.records) <= len(full.records)


def test_upward_refine_serially_without_measure_many():
    calls = []
    res = interval_search(oracle(5.5e-3, calls), start_interval_s=1e-3, stop_at_first_success=True)
    assert res.interval_s == interval_search(oracle(5.5e-3), start_interval_s=1e-3).interval_s
    assert calls[4:] == pytest.approx(4e-3 + 0.2e-3 * np.arange(1, 9))  # 4.2 ... 5.6 ms, then stop


def test_upward_and_downward_stops_are_exclusive():
    with pytest.raises(ConfigError, match="stop_at_first_success"):
        interval_search(oracle(1e-3), start_interval_s=1e-3, stop_at_first_failure=True, stop_at_first_success=True)


def spurious(limit_interval_s, fail_once_at, calls):
    """An oracle whose first run at each interval in ``fail_once_at`` fails (interference)."""
    hit = set()

    def measure(interval_s):
        calls.append(interval_s)
        key = round(interval_s, 12)
        if any(math.isclose(interval_s, v) for v in fail_once_at) and key not in hit:
            hit.add(key)
            return {"sustainability": 0.5}
        return {"sustainability": 1.0 if interval_s >= limit_interval_s else 0.9}

    return measure


def test_one_spurious_failure_halves_the_limit_without_retries_and_not_with_them():
    # limit 5.5 ms: doubling passes at 8 ms; a spurious failure there sends the search to 16 ms
    kw = dict(start_interval_s=1e-3, stop_at_first_failure=True)
    plain = interval_search(spurious(5.5e-3, [8e-3], []), **kw)
    assert plain.interval_s > 8e-3
    calls = []
    res = interval_search(spurious(5.5e-3, [8e-3], calls), retries=1, **kw)
    truth = interval_search(oracle(5.5e-3), **kw)
    assert res.interval_s == truth.interval_s
    assert calls[:8] == [1e-3, 1e-3, 2e-3, 2e-3, 4e-3, 4e-3, 8e-3, 8e-3]  # failing points measured again


def test_retries_keep_every_run_and_mark_the_point_verdict():
    calls = []
    res = interval_search(oracle(5.5e-3, calls), start_interval_s=1e-3, retries=2, stop_at_first_failure=True)
    # each truly failing point is run 3 times: 1, 2, 4 ms in doubling, and the first failure of the refinement
    assert calls[:7] == [1e-3] * 3 + [2e-3] * 3 + [4e-3]
    first = [r for r in res.records if r["interval_s"] == 1e-3]
    assert [r["attempt"] for r in first] == [0, 1, 2]
    assert "point_sustainable" not in first[0] and first[-1]["point_sustainable"] is False
    passing = [r for r in res.records if r["interval_s"] == 8e-3]
    assert len(passing) == 1 and passing[0]["point_sustainable"] is True
    assert len(calls) == len(res.records)
    assert res.interval_s == interval_search(oracle(5.5e-3), start_interval_s=1e-3).interval_s


def test_retries_in_the_upward_refinement():
    # grid [4, 8] ms in 0.2 ms steps measured upwards: 5.6 ms is the first sustainable point
    kw = dict(start_interval_s=1e-3, stop_at_first_success=True)
    plain = interval_search(spurious(5.5e-3, [5.6e-3], []), **kw)
    assert plain.interval_s == pytest.approx(5.8e-3)  # the spurious failure moves the limit one step
    res = interval_search(spurious(5.5e-3, [5.6e-3], []), retries=1, **kw)
    assert res.interval_s == pytest.approx(5.6e-3)


@pytest.mark.parametrize(
    "kw", [{"retries": -1}, {"retries": 1.5}, {"retries": True}, {"retries": 1, "measure_many": lambda v, first: [{}]}]
)
def test_bad_retries_name_the_field(kw):
    with pytest.raises(ConfigError, match="retries"):
        interval_search(oracle(2e-3), start_interval_s=1e-3, **kw)
