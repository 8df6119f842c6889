"""The sinks' compiled tallies against the NumPy expressions they replace.

:class:`pubsim.sim.records.LatencyHistogram` bins, the throughput series'
bins and the window counts must come out exactly as the chain of NumPy
temporaries gave them (records stay identical), edge values included: zero,
negative, not a number, infinities, bin edges, beyond the last edge.
"""

from __future__ import annotations

import numpy as np

from pubsim.sim import records as R


def _edge_values(rng):
    h = R.LatencyHistogram()
    v = np.concatenate(
        [
            rng.exponential(0.01, 2000),
            10.0 ** rng.uniform(-12, 7, 2000),  # below low, across, above high
            h.edges[::7],  # exact edges
            np.nextafter(h.edges[::11], 0.0),
            [0.0, -0.0, -1e-3, np.nan, np.inf, -np.inf, 1e-9, 1e5, 1e200],
        ]
    )
    return rng.permutation(v)


def test_histogram_bins_equal_numpy():
    rng = np.random.default_rng(2)
    h = R.LatencyHistogram()
    values = _edge_values(rng)
    h.add(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.floor(np.log10(values / h.low) * h.per_decade) + 1
    np.fmax(pos, 0.0, out=pos)
    want = np.bincount(np.minimum(pos, len(h.edges)).astype(np.int64), minlength=len(h.counts))
    np.testing.assert_array_equal(h.counts, want)


def test_series_bins_and_window_counts_equal_numpy():
    rng = np.random.default_rng(8)
    t = np.concatenate([rng.uniform(-3.0, 40.0, 5000), np.arange(-2, 30) * 0.25, [np.nan, np.inf, -np.inf]])
    t = rng.permutation(t)
    bin_s = 0.25
    series = np.zeros(3, np.int64)
    top = R._last_bin(t, bin_s)
    series = np.concatenate([series, np.zeros(top + 1 - len(series), np.int64)])
    R._add_bins(t, bin_s, series)
    with np.errstate(invalid="ignore"):
        b = np.floor(t / bin_s)
    b = b[np.isfinite(b)].astype(np.int64)
    want = np.bincount(b[b >= 0])
    np.testing.assert_array_equal(series, want)
    pub = t - rng.exponential(1.0, len(t))
    inw = (pub >= 1.5) & (pub < 20.0)
    egress = int(((t >= 1.5) & (t < 20.0)).sum())
    assert R._delivered_counts(t, pub, 1.5, 20.0, bin_s) == (int(inw.sum()), egress, len(want) - 1)
    np.testing.assert_array_equal(R._latencies_in(t, pub, 1.5, 20.0), t[inw] - pub[inw])


def _numpy_bins(h, values):
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.floor(np.log10(values / h.low) * h.per_decade) + 1
    pos = np.where(np.isnan(pos), 0.0, np.fmax(pos, 0.0))
    return np.bincount(np.minimum(pos, len(h.edges)).astype(np.int64), minlength=len(h.counts))


def _near_edges(h, rng):
    """Values whose NumPy position is an integer or one float away from one (the table's doubtful zone)."""
    pos = np.arange(-5, len(h.edges) + 5)
    x = h.low * 10.0 ** (pos / h.per_decade)
    out = [x, np.nextafter(x, 0.0), np.nextafter(x, np.inf), x * (1 + 3e-16), x * (1 - 3e-16)]
    out.append(x * (1.0 + rng.uniform(-1e-6, 1e-6, len(x))))  # inside and just outside the margin
    return np.concatenate(out)


def test_histogram_table_bins_equal_numpy_log10():
    """The table shortcut of LatencyHistogram.add gives NumPy's bins, also near every edge,
    for other bounds and resolutions, and for a million random latencies."""
    rng = np.random.default_rng(5)
    for low, high, per_decade in ((1e-9, 1e5, 200), (1e-6, 10.0, 37), (3e-7, 2e3, 1000)):
        h = R.LatencyHistogram(low=low, high=high, per_decade=per_decade)
        values = np.concatenate([_near_edges(h, rng), _edge_values(rng), 10.0 ** rng.uniform(-13, 8, 1_000_000)])
        h.add(values)
        np.testing.assert_array_equal(h.counts, _numpy_bins(h, values))
