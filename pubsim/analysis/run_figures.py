"""Figures of a run, as matplotlib Figure objects (saving is the caller's choice)."""
from __future__ import annotations

import matplotlib.pyplot as plt  # the backend is the caller's choice (inline in Jupyter, Agg headless)

__all__ = ["latency_cdf", "throughput", "style_latency_axes"]


def latency_cdf(ecdfs):
    """Latency ECDFs; ``ecdfs`` maps a label to a DataFrame (latency_s, fraction)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, df in ecdfs.items():
        ax.step(df["latency_s"] * 1e3, df["fraction"], where="post", label=label)
    style_latency_axes(ax)
    fig.tight_layout()
    return fig


def style_latency_axes(ax):
    """Log latency axis in ms, fraction of deliveries up, grid and legend."""
    ax.set_xscale("log")
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
