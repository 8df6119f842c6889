"""Service-time variability of a broker, fitted by simulation.

The demand fit (:mod:`pubsim.calibration.fit`) gives the *mean* CPU cost of a
message; the spread of the latency under load also depends on how variable
that cost is. For an M/G/1 queue the mean wait is
``rho E[S] (1 + cv^2) / (2 (1 - rho))`` (Pollaczek-Khinchine), but the
harness's publishers are paced in bursts, the broker has wake-ups and a CPU
quota, so no closed form applies. Instead the calibrator simulates the
measured runs that queue noticeably (utilization in a band) with the fitted
profile and each candidate coefficient of variation ``cv`` of the per-message
costs (gamma distributed; the loopback link is refitted for each ``cv`` so
that light-load latency stays matched), and keeps the ``cv`` whose latency
quantiles are closest to the measured ones in mean absolute log ratio.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..sim.errors import ConfigError
from .fit import _check, cap_of

__all__ = ["ServiceVariabilityCalibrator"]

_COLUMNS = ("config", "ingress_rate_per_s", "demand_s_per_ingress")


class ServiceVariabilityCalibrator:
    """Pick the coefficient of variation of per-message costs by simulation.

    Parameters
    ----------
    simulate : callable
        ``simulate(row, cv) -> dict`` with the ``latency_<q>_s`` of
        ``quantiles``: the simulated twin of a measured
        run (a row of the campaign's ``runs.csv``) with per-message costs of
        coefficient of variation ``cv``.
    cv_grid : sequence of float
        Candidate coefficients of variation (0 = constant costs).
    min_utilization, max_utilization : float
        Runs whose broker utilization (ingress rate x demand / CPU cap) lies
        in this band are used: below it queueing is negligible, above it the
        latency is dominated by the approach to saturation.
    max_runs : int
        At most this many runs per configuration (the most loaded ones).
    max_throttled_fraction : float
        Runs whose CPU quota throttled more than this fraction of its
        periods (``cap_throttled_period_fraction``, read from the cgroup's
        ``cpu.stat``) are not used: their millisecond tails are whole
        periods waited out, which the twin's CFS model produces from the
        load, and a per-message spread fitted to them would put that
        per-period wait into every message's cost (on
        ``data/mosquitto-wire`` it chose cv 2 and then overshot every
        light-load p99).
    quantiles : tuple of str
        Latency quantiles compared (``"p50"``, ``"p90"``, ``"p99"``).

    Attributes
    ----------
    params_ : dict
        ``service_cv`` (chosen), ``n_runs``, ``objective`` (cv -> mean
        absolute log ratio of simulated to measured latency quantiles).
    residuals_ : pandas.Series
        Per run used, the log ratio (simulated / measured) of the latency
        quantiles at the chosen ``cv``, averaged over ``quantiles``.
    """

    def __init__(
        self,
        *,
        simulate,
        cv_grid=(0.0, 0.5, 1.0, 1.5, 2.0),
        min_utilization=0.3,
        max_utilization=0.9,
        max_runs=3,
        quantiles=("p50", "p90", "p99"),
        max_throttled_fraction=0.01,
    ):
        if not cv_grid or any(not (c >= 0 and math.isfinite(c)) for c in cv_grid):
            raise ConfigError("cv_grid", cv_grid, "a non-empty list of numbers >= 0")
        if not 0 <= min_utilization < max_utilization:
            raise ConfigError("min_utilization", min_utilization, f"in [0, max_utilization={max_utilization})")
        self.simulate = simulate
        self.cv_grid = tuple(float(c) for c in cv_grid)
        self.min_utilization = min_utilization
        self.max_utilization = max_utilization
        self.max_runs = max_runs
        self.quantiles = tuple(quantiles)
        self.max_throttled_fraction = max_throttled_fraction

    def select(self, measurements):
        """The runs used: in the utilization band and not throttled, at most ``max_runs`` per config."""
        _check(measurements, _COLUMNS + tuple(f"latency_{q}_s" for q in self.quantiles))
        m = measurements.reset_index(drop=True)
        util = m["ingress_rate_per_s"] * m["demand_s_per_ingress"] / cap_of(m)
        keep = (util >= self.min_utilization) & (util <= self.max_utilization)
        if "cap_throttled_period_fraction" in m:
            # NaN (not measured) is kept; a run the quota throttled has tails that are the CFS model's
            keep &= ~(m["cap_throttled_period_fraction"] > self.max_throttled_fraction)
        band = m[keep].assign(utilization=util)
        band = band.sort_values("utilization", ascending=False)
        return band.groupby("config", sort=False).head(self.max_runs)

    def _log_ratios(self, row, cv):
        sim = self.simulate(row, cv)
        out = []
        for q in self.quantiles:
            meas, got = row[f"latency_{q}_s"], sim[f"latency_{q}_s"]
            if meas > 0 and got > 0:
                out.append(math.log(got / meas))
        return float(np.mean(out)) if out else math.nan

    def fit(self, measurements):
        runs = self.select(measurements)
        if runs.empty:
            raise ConfigError(
                "measurements",
                "no run in the utilization band",
                f"runs with utilization in [{self.min_utilization}, {self.max_utilization}]",
            )
        rows = [r.to_dict() for _, r in runs.iterrows()]
        ratios = {cv: np.array([self._log_ratios(r, cv) for r in rows]) for cv in self.cv_grid}
        objective = {cv: float(np.nanmean(np.abs(v))) if np.isfinite(v).any() else math.inf for cv, v in ratios.items()}
        best = min(self.cv_grid, key=lambda cv: (objective[cv], cv))
        self.params_ = {"service_cv": best, "n_runs": len(rows), "objective": objective}
        self.residuals_ = pd.Series(ratios[best], index=runs.index, name="log_excess_ratio")
        return self
