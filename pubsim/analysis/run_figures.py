"""Figures of a run, as matplotlib Figure objects (saving is the caller's choice)."""

from __future__ import annotations

import matplotlib.pyplot as plt  # the backend is the caller's choice (inline in Jupyter, Agg headless)
import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

#: A latency axis is logarithmic only when the data span at least this ratio (max / min).
LOG_SPAN = 20.0

__all__ = ["latency_cdf", "throughput", "style_latency_axes"]


def latency_cdf(ecdfs):
    """Latency ECDFs; ``ecdfs`` maps a label to a DataFrame (latency_s, fraction)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, df in ecdfs.items():
        ax.step(df["latency_s"] * 1e3, df["fraction"], where="post", label=label)
    style_latency_axes(ax)
    fig.tight_layout()
    return fig


def _x_range(ax):
    xs = [np.asarray(line.get_xdata(), dtype=float) for line in ax.get_lines()]
    xs = np.concatenate(xs) if xs else np.empty(0)
    xs = xs[np.isfinite(xs) & (xs > 0)]
    return (float(xs.min()), float(xs.max())) if xs.size else (np.nan, np.nan)


def style_latency_axes(ax):
    """Latency axis in ms (x), fraction of deliveries up, grid and legend.

    Logarithmic when the latencies span at least :data:`LOG_SPAN` (max /
    min), with plain tick labels (``0.5``, ``2``, ``10``) and no minor
    labels; linear otherwise, at most 6 ticks without an offset, so a narrow
    range (say 14.7 to 15.04 ms) gets readable, non-overlapping labels.
    """
    lo, hi = _x_range(ax)
    plain = FuncFormatter(lambda x, _: f"{x:.4g}")
    if lo > 0 and hi / lo >= LOG_SPAN:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.xaxis.set_major_formatter(plain)
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of deliveries")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def throughput(series, window=None):
    """Published and delivered messages per second over time."""
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(series["time_s"], series["published_per_s"], label="published")
    ax.plot(series["time_s"], series["delivered_per_s"], label="delivered")
    if window is not None:
        ax.axvspan(*window, color="grey", alpha=0.1, label="measurement window")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("messages per second")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig
