"""How long an event loop stays awake after its work, fitted on counted wake-ups.

A broker whose event loop runs out of work calls ``epoll_wait`` and sleeps;
the next message wakes it, and the fit charges that wake-up its cost
(``idle_wakeup_cost_s``, regressed on the measured voluntary context
switches per message). But a message that arrives while the loop is still
on its way to sleep is read without a switch: ``ep_poll`` (Linux
``fs/eventpoll.c``) returns the events that came before the task was
switched out, and ``schedule()`` does not switch away from a task woken
meanwhile. The twin with no such window wakes for every message that finds
the server free, and on Mosquitto's many-connection runs that is far more
often than the broker switched (``data/mosquitto-wire``, 32 + 32 at 6,857
msg/s: 0.46 simulated wake-ups per message, 0.287 switches measured), so
its CPU is 10-18 % high at moderate load and it meets its quota early.

The calibrator simulates training runs in which wake-ups are neither every
message's nor rare (measured between ``min_wakeups`` and ``max_wakeups``
per message, not throttled by the quota) with each candidate window
``sleep_entry_s`` (:class:`pubsim.models.params.io.IoParams`), and keeps the
one whose simulated wake-ups per message are closest to the measured ones
(mean absolute log ratio over the runs whose simulated wake-ups the largest
window changes by more than ``min_gain``). A window that does not improve
on none by ``min_gain`` is not identified and left at 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..sim.errors import ConfigError
from .fit import _check, spread_over_rates

__all__ = ["SleepEntryCalibrator"]


class SleepEntryCalibrator:
    """Choose an event loop's sleep entry (s) by simulating its counted wake-ups.

    Parameters
    ----------
    simulate : callable
        ``simulate(row, sleep_entry_s) -> dict`` with ``wakeups_per_ingress``:
        the simulated twin of a measured run (a row of a campaign's
        ``runs.csv``) with that sleep entry.
    grid_s : sequence of float
        Candidate sleep entries, s (0 = none).
    min_wakeups, max_wakeups : float
        Runs whose measured wake-ups per message lie strictly between these
        are used: at 1 every message wakes the loop whatever the window,
        near 0 the loop hardly sleeps.
    max_runs : int
        At most this many runs per configuration, spread over its rates.
    max_throttled_fraction : float
        Runs whose CPU quota throttled more than this fraction of the
        periods are left out (a stalled loop finds a backlog, not a gap).
    min_gain : float
        Least change of a run's simulated wake-ups (absolute log ratio)
        between no window and the largest for the run to be scored, and
        least improvement of the objective over no window for the window
        to count as identified.

    Attributes
    ----------
    params_ : dict
        ``sleep_entry_s`` (chosen; 0 when not identified), ``identified``,
        ``n_runs`` (simulated), ``n_sensitive`` (those whose wake-ups the
        largest window changes: the objective's) and ``objective`` (sleep
        entry -> mean absolute log ratio of simulated to measured wake-ups
        per message over them).
    residuals_ : pandas.Series
        Per run used, log(simulated / measured) wake-ups at the chosen value
        (NaN for a run not scored when the value is neither 0 nor the largest:
        the windows between are simulated on the scored runs only).
    """

    def __init__(
        self,
        *,
        simulate,
        grid_s=(0.0, 5e-6, 10e-6, 15e-6, 20e-6, 30e-6, 40e-6, 60e-6, 80e-6, 100e-6),
        min_wakeups=0.02,
        max_wakeups=0.95,
        max_runs=4,
        max_throttled_fraction=0.01,
        min_gain=0.05,
    ):
        if not grid_s or any(not (g >= 0 and math.isfinite(g)) for g in grid_s) or 0.0 not in grid_s:
            raise ConfigError("grid_s", grid_s, "a list of sleep entries >= 0 s that includes 0")
        if not 0 <= min_wakeups < max_wakeups:
            raise ConfigError("min_wakeups", min_wakeups, f"in [0, max_wakeups={max_wakeups})")
        self.simulate = simulate
        self.grid_s = tuple(sorted(float(g) for g in grid_s))
        self.min_wakeups = min_wakeups
        self.max_wakeups = max_wakeups
        self.max_runs = int(max_runs)
        self.max_throttled_fraction = max_throttled_fraction
        self.min_gain = min_gain

    def select(self, measurements, wakeups):
        """The runs used (``wakeups``: each run's measured wake-ups per message, aligned with it)."""
        _check(measurements, ("config", "rate_per_s", "sustainable"))
        m = measurements.reset_index(drop=True).assign(measured_wakeups=np.asarray(wakeups, dtype=float))
        keep = m["sustainable"].astype(bool) & m["measured_wakeups"].between(
            self.min_wakeups, self.max_wakeups, inclusive="neither"
        )
        if "cap_throttled_period_fraction" in m:  # NaN (not measured) is kept
            keep &= ~(m["cap_throttled_period_fraction"] > self.max_throttled_fraction)
        return spread_over_rates(m[keep], self.max_runs)

    def fit(self, measurements, wakeups):
        runs = self.select(measurements, wakeups)
        if runs.empty:
            raise ConfigError(
                "measurements",
                "no run with some messages waking the loop",
                f"sustainable runs with measured wake-ups per message in ({self.min_wakeups}, {self.max_wakeups})",
            )
        rows = [r.to_dict() for _, r in runs.iterrows()]
        meas = runs["measured_wakeups"].to_numpy(dtype=float)

        def ratio(s, which):
            """log(simulated / measured) wake-ups of the runs ``which`` (bool mask) with window ``s``; NaN elsewhere."""
            out = np.full(len(rows), np.nan)
            for j in np.flatnonzero(which):
                out[j] = np.log(max(self.simulate(rows[j], s)["wakeups_per_ingress"], 1e-3) / meas[j])
            return out

        every = np.ones(len(rows), dtype=bool)
        ratios = {0.0: ratio(0.0, every), self.grid_s[-1]: ratio(self.grid_s[-1], every)}
        # only the runs whose simulated wake-ups the window changes say anything about it (a lone
        # publisher's batches come milliseconds apart: no window on the grid spares a wake-up there),
        # so the windows between are simulated on those runs only
        sensitive = np.abs(ratios[self.grid_s[-1]] - ratios[0.0]) > self.min_gain
        for s in self.grid_s[1:-1]:
            ratios[s] = ratio(s, sensitive)
        ratios = {s: ratios[s] for s in self.grid_s}
        objective = {s: float(np.nanmean(np.abs(v[sensitive]))) if sensitive.any() else 0.0 for s, v in ratios.items()}
        best = min(self.grid_s, key=lambda s: (objective[s], s))
        identified = objective[0.0] - objective[best] > self.min_gain
        chosen = best if identified else 0.0
        self.params_ = {
            "sleep_entry_s": chosen,
            "identified": bool(identified),
            "n_runs": len(rows),
            "n_sensitive": int(sensitive.sum()),
            "objective": objective,
        }
        self.residuals_ = pd.Series(ratios[chosen], index=runs.index, name="log_wakeup_ratio")
        return self
