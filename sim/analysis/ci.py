"""Confidence intervals over replications (Student t), for tables and bands.

Uses :func:`sim.study.stats.summary_with_ci` when it is available, so that
studies and reports share one definition; the local fallback computes the
same t interval: ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)`` (half-width NaN
for a single replication).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["with_ci"]


def _local(df, by, value_cols, confidence):
    rows = []
    for key, grp in df.groupby(list(by), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        for col in value_cols:
            x = grp[col].to_numpy(dtype=float)
            x = x[np.isfinite(x)]
            n = x.size
            mean = x.mean() if n else np.nan
            hw = (stats.t.ppf((1 + confidence) / 2, n - 1) * x.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
            row.update({f"{col}_mean": mean, f"{col}_hw": hw, f"{col}_n": n})
        rows.append(row)
    return pd.DataFrame(rows)


def with_ci(df, by, value_cols, confidence=0.95):
    """One row per group of ``by``: ``<col>_mean``, ``<col>_hw`` (half-width
    of the ``confidence`` interval) and ``<col>_n`` for each value column."""
    return _local(df, list(by), list(value_cols), confidence)
