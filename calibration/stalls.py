"""Scheduler-tick stalls of the measurement machine: the millisecond tail of loopback latency.

What the data show (``data/loopback``, Mosquitto, runs below half the CPU
cap): 99 % of the latency in excess of a run's 1st percentile is under
0.3 ms, and about 0.7 % of the messages are late by 0.5 to 4 ms, with a
flat density over that range and almost nothing beyond 4.5 ms. 4 ms is one
scheduler tick of the machine's kernel (``CONFIG_HZ=250`` in
``/proc/config.gz``, ``CONFIG_PREEMPT_NONE``): a process woken while
another task holds its core (the harness's clients share one core; the
broker's core runs kernel threads and the harness's parent) waits for that
task's tick. A flat density of lateness up to one tick is what stalls of
one whole tick give (a message arriving at a uniform time inside one waits
a uniform rest of it). Those waits set a run's p99 whenever they hit more
than 1 % of its messages, so a model without them misses the p99 of such
runs by -90 % and more, and no service-time spread fixes that without
also moving the median.

The model (:class:`TickStalls`): on each client's loopback link, stalls of
one tick ``T`` start as a Poisson process of rate ``rate_per_s`` (the same
on every link); a message that arrives inside one is held to its end, and
the link keeps TCP order, so the messages behind it wait too. In the
simulated twin a link carrying ``r`` messages per second in bursts ``a``
seconds apart holds a message with probability ``rate_per_s / r x min(1,
T / a)``, for a time uniform on ``[max(0, T - a), T)`` (the first burst
after a stall starts arrives a uniform part of ``a`` into it), as a
:class:`pubsim.sim.distributions.Sporadic` jitter; with dense traffic that
is the whole tick, with sparse traffic the rest of it.

The fit (:class:`TickStallCalibrator`): a message is late by more than
``x < T`` on one link with probability ``rate_per_s x (T - x)``, on the two
links a delivery crosses twice that; ``rate_per_s`` follows from the
measured fraction of messages whose latency exceeds the run's 1st
percentile by more than ``x``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..sim.errors import ConfigError
from .fit import cap_of

__all__ = ["TICK_S", "TickStalls", "TickStallCalibrator"]

#: One scheduler tick of the measurement machine, s (CONFIG_HZ=250 in its /proc/config.gz).
TICK_S = 1.0 / 250


@dataclass(frozen=True, kw_only=True)
class TickStalls:
    """Stalls of up to one scheduler tick on every client link of the simulated twin.

    Parameters
    ----------
    rate_per_s : float
        Stalls per second on each link (>= 0).
    tick_s : float
        Longest hold, s: a uniform part of one tick.
    source : str
        Where the rate was fitted.
    """

    rate_per_s: float
    tick_s: float = TICK_S
    source: str = ""

    def __post_init__(self):
        if not (self.rate_per_s >= 0 and math.isfinite(self.rate_per_s)):
            raise ConfigError("rate_per_s", self.rate_per_s, "a finite rate >= 0 per s")
        if not (self.tick_s > 0 and math.isfinite(self.tick_s)):
            raise ConfigError("tick_s", self.tick_s, "a finite time > 0 s")

    def hold(self, messages_per_s, burst_interval_s):
        """``(probability, low_s)``: a message on a link carrying ``messages_per_s`` in bursts
        ``burst_interval_s`` apart is held with that chance, uniform on ``[low_s, tick_s)``."""
        if messages_per_s <= 0 or self.rate_per_s == 0:
            return 0.0, 0.0
        t, a = self.tick_s, burst_interval_s
        p = min(1.0, self.rate_per_s / messages_per_s) * min(1.0, t / a)
        return p, max(0.0, t - a)


class TickStallCalibrator:
    """Fit the rate of tick stalls per link from lightly loaded runs' latency samples.

    Parameters
    ----------
    max_utilization : float
        Runs whose broker utilization (ingress x demand / cap) exceeds this
        are not used (queueing at the broker could make messages late).
    late_s : float
        Lateness over the run's 1st percentile counted as a stall, s (well
        above the loopback jitter's spread, below one tick).
    tick_s : float
        The machine's scheduler tick, s.
    links : int
        Links a delivery crosses (publisher to broker, broker to subscriber).

    Attributes
    ----------
    params_ : dict
        ``rate_per_s`` (per link), ``late_fraction`` (mean over the runs),
        ``late_fraction_low`` / ``_high`` (smallest and largest per run),
        ``n_runs``, ``n_messages``.
    """

    def __init__(self, *, max_utilization=0.5, late_s=0.5e-3, tick_s=TICK_S, links=2):
        if not 0 < late_s < tick_s:
            raise ConfigError("late_s", late_s, f"in (0, tick_s={tick_s})")
        self.max_utilization = max_utilization
        self.late_s = late_s
        self.tick_s = tick_s
        self.links = links

    def fit(self, runs, latency):
        """``runs``: the campaign's runs (one broker); ``latency``: its ``latency.parquet`` rows."""
        util = runs["ingress_rate_per_s"] * runs["demand_s_per_ingress"] / cap_of(runs)
        use = runs[(util <= self.max_utilization) & runs["sustainable"].astype(bool)]
        fractions, n = [], 0
        for _, r in use.iterrows():
            sel = (latency["broker"] == r["broker"]) & (latency["config"] == r["config"]) & (latency["run"] == r["run"])
            lat = latency.loc[sel, "latency_s"].to_numpy(dtype=float)
            if lat.size < 100:
                continue
            excess = lat - np.quantile(lat, 0.01)
            fractions.append(float(np.mean(excess > self.late_s)))
            n += lat.size
        if not fractions:
            raise ConfigError("runs", "no lightly loaded run with a latency sample", "runs below max_utilization")
        f = float(np.mean(fractions))
        per_link = f / (self.links * (self.tick_s - self.late_s))
        self.params_ = {
            "rate_per_s": per_link,
            "late_fraction": f,
            "late_fraction_low": min(fractions),
            "late_fraction_high": max(fractions),
            "n_runs": len(fractions),
            "n_messages": n,
        }
        return self

    def stalls(self, source):
        """The fitted :class:`TickStalls`."""
        return TickStalls(rate_per_s=self.params_["rate_per_s"], tick_s=self.tick_s, source=source)
