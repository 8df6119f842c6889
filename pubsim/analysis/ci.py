"""Confidence intervals over replications, wide (one row per group).

A thin reshaping of :func:`pubsim.study.stats.summary_with_ci` (the one place
for the CI logic: Student-t ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)``,
half-width NaN for a single replication) into the wide form that tables and
figures use.
"""

from __future__ import annotations

import pandas as pd

from ..study.stats import summary_with_ci

__all__ = ["with_ci"]


def with_ci(df, by, value_cols, confidence=0.95):
    """One row per group of ``by``: ``<col>_mean``, ``<col>_hw`` (half-width
    of the ``confidence`` interval) and ``<col>_n`` for each value column."""
    by, value_cols = list(by), list(value_cols)
    long = summary_with_ci(df, by=by, value_cols=value_cols, confidence=confidence)
    parts = {"mean": "mean", "hw": "half_width", "n": "n"}
    wide = long.pivot(index=by, columns="metric", values=list(parts.values()))
    out = pd.DataFrame(index=wide.index)
    for col in value_cols:
        for suffix, name in parts.items():
            out[f"{col}_{suffix}"] = wide[(name, col)]
    return out.reset_index()
