"""Errors of a simulated figure against a measured one, as the validation reports them."""

from __future__ import annotations

import math

__all__ = ["bracket_error_pct", "pct_error"]


def pct_error(sim, meas):
    """``100 (sim - meas) / meas``; NaN when ``meas`` is 0."""
    return 100.0 * (sim - meas) / meas if meas else math.nan


def bracket_error_pct(sim, exact, any_stamp):
    """Error (%) of ``sim`` against the interval between a run's two latency estimates.

    A subscriber that reads several messages at once gets one receive stamp
    for them all, the last one's, so a percentile over every message
    (``latency_any_*``) is never below the true one; over the messages
    whose stamp is their own (``latency_*``) it is a subset that, in the
    bursts a stalled broker sends, keeps the youngest message of each read
    (``calibration/README.md``, "Latency from wire to wire"). The truth then
    lies between the two: 0 inside ``[min, max]`` of them, else the error
    against the nearer end. NaN if either is unknown.
    """
    if any(x is None or math.isnan(x) for x in (sim, exact, any_stamp)):
        return math.nan
    lo, hi = min(exact, any_stamp), max(exact, any_stamp)
    if lo <= sim <= hi:
        return 0.0
    return pct_error(sim, lo if sim < lo else hi)
