"""Figures of the paper folders (matplotlib Figure objects; saving is the command's)."""

from __future__ import annotations

import numpy as np

from ...analysis.run_figures import plt

__all__ = ["scaleup", "bars", "lines"]


def _ci(df, y):
    col = f"{y}_ci95"
    return df[col].to_numpy(dtype=float) if col in df else None


def scaleup(df, *, x, y, hue, title, ylabel, xlabel, logy=True):
    """One line per ``hue`` of ``y`` against ``x`` (log-log), with 95 % error bars when ``{y}_ci95`` exists."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for key, grp in df.groupby(hue, sort=False):
        grp = grp.sort_values(x)
        err = _ci(grp, y)
        ax.errorbar(
            grp[x], grp[y], yerr=None if err is None else np.nan_to_num(err), marker="o", capsize=3, label=str(key)
        )
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def bars(df, *, group, hue, y, title, ylabel, logy=True, err=None):
    """Grouped bars: one group per ``group`` value, one bar per ``hue`` value (NaN bars left out)."""
    groups = list(dict.fromkeys(df[group]))
    hues = list(dict.fromkeys(df[hue]))
    width = 0.8 / max(len(hues), 1)
    fig, ax = plt.subplots(figsize=(7, 4))
    for j, h in enumerate(hues):
        sub = df[df[hue] == h].set_index(group)
        vals = [float(sub[y].get(g, np.nan)) if g in sub.index else np.nan for g in groups]
        yerr = None
        if err is not None and err in sub:
            yerr = [float(sub[err].get(g, 0.0)) if g in sub.index else 0.0 for g in groups]
        ax.bar(
            np.arange(len(groups)) + (j - (len(hues) - 1) / 2) * width, vals, width, label=str(h), yerr=yerr, capsize=3
        )
    ax.set_xticks(np.arange(len(groups)))
    ax.set_xticklabels([str(g) for g in groups])
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def lines(df, *, x, y, hue, title, ylabel, xlabel, logx=False, logy=False):
    """One line per ``hue``, error bars from ``{y}_ci95`` when present."""
    fig = scaleup(df, x=x, y=y, hue=hue, title=title, ylabel=ylabel, xlabel=xlabel, logy=logy)
    if not logx:
        fig.axes[0].set_xscale("linear")
    return fig
