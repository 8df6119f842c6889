"""The saturation search with chosen publishers re-rated, a rate-weighted
sp-ratio, the bottleneck station, and parallel refine probes equal to serial."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pubsim import BrokerParams, Constant, PublisherParams, SubscriberParams, star
from pubsim.analysis import rerated_publishers, saturation_search
from pubsim.analysis.saturation import _probe
from pubsim.sim.errors import ConfigError
from pubsim.study.executors import DaskExecutor, LocalExecutor, SerialExecutor
from pubsim.testing import ZERO_LINK, single_queue

SERVICE_S = 1e-3  # M/D/1: capacity 1000 msg/s


def md1_with_probe(fast_subs=1, probe_subs=1, probe_rate_per_s=1.0, fast_rate_per_s=100.0):
    """One broker (constant 1 ms per message), a Poisson publisher ``load`` on
    topic ``a`` and a constant ``probe`` publisher on topic ``b``."""
    broker = BrokerParams(ingress_cost_s=Constant(value=SERVICE_S), queue_messages=200)
    pubs = {
        "load": PublisherParams(topics=("a",), rate_per_s=fast_rate_per_s),
        "probe": PublisherParams(topics=("b",), arrival="constant", rate_per_s=probe_rate_per_s),
    }
    subs = {f"sa{i}": SubscriberParams(subscriptions=("a",)) for i in range(fast_subs)}
    subs.update({f"sb{i}": SubscriberParams(subscriptions=("b",)) for i in range(probe_subs)})
    return star(broker=broker, publishers=pubs, subscribers=subs, link=ZERO_LINK, protocol="none")


def test_only_matched_publishers_are_rerated_and_the_limit_matches_md1():
    # capacity 1000 msg/s, of which the un-re-rated probe takes 1 msg/s
    g = md1_with_probe()
    s = saturation_search(g, rerate=["lo*"], start_interval_s=2.5e-4, duration_s=2.0, warmup_s=0.5, seed=3)
    assert s.publishers == 1 and s.other_rate_per_s == 1.0
    assert s.limit_reached and not s.saturated_everywhere
    expected = 1.0 / SERVICE_S - 1.0
    assert abs(s.limit_per_s - expected) / expected <= s.error_bound_pct / 100 + 0.01, s.record()
    assert s.limit_total_per_s == pytest.approx(s.limit_per_s + 1.0)
    # the probe publisher kept 1 msg/s in every probe: offered = re-rated rate + 1
    offered = s.probes["offered_per_s"] - s.probes["rate_per_publisher_per_s"]
    assert offered.abs().max() < 0.1 * s.probes["rate_per_publisher_per_s"].max()
    assert s.bottleneck is not None and "broker" in s.bottleneck
    assert s.bottleneck_utilization > 0.97
    assert s.bottleneck_interval_s < s.interval_s


def test_rerate_patterns_select_by_name():
    g = md1_with_probe()
    assert set(rerated_publishers(g)) == {"load", "probe"}
    assert rerated_publishers(g, "pro?e") == ["probe"]
    assert set(rerated_publishers(g, ["load", "probe"])) == {"load", "probe"}
    with pytest.raises(ConfigError, match="nosuch"):
        saturation_search(g, rerate=["nosuch*"])
    with pytest.raises(ConfigError, match="rerate"):
        saturation_search(lambda interval_s: g, rerate="load")


def test_rate_weighted_sp_ratio_differs_from_publisher_counted():
    # fan-out 10 at 500 msg/s, fan-out 1 at 1 msg/s: per topic the summary counts
    # publishers, (10 + 1) / 2 = 5.5; weighted by rate (500 x 10 + 1 x 1) / 501 = 9.98
    g = md1_with_probe(fast_subs=10, probe_subs=1, fast_rate_per_s=500.0)
    rec = _probe(g, 3.0, 0.5, 1, 0, "batch")
    assert rec["sp_ratio"] == pytest.approx(5.5)
    assert rec["sp_ratio_weighted"] == pytest.approx((500 * 10 + 1) / 501, rel=0.01)
    # well below capacity: the weighted rule says 1, the counted one overstates by ~1.8
    assert rec["sustainability_weighted"] == pytest.approx(1.0, abs=0.01)
    assert rec["sustainability"] == pytest.approx(rec["sp_ratio_weighted"] / 5.5, rel=0.01)
    assert rec["delivery_ratio_weighted"] == pytest.approx(1.0, abs=0.01)


def test_rate_weighted_sustainability_catches_a_lost_fanout():
    # the counted sp-ratio (5.5) hides an overload of the fan-out-10 flow:
    # at 1.2 x capacity the broker drops ~1/6 of messages, the counted rule still
    # sees egress / (ingress x 5.5) > 1, the weighted one sees < 0.99
    g = md1_with_probe(fast_subs=10, probe_subs=1, fast_rate_per_s=1200.0)
    rec = _probe(g, 3.0, 0.5, 1, 0, "batch")
    assert rec["sustainability"] > 1.0
    assert rec["delivery_ratio_weighted"] < 0.99


def _same(a, b):
    for f in (
        "limit_per_s",
        "interval_s",
        "error_bound_pct",
        "publishers",
        "limit_reached",
        "bottleneck",
        "bottleneck_utilization",
        "bottleneck_interval_s",
    ):
        x, y = getattr(a, f), getattr(b, f)
        assert x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)), f
    pd.testing.assert_frame_equal(a.probes, b.probes)


@pytest.mark.parametrize("stop, speculate", [(False, None), (True, 3)])
def test_process_pool_gives_the_serial_search(stop, speculate):
    # doubling 0.1, 0.2, 0.4 ms fail (20k, 10k, 5k msg/s offered, 5k served), 0.8 ms passes: with 2 workers
    # two brackets of two; with speculate=3 brackets (0.1, 0.2, 0.4), (0.8, 1.6, 3.2), the last two dropped
    g = single_queue(rate_per_s=1000, service=Constant(value=2e-4), n_publishers=2, queue_messages=100)
    kw = dict(start_interval_s=1e-4, duration_s=1.0, warmup_s=0.2, seed=11, steps=8, stop_at_first_failure=stop)
    serial = saturation_search(g, **kw)
    in_process = saturation_search(g, executor=SerialExecutor(), **kw)
    pooled = saturation_search(g, executor=LocalExecutor(2), speculate=speculate, **kw)
    assert list(serial.probes["phase"]).count("doubling") == 4
    _same(serial, in_process)
    _same(serial, pooled)
    refine = (serial.probes["phase"] == "refine").sum()
    assert refine == 7 if not stop else 1 <= refine <= 7


def test_dask_local_gives_the_serial_search():
    pytest.importorskip("distributed")
    g = single_queue(rate_per_s=1000, service=Constant(value=2e-4), n_publishers=2, queue_messages=100)
    kw = dict(start_interval_s=1e-4, duration_s=1.0, warmup_s=0.2, seed=11, steps=6)
    _same(saturation_search(g, **kw), saturation_search(g, executor=DaskExecutor("local", 2), **kw))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_speculation_names_the_field(bad):
    g = single_queue(rate_per_s=1000, service=Constant(value=2e-4), n_publishers=2, queue_messages=100)
    with pytest.raises(ConfigError, match="speculate"):
        saturation_search(g, start_interval_s=1e-4, duration_s=1.0, speculate=bad)


@pytest.mark.parametrize("executor", [None, "pool"])
def test_upward_refine_gives_the_full_searchs_limit_bottleneck_and_probes(executor):
    """``stop_at_first_success``: the full grid's limit, error and bottleneck for the same seed, its
    probes being the full search's rows at and below the limit (the same replication each)."""
    g = single_queue(rate_per_s=1000, service=Constant(value=2e-4), n_publishers=2, queue_messages=100)
    kw = dict(start_interval_s=1e-4, duration_s=1.0, warmup_s=0.2, seed=11, steps=8)
    full = saturation_search(g, **kw)
    up = saturation_search(g, executor=LocalExecutor(2) if executor else None, stop_at_first_success=True, **kw)
    for f in ("limit_per_s", "interval_s", "error_bound_pct", "bottleneck", "bottleneck_utilization"):
        assert getattr(full, f) == getattr(up, f), f
    assert up.bottleneck is not None
    mine = up.probes.set_index("interval_s")
    pd.testing.assert_frame_equal(mine, full.probes.set_index("interval_s").loc[mine.index])
    refine = up.probes[up.probes["phase"] == "refine"]
    assert len(up.probes) < len(full.probes) and refine["interval_s"].max() == full.interval_s
