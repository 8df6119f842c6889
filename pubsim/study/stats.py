"""Confidence intervals over replications (one place for the CI logic)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["summary_with_ci", "t_half_width"]

_IDS = ("point_id", "replication")


def t_half_width(values, confidence=0.95):
    """Half-width of the Student-t confidence interval of the mean.

    ``t_{1-a/2, n-1} * s / sqrt(n)`` over the finite values (s: sample
    standard deviation); NaN with fewer than two values.
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return math.nan
    return float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def summary_with_ci(df, by=None, value_cols=None, confidence=0.95):
    """Mean, CI half-width and n of every value column, per group.

    Parameters
    ----------
    df : pandas.DataFrame
        A summary table (:func:`pubsim.study.load_summary`), one row per
        (point, replication).
    by : list of str, optional
        Grouping columns; default the varied paths (``df.attrs["varied"]``,
        set by ``load_summary``), else ``point_id``.
    value_cols : list of str, optional
        Default: every numeric column that is not an id or grouping column.
    confidence : float
        Confidence level of the two-sided Student-t interval over
        replications (replications are independent; points share common
        random numbers, which does not change a per-point interval).

    Returns
    -------
    pandas.DataFrame
        Tidy: the ``by`` columns, ``metric``, ``mean``, ``half_width``,
        ``n`` (finite values) and ``confidence``; ``half_width`` is NaN when
        n < 2.
    """
    by = list(by if by is not None else (df.attrs.get("varied") or ["point_id"]))
    if value_cols is None:
        value_cols = [
            c
            for c in df.columns
            if c not in by
            and c not in _IDS
            and pd.api.types.is_numeric_dtype(df[c])
            and not pd.api.types.is_bool_dtype(df[c])
        ]
    rows = []
    for key, grp in df.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for col in value_cols:
            x = grp[col].to_numpy(dtype=float)
            finite = x[np.isfinite(x)]
            rows.append(
                {
                    **dict(zip(by, key)),
                    "metric": col,
                    "mean": float(finite.mean()) if len(finite) else math.nan,
                    "half_width": t_half_width(finite, confidence),
                    "n": len(finite),
                    "confidence": confidence,
                }
            )
    return pd.DataFrame(rows, columns=[*by, "metric", "mean", "half_width", "n", "confidence"])
