"""Virtual saturation search, sweep knees and study figures."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from pubsim.analysis import figures as F  # noqa: E402
from pubsim.analysis import knees, saturation_search, with_publisher_rate  # noqa: E402
from pubsim.sim.distributions import Constant  # noqa: E402
from pubsim.sim.errors import ConfigError  # noqa: E402
from pubsim.testing import single_queue, tandem  # noqa: E402
from tests.study.study_frames import PRESET_COL, SERVICE_S, study_frames  # noqa: E402


@pytest.fixture(scope="module")
def frames():
    return study_frames()


@pytest.mark.parametrize("service_s", [47e-6, 130e-6])
def test_search_finds_md1_capacity_within_its_error_bound(service_s):
    # M/D/1 broker (Poisson publishers, constant service): capacity = 1 / service.
    # The search's resolution is its error bound; the 0.99 rule adds up to 1 %
    # (a load 1 % past capacity still passes egress / ingress >= 0.99).
    capacity = 1.0 / service_s
    g = single_queue(rate_per_s=1000, service=Constant(value=service_s), n_publishers=10, queue_messages=100)
    s = saturation_search(g, start_interval_s=1e-4, duration_s=2.0, warmup_s=0.5, seed=5)
    assert s.limit_reached and not s.saturated_everywhere
    assert 0 < s.error_bound_pct <= 5.0 + 1e-9
    err = abs(s.limit_per_s - capacity) / capacity
    assert err <= s.error_bound_pct / 100 + 0.01, (s.record(), capacity)
    assert s.limit_per_s == pytest.approx(10 / s.interval_s)
    probes = s.probes
    assert list(probes["phase"].unique()) == ["doubling", "refine"]
    # every sustainable probe is at or below ~capacity; every unsustainable one above it
    assert (probes.loc[probes["sustainable"], "rate_per_publisher_per_s"] * 10 <= capacity * 1.011).all()
    assert (probes.loc[~probes["sustainable"], "rate_per_publisher_per_s"] * 10 > capacity * 0.99).all()


def test_search_limit_above_range_is_flagged():
    g = single_queue(rate_per_s=10, service=Constant(value=1e-6), n_publishers=2)
    s = saturation_search(g, start_interval_s=1e-2, duration_s=1.0, warmup_s=0.2)
    assert not s.limit_reached and s.error_bound_pct == 0 and len(s.probes) == 1


def test_search_with_factory_counts_publishers():
    def factory(interval_s):
        return tandem(rate_per_s=1.0 / interval_s, services=[Constant(value=2e-4), Constant(value=1e-4)])

    s = saturation_search(factory, start_interval_s=1e-4, duration_s=2.0, warmup_s=0.5, steps=10)
    assert s.publishers == 1
    assert abs(s.limit_per_s - 5000) / 5000 <= s.error_bound_pct / 100 + 0.01


def test_schedule_publishers_cannot_be_rerated():
    from pubsim.models import topology as T
    from pubsim.models.params.client import PublisherParams

    g = single_queue(rate_per_s=10, service=Constant(value=1e-6))
    n = T.clients(g, T.NodeKind.PUBLISHER)[0]
    g.nodes[n][T.PARAMS] = PublisherParams(
        topics=("t",),
        arrival="schedule",
        schedule_time_s=(0.0, 1.0),
        schedule_size_bytes=(0, 0),
        schedule_topic=("t", "t"),
    )
    with pytest.raises(ConfigError, match="schedule"):
        with_publisher_rate(g, 5.0)
    with pytest.raises(ConfigError, match="saturation_search source"):
        saturation_search(42)


def test_knees_bracket_the_capacities(frames):
    _, summary, *_ = frames
    k = knees(summary, [PRESET_COL]).set_index(PRESET_COL)
    for preset, service in SERVICE_S.items():
        cap = 1 / service
        assert k.loc[preset, "last_sustainable_per_s"] < cap < k.loc[preset, "first_unsustainable_per_s"]
        assert k.loc[preset, "saturated_egress_per_s"] == pytest.approx(cap, rel=0.02)
        assert k.loc[preset, "sustainability_above"] < 0.99 <= k.loc[preset, "sustainability_below"]
        assert math.isfinite(k.loc[preset, "sustainability_above_hw"]) and k.loc[preset, "replications"] == 2


def test_knee_beyond_sweep_is_nan(frames):
    _, summary, *_ = frames
    low = summary[summary["offered_per_s"] < 8000]
    k = knees(low, [PRESET_COL])
    assert k["first_unsustainable_per_s"].isna().all() and k["last_sustainable_per_s"].notna().all()


def test_latency_cdf_figure(frames):
    _, _, latency, *_ = frames
    fig = F.latency_cdfs(latency, {0: "low", 2: "high"})
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_legend().get_texts()] == ["low", "high"]
    assert len(ax.lines) == 2 and len(ax.collections) == 2  # one CI band per line (2 replications)
    x, y = ax.lines[1].get_data()
    assert (y[1:] >= y[:-1]).all() and x.max() > 5  # saturated point: ~10 ms queueing delay


def test_load_curves_marks_knees(frames):
    _, summary, *_ = frames
    k = knees(summary, [PRESET_COL])
    fig = F.load_curves(summary, [PRESET_COL], knees=k)
    ax_t, ax_l = fig.axes
    vlines = [ln for ln in ax_t.lines if ln.get_linestyle() == "--"]
    assert sorted(ln.get_xdata()[0] for ln in vlines) == sorted(k["last_sustainable_per_s"])
    assert ax_l.get_ylabel() == "loss rate" and len(ax_l.get_legend().get_texts()) == 2


def test_station_load_and_series(frames):
    _, summary, _, stations, series, _ = frames
    fig = F.station_load(stations, summary, [PRESET_COL])
    ax_u = fig.axes[0]
    assert len(ax_u.lines) == 2
    assert max(ln.get_ydata().max() for ln in ax_u.lines) == pytest.approx(1.0, abs=0.02)
    fig2 = F.series_over_time(series, {0: "a", 1: "b"}, window=(0.2, 1.0))
    assert len([ln for ln in fig2.axes[0].lines]) == 4


def test_tree_traffic_bars_per_broker_and_edge():
    from pubsim.run import simulate

    r = simulate(tandem(rate_per_s=200, services=[Constant(value=1e-4)] * 3), duration_s=1.0)
    st = r.stations()
    assert F.broker_edges(st) == ["link:b0->b1", "link:b1->b0", "link:b1->b2", "link:b2->b1"]
    fig = F.tree_traffic(st, window_s=1.0)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["b0", "b1", "b2", "b0->b1", "b1->b0", "b1->b2", "b2->b1"]
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights[3] == heights[5] > 0 and heights[4] == heights[6] == 0  # SF: nothing flows back


def _latency_fig(lo_ms, hi_ms):
    from pubsim.analysis.run_figures import latency_cdf

    x = np.linspace(lo_ms, hi_ms, 50) / 1e3
    return latency_cdf({"run": pd.DataFrame({"latency_s": x, "fraction": np.linspace(0, 1, 50)})})


def test_narrow_latency_range_gets_a_readable_linear_axis():
    fig = _latency_fig(14.7, 15.04)  # the range that overlapped labels on a log axis
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ax.get_xscale() == "linear" and 2 <= len(labels) <= 7 and len(set(labels)) == len(labels)
    assert ax.get_xlabel() == "latency (ms)"
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))  # no two labels overlap


def test_wide_latency_range_is_logarithmic_with_plain_labels():
    fig = _latency_fig(0.05, 80.0)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_xscale() == "log"
    assert all("$" not in t.get_text() for t in ax.get_xticklabels())  # 0.1, 1, 10 rather than 10^-1
