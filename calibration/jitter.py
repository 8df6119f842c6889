"""Who pays the loopback link's jitter, chosen by simulation.

The fitted loopback link (:class:`pubsim.calibration.fit.LatencyFloorCalibrator`)
has a fixed part and a gamma jitter. Its ``jitter_on``
(:class:`pubsim.models.params.link.LinkParams`) says who pays a draw:
``every_packet`` (each message; a long draw holds every later message of the
connection behind it) or ``idle_receiver`` (only a message that finds the
receiver idle; the jitter is then the reader's wake-up). The light-load
runs the link is fitted on cannot tell the two apart, since there every
message finds its reader idle; they part once messages queue behind one
another. Which one a broker's clients behave like is an empirical question
(on ``data/tier2`` ActiveMQ's heavy-tailed jitter with ``every_packet`` gave
12-16 ms p50 where 0.2-0.3 ms was measured), so the calibrator simulates the
training runs with each mode and keeps the one whose latency errors are
smallest, by the measure the accuracy targets use: per configuration the
median over its sustainable runs of the p50 (and p99) error in %, then the
mean absolute value over configurations, summed over the quantiles. A run
with two latency estimates (``latency_any_<q>_s`` beside the own-stamp
``latency_<q>_s``) is scored against the interval between them
(:func:`pubsim.calibration.errors.bracket_error_pct`): where the brokers
send in bursts, the own-stamp figure is not an estimate of the latency
(``data/brokers-wire``: 0.04-2 % of the messages keep their own stamp).
"""

from __future__ import annotations

import math

import pandas as pd

from ..models.params.link import JITTER_ON
from ..sim.errors import ConfigError
from .errors import bracket_error_pct, pct_error
from .fit import _check, spread_over_rates

__all__ = ["JitterModeCalibrator"]


class JitterModeCalibrator:
    """Choose the link's ``jitter_on`` mode by simulating measured runs.

    Parameters
    ----------
    simulate : callable
        ``simulate(row, mode) -> dict`` with the ``latency_<q>_s`` of
        ``quantiles`` (s): the simulated twin of a measured run (a row of a
        campaign's ``runs.csv``) whose client links have ``jitter_on=mode``.
    modes : sequence of str
        Candidate modes, from :data:`pubsim.models.params.link.JITTER_ON`.
        On a tie (or when no run can be scored) the first is kept.
    quantiles : tuple of str
        Latency quantiles scored (``"p50"``, ``"p90"``, ``"p99"``).
    max_runs : int
        At most this many sustainable runs per configuration, spread evenly
        over its offered rates (lightest and heaviest included).

    Attributes
    ----------
    params_ : dict
        ``jitter_on`` (chosen), ``n_runs``, ``n_configs`` and ``objective``
        (mode -> sum over ``quantiles`` of the mean over configurations of
        the absolute median error, %).
    errors_ : pandas.DataFrame
        One row per configuration and mode: the median ``<q>_error_pct``.
    """

    def __init__(self, *, simulate, modes=JITTER_ON, quantiles=("p50", "p99"), max_runs=4):
        if not modes or any(m not in JITTER_ON for m in modes):
            raise ConfigError("modes", modes, f"a non-empty list of {', '.join(JITTER_ON)}")
        if max_runs < 1:
            raise ConfigError("max_runs", max_runs, "an integer >= 1")
        self.simulate = simulate
        self.modes = tuple(modes)
        self.quantiles = tuple(quantiles)
        self.max_runs = int(max_runs)

    def select(self, measurements):
        """The runs scored: sustainable, at most ``max_runs`` per configuration spread over its rates."""
        _check(measurements, ("config", "rate_per_s", "sustainable") + tuple(f"latency_{q}_s" for q in self.quantiles))
        m = measurements[measurements["sustainable"].astype(bool)].reset_index(drop=True)
        return spread_over_rates(m, self.max_runs)

    def _errors(self, runs, mode):
        recs = []
        for _, r in runs.iterrows():
            sim = self.simulate(r.to_dict(), mode)
            rec = {"config": r["config"]}
            for q in self.quantiles:
                meas, got = r[f"latency_{q}_s"], sim[f"latency_{q}_s"]
                other = r.get(f"latency_any_{q}_s", math.nan)
                if isinstance(other, float) and math.isfinite(other):  # two estimates: the interval
                    rec[f"{q}_error_pct"] = bracket_error_pct(got, meas, other)
                else:
                    rec[f"{q}_error_pct"] = pct_error(got, meas) if meas > 0 else math.nan
            recs.append(rec)
        return pd.DataFrame(recs).groupby("config", sort=False).median().assign(jitter_on=mode)

    def fit(self, measurements):
        runs = self.select(measurements)
        if runs.empty:
            raise ConfigError("measurements", "no sustainable run", "at least one sustainable run per broker")
        errors = pd.concat([self._errors(runs, mode) for mode in self.modes])
        cols = [f"{q}_error_pct" for q in self.quantiles]
        objective = {}
        for mode, e in errors.groupby("jitter_on", sort=False):
            per_q = e[cols].abs().mean()  # NaN columns (nothing measured) are left out of the sum
            objective[mode] = float(per_q.sum()) if per_q.notna().any() else math.inf
        best = min(self.modes, key=lambda mode: (objective[mode], self.modes.index(mode)))
        self.params_ = {
            "jitter_on": best,
            "n_runs": len(runs),
            "n_configs": int(runs["config"].nunique()),
            "objective": objective,
        }
        self.errors_ = errors.reset_index()
        return self
