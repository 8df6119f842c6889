"""A capped broker's speed drift, fitted from the periods its quota throttled.

Below its limit a capped Mosquitto is throttled in some CFS periods and not
in others: in the 2026-11-27 campaign (``data/mosquitto-wire``) runs at 77 to
93 % of the quota had 0 to 46 % of their 10 ms periods throttled, and
runs at one utilization differed by tens of points. With constant costs
and paced arrivals the twin is never throttled there. Traced on the real
broker (``sched_switch`` on its core, p64-f4 at 3,600-4,000 msg/s), its busy
time per 10 ms period varied by 5-10 % (coefficient of variation) with
autocorrelations of 0.3-0.8 ten periods apart: the work per message drifts
slowly, not message by message.

:class:`SpeedDriftCalibrator` fits the broker's
``speed_drift_log_sd`` and ``speed_drift_time_s``
(:func:`pubsim.sim.kernels.set_speed_drift`) to the measured fractions of
throttled periods (``cap_throttled_period_fraction``, from the cgroup's
``cpu.stat``) of the sustainable runs, with the fluid model of a quota:
period ``p`` brings ``u x S_p`` quotas of work (``u`` the run's measured
CPU over its quota, or that at given costs: :meth:`SpeedDriftCalibrator.fit`)
to a backlog ``B``; it is throttled when
``B + u S_p > 1``, and ``B`` carries the excess (a Lindley recursion). Both
parameters are found by the method of moments, with common random numbers:
for each correlation time of ``time_grid_s``, the log-sd whose mean simulated
fraction over the runs equals the measured mean; of those, the pair whose
simulated run-to-run variance matches the measured residual variance (a slow
drift makes short runs differ: that spread identifies the time). A
bootstrap over runs gives their intervals.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from .harness.cpu import quota_us

__all__ = ["SpeedDriftCalibrator", "utilization_of_quota", "MAX_LOG_SD"]

#: Largest log-sd of the speed drift the fit searches (a factor e = 2.7 at one sd).
MAX_LOG_SD = 1.0


def utilization_of_quota(runs: pd.DataFrame) -> pd.Series:
    """Each run's broker CPU over its quota: CPU per message x ingress rate / cap (NaN uncapped)."""
    cap = runs["cpu_cap_fraction"].astype(float)
    return runs["demand_s_per_ingress"] * runs["ingress_rate_per_s"] / cap


class SpeedDriftCalibrator:
    """Fit a capped broker's speed drift to its throttled-period fractions.

    Parameters
    ----------
    time_grid_s : sequence of float
        Correlation times tried, s (0: independent per period).
    replications : int
        Simulated runs per measured run (common random numbers).
    min_utilization, max_utilization : float
        Runs whose CPU over quota lies outside are left out (light runs say
        nothing; at the quota every period is throttled whatever the drift).
    n_boot : int
        Bootstrap resamples of the runs for the intervals (0: none).
    max_interval_ratio : float
        With a bootstrap, the log-sd counts as identified only if the upper
        end of its 95 % interval is at most this many times the estimate
        (the estimate is still reported, with the reason).
    seed : int
        Seed of the simulated draws and of the bootstrap.

    Attributes
    ----------
    params_ : dict
        ``speed_drift_log_sd``, ``speed_drift_time_s``, ``n_runs``,
        ``identified`` (bool) and ``reason`` (why not, or "").
    intervals_ : dict
        Parameter -> (2.5 %, 97.5 %) bootstrap interval (empty without a bootstrap).
    table_ : pandas.DataFrame
        Per run: configuration, rate, ``utilization``, measured and
        simulated (mean, sd) throttled fractions.
    """

    def __init__(
        self,
        *,
        time_grid_s=(0.0, 0.05, 0.1, 0.3, 1.0, 3.0, 10.0),
        replications=200,
        min_utilization=0.5,
        max_utilization=0.99,
        n_boot=30,
        max_interval_ratio=3.0,
        seed=0,
    ):
        self.time_grid_s = tuple(float(t) for t in time_grid_s)
        self.replications = int(replications)
        self.min_utilization = float(min_utilization)
        self.max_utilization = float(max_utilization)
        self.n_boot = int(n_boot)
        self.max_interval_ratio = float(max_interval_ratio)
        self.seed = int(seed)

    def fit(self, runs: pd.DataFrame, demand_s=None) -> SpeedDriftCalibrator:
        """Fit on the sustainable capped runs of ``runs`` (one broker's training rows).

        ``demand_s``: CPU per ingress message of each row of ``runs`` (s) to
        load the fluid model with, e.g. the fitted demand model's
        (``predict``): the twin's costs, where a run's measured CPU already
        holds the drift it met. None (the default of
        :func:`pubsim.calibration.validate.fit_profiles`): each run's measured
        CPU, which did better on the training split of ``mosquitto-wire``
        (calibration/README.md, "Throttled below the limit").
        """
        if demand_s is not None:
            runs = runs.assign(demand_s_per_ingress=np.asarray(demand_s, dtype=float))
        missing = sorted(_NEEDED.difference(runs.columns))
        if missing:  # a campaign that did not read the cgroup's cpu.stat
            self.table_, self.intervals_ = pd.DataFrame(), {}
            self.params_ = _params(0.0, 0.0, 0, f"the runs do not record {', '.join(missing)}")
            return self
        rows = self._usable(runs)
        f = rows["cap_throttled_period_fraction"].to_numpy()
        self.table_ = rows[["config", "rate_per_s", "utilization", "cap_throttled_period_fraction"]].reset_index(
            drop=True
        )
        self.intervals_ = {}
        reason = _unidentified(f)
        if reason:
            self.params_ = _params(0.0, 0.0, len(rows), reason)
            return self
        model = _Fluid(rows, self.replications, np.random.default_rng(self.seed))
        sigma, tau = self._moments(model, np.arange(len(rows)), f)
        sim = model.fractions(sigma, tau)
        self.table_["simulated_mean"] = sim.mean(axis=0)
        self.table_["simulated_sd"] = sim.std(axis=0)
        self.params_ = _params(sigma, tau, len(rows), _at_bound(sigma, sim.mean(), f.mean()))
        if self.n_boot:
            self.intervals_ = self._bootstrap(model, f)
            self.params_["reason"] = self.params_["reason"] or self._too_wide(sigma)
            self.params_["identified"] = not self.params_["reason"]
        return self

    def _too_wide(self, sigma):
        """Why the log-sd is not identified by its bootstrap interval, or ""."""
        lo, hi = self.intervals_["speed_drift_log_sd"]
        if hi <= self.max_interval_ratio * sigma:
            return ""
        return (
            f"log-sd {sigma:.3g} not identified: its bootstrap 95 % interval [{lo:.3g}, {hi:.3g}] "
            f"reaches more than {self.max_interval_ratio:g} x the estimate"
        )

    def _usable(self, runs):
        rows = runs[runs["sustainable"].astype(bool)].copy()
        rows = rows[rows["cpu_cap_fraction"].notna() & rows["cap_throttled_period_fraction"].notna()]
        rows = rows[pd.to_numeric(rows["duration_s"], errors="coerce").gt(0)]  # periods per run need it
        rows["utilization"] = utilization_of_quota(rows)
        keep = rows["utilization"].between(self.min_utilization, self.max_utilization)
        return rows[keep]

    def _moments(self, model, idx, f):
        """(log-sd, time) matching the mean and the run-to-run variance of the fractions ``f`` of runs ``idx``."""
        best = None
        for tau in self.time_grid_s:
            sigma = model.log_sd_for_mean(idx, f.mean(), tau)
            sim = model.fractions(sigma, tau)[:, idx]
            resid = np.mean((f - sim.mean(axis=0)) ** 2)
            miss = abs(math.log(max(np.mean(sim.var(axis=0)), 1e-9) / max(resid, 1e-9)))
            if best is None or miss < best[0]:
                best = (miss, sigma, tau)
        return best[1], best[2]

    def _bootstrap(self, model, f):
        rng = np.random.default_rng(self.seed + 1)
        draws = []
        for _ in range(self.n_boot):
            idx = rng.integers(0, len(f), len(f))
            if _unidentified(f[idx]):
                draws.append((0.0, 0.0))
                continue
            draws.append(self._moments(model, idx, f[idx]))
        arr = np.array(draws)
        lo, hi = np.quantile(arr, [0.025, 0.975], axis=0)
        return {
            "speed_drift_log_sd": (float(lo[0]), float(hi[0])),
            "speed_drift_time_s": (float(lo[1]), float(hi[1])),
        }


_NEEDED = {
    "sustainable",
    "cpu_cap_fraction",
    "cap_throttled_period_fraction",
    "demand_s_per_ingress",
    "ingress_rate_per_s",
    "duration_s",
}


def _at_bound(sigma, simulated, measured):
    """Why a log-sd at the search's bound is no estimate, or "".

    At :data:`MAX_LOG_SD` the fluid model still throttles fewer periods than
    measured: the periods were throttled for another reason than a slow drift
    of the work per message (``data/mosquitto-fanout``: a message at fan-out
    100 costs a whole period's quota, and the broker fills its quota from
    about 60 % of its limit, calibration/README.md "Fan-out up to 100")."""
    if sigma < MAX_LOG_SD:
        return ""
    return (
        f"log-sd at its search bound {MAX_LOG_SD:g}: the fluid model throttles {simulated:.2f} of the "
        f"periods there, the runs {measured:.2f}; their throttling is not a slow speed drift"
    )


def _unidentified(f):
    if len(f) < 4:
        return f"{len(f)} sustainable capped runs between the utilization bounds (at least 4 needed)"
    if not (f > 0).any():
        return "no throttled periods in the sustainable runs below the quota"
    return ""


def _params(sigma, tau, n, reason):
    return {
        "speed_drift_log_sd": float(sigma),
        "speed_drift_time_s": float(tau),
        "n_runs": int(n),
        "identified": not reason,
        "reason": reason,
    }


class _Fluid:
    """The fluid quota model of a set of runs, with fixed normal draws (common random numbers
    across parameter values; independent across runs and replications)."""

    def __init__(self, rows, replications, rng):
        self.u = rows["utilization"].to_numpy()
        self.period_s = np.array([quota_us(c)[1] / 1e6 for c in rows["cpu_cap_fraction"]])
        self.periods = np.maximum(1, np.round(rows["duration_s"].to_numpy() / self.period_s)).astype(int)
        self.z = rng.standard_normal((int(self.periods.max()), replications, len(self.u)))
        self._cache = {}

    def fractions(self, sigma, tau):
        """Simulated throttled fraction, replications x runs."""
        key = (round(sigma, 12), tau)
        if key not in self._cache:
            self._cache[key] = self._simulate(sigma, tau)
        return self._cache[key]

    def _simulate(self, sigma, tau):
        rho = np.exp(-self.period_s / tau) if tau > 0 else np.zeros_like(self.period_s)
        innov = np.sqrt(1.0 - rho**2) * sigma
        x = sigma * self.z[0] * np.ones_like(self.u)
        backlog = np.zeros_like(x)
        throttled = np.zeros_like(x)
        for p in range(self.z.shape[0]):
            if p:
                x = rho * x + innov * self.z[p]
            work = backlog + self.u * np.exp(x - 0.5 * sigma * sigma)
            live = p < self.periods
            throttled += (work > 1.0) & live
            backlog = np.where(live, np.maximum(0.0, work - 1.0), backlog)
        return throttled / self.periods

    def log_sd_for_mean(self, idx, target, tau):
        """The log-sd whose mean simulated fraction over runs ``idx`` is ``target``."""

        def gap(sigma):
            return self.fractions(sigma, tau)[:, idx].mean() - target

        if gap(MAX_LOG_SD) < 0:
            return MAX_LOG_SD
        return brentq(gap, 1e-4, MAX_LOG_SD, xtol=1e-4)
