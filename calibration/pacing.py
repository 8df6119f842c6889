"""The load generator's pacing: batch due times, its measured lateness, and the twin of both.

A publisher of the load generator (:mod:`pubsim.calibration.harness.loadgen`,
``publisher._pace``) sends batch ``n`` of ``b`` messages when it is due,
``t0 + int(n x b x 1e9 / rate)`` ns, and stops at ``t0 + duration``. A
real process is late: after sleeping until a batch is due it wakes
``W`` later (timer slack, scheduling delay on the shared client core, a
scheduler tick when another task holds the core), and a publisher behind
schedule sends its next batch as soon as the previous one is out (one loop
pass, ``gap``), so a late wake-up turns into a burst of back-to-back
batches at the broker. Latency is stamped at the real send, so the lateness
itself is not latency; what it changes is the arrival process the broker
sees.

:func:`batch_send_times_ns` is that loop, batch by batch (the same integer
arithmetic as the generator, so with no lateness it gives the due times
exactly). The publishers of a run are processes pinned to one client core:
:func:`shared_core_send_times_ns` runs their loops on it, a send holding the
core for ``gap``, so publishers due at the same time go one after another.
:class:`PacingLagCalibrator` estimates ``gap`` and the distribution of
``W`` from measured send times (a run's deliveries: publisher, sequence
number and send time of every message; use one-publisher runs, where no
other publisher holds the core), and :class:`PacingLag` is the result the
simulated twin draws from (:mod:`pubsim.calibration.virtual`).
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..sim.errors import ConfigError

__all__ = [
    "PACING_QUANTILES",
    "pacing_fields",
    "pacing_from_runs",
    "run_pacing_from_runs",
    "RunPacing",
    "batch_count",
    "batch_due_ns",
    "batch_send_times_ns",
    "shared_core_send_times_ns",
    "PacingLag",
    "PacingLagCalibrator",
    "PACING_FILE",
    "read_pacing",
    "write_pacing",
]

#: A campaign folder's measured pacing lateness (:func:`write_pacing`).
PACING_FILE = "pacing-lag.json"

#: Quantiles of the wake-up lateness a measured run records (:func:`pacing_fields`).
PACING_QUANTILES = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999)


def _wake_field(q):
    return "pacing_wake_q" + f"{q * 100:g}".replace(".", "_") + "_s"


def _interval_ns(rate_per_s, b):
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ConfigError("rate_per_s", rate_per_s, "a finite rate > 0 msg/s")
    if not (isinstance(b, (int, np.integer)) and b >= 1):
        raise ConfigError("batch", b, "an integer >= 1")
    return b * 1e9 / rate_per_s


def batch_count(rate_per_s, b, duration_s):
    """Batches a publisher is due to send in ``duration_s`` (those with ``int(n x interval) < duration``)."""
    interval = _interval_ns(rate_per_s, b)
    t_end = int(duration_s * 1e9)
    n = int(t_end / interval) + 2
    due = (np.arange(n) * interval).astype(np.int64)
    return int(np.searchsorted(due, t_end, side="left"))


def batch_due_ns(rate_per_s, b, duration_s):
    """Due time of each batch after ``t0``, ns: ``int(n x b x 1e9 / rate)`` as the generator computes it."""
    interval = _interval_ns(rate_per_s, b)
    return (np.arange(batch_count(rate_per_s, b, duration_s)) * interval).astype(np.int64)


def batch_send_times_ns(rate_per_s, b, duration_s, *, wake_lag_ns=None, gap_ns=0):
    """Send time of each batch after ``t0``, ns, the generator's loop with given lateness.

    Parameters
    ----------
    rate_per_s : float
        The publisher's rate, msg/s.
    b : int
        Messages per batch.
    duration_s : float
        Publishing time, s; a batch not sent before it ends is not sent.
    wake_lag_ns : array of int or None
        Lateness of each wake-up, ns, used in order, one per batch the
        publisher sleeps for (None: none, the due times).
    gap_ns : int
        Time from one send to the loop's next clock reading, ns: a
        publisher behind schedule sends its next batch that long after the
        previous one.

    Returns
    -------
    numpy.ndarray of int64
        Send times of the batches sent, in order (fewer than due when the
        last ones fall past the end).
    """
    due = batch_due_ns(rate_per_s, b, duration_s)
    if wake_lag_ns is None:
        return due
    lag = np.asarray(wake_lag_ns, dtype=np.int64)
    t_end = int(duration_s * 1e9)
    out = np.empty(due.size, dtype=np.int64)
    ready = None  # the loop's clock after the previous send
    k = 0
    for n in range(due.size):
        now = ready
        if now is None or now < due[n]:
            if k >= lag.size:
                raise ConfigError("wake_lag_ns", f"{lag.size} values", f"one per wake-up ({k + 1} or more)")
            now = int(due[n]) + int(lag[k])
            k += 1
        if now >= t_end:
            return out[:n]
        out[n] = now
        ready = now + int(gap_ns)
    return out


def shared_core_send_times_ns(rate_per_s, b, duration_s, wake_lag_ns, gap_ns):
    """Send times of several publishers whose loops share one core, ns after ``t0``.

    Each publisher runs the loop of :func:`batch_send_times_ns` with its own
    lateness (``wake_lag_ns[i]``, used in order), and a send occupies the
    core for ``gap_ns``: a publisher ready while another one sends goes when
    the core is free (in order of readiness, ties by publisher index). With
    one publisher this is :func:`batch_send_times_ns`.

    Returns
    -------
    list of numpy.ndarray of int64
        Each publisher's batch send times.
    """
    due = batch_due_ns(rate_per_s, b, duration_s)
    t_end = int(duration_s * 1e9)
    gap = int(gap_ns)
    lags = [np.asarray(x, dtype=np.int64) for x in wake_lag_ns]
    used = [0] * len(lags)
    ready = [None] * len(lags)
    out = [[] for _ in lags]

    def wish(i):
        n = len(out[i])
        if ready[i] is not None and ready[i] >= due[n]:
            return ready[i]
        if used[i] >= lags[i].size:
            raise ConfigError("wake_lag_ns", f"{lags[i].size} values", f"one per wake-up ({used[i] + 1} or more)")
        used[i] += 1
        return int(due[n]) + int(lags[i][used[i] - 1])

    heap = [(wish(i), i) for i in range(len(lags))] if due.size else []
    heapq.heapify(heap)
    core_free = None
    while heap:
        t, i = heapq.heappop(heap)
        now = t if core_free is None or t >= core_free else core_free
        if now >= t_end:
            continue
        out[i].append(now)
        core_free = ready[i] = now + gap
        if len(out[i]) < due.size:
            heapq.heappush(heap, (wish(i), i))
    return [np.asarray(x, dtype=np.int64) for x in out]


@dataclass(frozen=True, kw_only=True)
class PacingLag:
    """The load generator's measured lateness, for its simulated twin.

    Parameters
    ----------
    wake_lag_s : tuple of float
        Measured lateness of wake-ups (batches sent after sleeping), s;
        the twin resamples them (independent draws).
    gap_s : float
        A late publisher's time from one batch to the next, s.
    source : str
        Where it was measured (data, date, machine).
    shared_core : bool
        True: the lateness is one publisher's, and the twin runs the
        publishers' loops on one client core (:func:`shared_core_send_times_ns`).
        False: it was measured with the run's own publishers, so it already
        holds their waits for that core; each publisher draws it on its own
        (:func:`batch_send_times_ns`).
    """

    wake_lag_s: tuple
    gap_s: float
    source: str = ""
    shared_core: bool = True

    def __post_init__(self):
        lag = np.asarray(self.wake_lag_s, dtype=float)
        if lag.size == 0 or not np.all(np.isfinite(lag)) or np.any(lag < 0):
            raise ConfigError("wake_lag_s", f"<{lag.size} values>", "a non-empty list of lateness values >= 0 s")
        if not (self.gap_s >= 0 and math.isfinite(self.gap_s)):
            raise ConfigError("gap_s", self.gap_s, "a finite time >= 0 s")
        object.__setattr__(self, "wake_lag_s", tuple(lag.tolist()))

    def lag_for(self, row):
        """The lateness of the run ``row`` (a measurement row): this one, whatever the run."""
        return self

    def describe(self):
        """One line for the user: lateness quantiles, gap and source."""
        lag = np.quantile(self.wake_lag_s, [0.5, 0.99])
        return (
            f"wake-up lateness p50 {lag[0] * 1e6:.3g} us, p99 {lag[1] * 1e6:.3g} us, "
            f"back-to-back gap {self.gap_s * 1e6:.3g} us ({self.source})"
        )

    def send_times_s(self, rate_per_s, b, duration_s, rng, publishers=1):
        """Batch send times after ``t0`` of each of ``publishers``, s.

        Lateness is drawn from the measured values (independent draws, with
        ``rng``); the publishers share the client core
        (:func:`shared_core_send_times_ns`) when :attr:`shared_core`, and
        run their loops apart (:func:`batch_send_times_ns`) otherwise.
        """
        n = batch_count(rate_per_s, b, duration_s)
        lag = np.asarray(self.wake_lag_s)
        draws = [np.round(lag[rng.integers(0, lag.size, n)] * 1e9).astype(np.int64) for _ in range(publishers)]
        gap_ns = round(self.gap_s * 1e9)
        if self.shared_core:
            ns = shared_core_send_times_ns(rate_per_s, b, duration_s, draws, gap_ns)
        else:
            ns = [batch_send_times_ns(rate_per_s, b, duration_s, wake_lag_ns=d, gap_ns=gap_ns) for d in draws]
        return [x / 1e9 for x in ns]


@dataclass(frozen=True, kw_only=True)
class RunPacing:
    """Each measured run's own lateness, for the twin of that run.

    The lateness a run with several publishers records (its ``pacing_wake_*``
    quantiles) holds their waits for the one client core they share: at a
    due instant its publishers go one after another, as the harness really
    sent them. The twin of a run draws from the lateness of the sustainable
    run of the same broker and configuration nearest in rate (log scale),
    each publisher on its own (``shared_core=False``), so the broker sees the
    arrival process the real one saw; a configuration with no measured run
    takes ``fallback``.

    Parameters
    ----------
    runs : dict
        ``(broker, config)`` -> tuple of ``(rate_per_s, PacingLag)`` pairs,
        ascending in rate.
    fallback : PacingLag or None
        For configurations not measured (None: those publishers send on time).
    source : str
        Where the runs come from.
    """

    runs: dict
    fallback: PacingLag | None = None
    source: str = ""

    def lag_for(self, row):
        """The :class:`PacingLag` for the twin of ``row`` (keys ``broker``, ``config``, ``rate_per_s``)."""
        got = self.runs.get((row["broker"], row["config"]))
        if not got:
            return self.fallback
        rate = float(row["rate_per_s"])
        return min(got, key=lambda pair: abs(math.log(pair[0] / rate)))[1]

    def describe(self):
        """One line for the user: how many runs and configurations, and the fallback."""
        n = sum(len(v) for v in self.runs.values())
        tail = f"; elsewhere {self.fallback.describe()}" if self.fallback is not None else ""
        return f"each run's own lateness: {n} rates of {len(self.runs)} configurations ({self.source}){tail}"


class PacingLagCalibrator:
    """Lateness of the load generator's publishers from their measured send times.

    A batch's send time is the send time its messages carry (one stamp per
    batch). With ``gap`` the time a late publisher takes from one batch to
    the next, batch ``n`` was sent after a sleep when the previous one left
    more than ``gap`` before it was due; its lateness ``W`` is then its
    send time minus its due time. ``gap`` is the median spacing of the
    batches sent back to back (later than due, and less than half the
    pacing interval after the previous batch; a batch sent after a sleep
    follows the previous one by at least ``gap`` plus its own lateness), or
    0 when there are none.

    Parameters
    ----------
    min_wakeups : int
        Fewest wake-ups needed.

    Attributes
    ----------
    params_ : dict
        ``gap_s``, ``n_wakeups``, ``n_batches``, ``wake_lag_s`` (the values,
        s) and quantiles ``lag_p50_s``, ``lag_p90_s``, ``lag_p99_s``.
    """

    COLUMNS = ("publisher", "seq", "t_send_s")

    def __init__(self, *, min_wakeups=100):
        self.min_wakeups = min_wakeups

    @staticmethod
    def batches(deliveries, batch):
        """``(publisher, n, send_s)`` of every batch seen (one row per batch)."""
        d = deliveries.loc[:, ["publisher", "seq", "t_send_s"]].copy()
        d["n"] = d["seq"] // batch
        return d.groupby(["publisher", "n"], as_index=False)["t_send_s"].min().rename(columns={"t_send_s": "send_s"})

    def fit(self, runs):
        """Fit from ``runs``: a list of ``(deliveries, rate_per_s_per_publisher, batch)``."""
        gaps, lags, total = [], [], 0
        per_run = []
        for deliveries, rate, b in runs:
            missing = [c for c in self.COLUMNS if c not in deliveries]
            if missing:
                raise ConfigError(f"deliveries.{missing[0]}", None, f"a column (needed: {list(self.COLUMNS)})")
            interval_s = b / rate
            for _, g in self.batches(deliveries, b).groupby("publisher"):
                g = g.sort_values("n")
                n = g["n"].to_numpy()
                send = g["send_s"].to_numpy()
                due = (n * (b * 1e9 / rate)).astype(np.int64) / 1e9
                follows = np.r_[False, np.diff(n) == 1]
                since = np.r_[np.inf, np.diff(send)]
                late = send - due
                back = follows & (late > 0) & (since < interval_s / 2)
                gaps.append(since[back])
                per_run.append((send, due, follows))
                total += len(send)
        gap_all = np.concatenate(gaps) if gaps else np.empty(0)
        gap = float(np.median(gap_all)) if gap_all.size else 0.0
        for send, due, follows in per_run:
            prev_ready = np.r_[-np.inf, send[:-1] + gap]
            slept = ~follows | (prev_ready < due)
            lags.append(np.clip(send[slept] - due[slept], 0.0, None))
        lag = np.concatenate(lags) if lags else np.empty(0)
        if lag.size < self.min_wakeups:
            raise ConfigError("deliveries", f"{lag.size} wake-ups", f"at least {self.min_wakeups}")
        q = np.quantile(lag, [0.5, 0.9, 0.99])
        self.params_ = {
            "gap_s": gap,
            "n_wakeups": int(lag.size),
            "n_batches": int(total),
            "lag_p50_s": float(q[0]),
            "lag_p90_s": float(q[1]),
            "lag_p99_s": float(q[2]),
            "wake_lag_s": lag,
        }
        return self

    def pacing(self, source):
        """The fitted :class:`PacingLag`."""
        return PacingLag(wake_lag_s=tuple(self.params_["wake_lag_s"]), gap_s=self.params_["gap_s"], source=source)


def write_pacing(path, pacing, *, max_values=2000, seed=0):
    """Write ``pacing`` as JSON (at most ``max_values`` lateness values, a random subsample)."""
    lag = np.asarray(pacing.wake_lag_s)
    if lag.size > max_values:
        lag = np.sort(np.random.default_rng(seed).choice(lag, max_values, replace=False))
    data = {"source": pacing.source, "gap_s": pacing.gap_s, "wake_lag_s": [float(f"{x:.4g}") for x in lag]}
    Path(path).write_text(json.dumps(data, indent=0) + "\n")


def read_pacing(path):
    """The :class:`PacingLag` written by :func:`write_pacing`."""
    data = json.loads(Path(path).read_text())
    return PacingLag(wake_lag_s=tuple(data["wake_lag_s"]), gap_s=float(data["gap_s"]), source=data.get("source", ""))


def pacing_fields(batch_sends):
    """A measured run's pacing, as row fields: what the generator really sent, summed up.

    ``batch_sends``: per publisher, ``batch``, ``interval_ns`` and the
    batches' ``send_ns`` after ``t0``
    (:attr:`pubsim.calibration.harness.loadgen.LoadResult.batch_sends`).
    :class:`PacingLagCalibrator` on the run gives ``pacing_gap_s`` (a late
    publisher's time from one batch to the next), ``pacing_batches``,
    ``pacing_wakeups`` and the lateness of the wake-ups at
    :data:`PACING_QUANTILES` (``pacing_wake_q50_s``...); NaN where the run
    had no wake-up. :func:`pacing_from_runs` turns the fields of many runs
    into the twin's :class:`PacingLag`.
    """
    frames, runs = [], []
    for i, p in enumerate(batch_sends):
        b = int(p["batch"])
        send = np.asarray(p["send_ns"], dtype=np.int64)
        if send.size == 0:
            continue
        seq = np.arange(send.size, dtype=np.int64) * b
        frames.append((i, seq, send / 1e9))
        runs.append(b * 1e9 / float(p["interval_ns"]))
    out = {"pacing_gap_s": math.nan, "pacing_batches": 0, "pacing_wakeups": 0}
    out.update({_wake_field(q): math.nan for q in PACING_QUANTILES})
    if not frames:
        return out
    d = pd.DataFrame(
        {
            "publisher": np.concatenate([np.full(len(f[1]), f[0]) for f in frames]),
            "seq": np.concatenate([f[1] for f in frames]),
            "t_send_s": np.concatenate([f[2] for f in frames]),
        }
    )
    b = int(batch_sends[0]["batch"])
    try:
        fit = PacingLagCalibrator(min_wakeups=1).fit([(d, runs[0], b)]).params_
    except ConfigError:
        return out
    lag = fit["wake_lag_s"]
    out.update(pacing_gap_s=fit["gap_s"], pacing_batches=fit["n_batches"], pacing_wakeups=fit["n_wakeups"])
    out.update({_wake_field(q): float(v) for q, v in zip(PACING_QUANTILES, np.quantile(lag, PACING_QUANTILES))})
    return out


def _quantile_values(rows, values_per_run):
    """Lateness values of each run in ``rows``: its quantile function (linear between the recorded
    quantiles, their end values beyond them) at ``values_per_run`` evenly spaced probabilities, s."""
    cols = [_wake_field(q) for q in PACING_QUANTILES]
    u = (np.arange(values_per_run) + 0.5) / values_per_run
    return [np.clip(np.interp(u, PACING_QUANTILES, r), 0.0, None) for r in rows[cols].to_numpy(dtype=float)]


def _paced_rows(runs):
    """Sustainable runs that recorded wake-ups and their lateness quantiles (None: none recorded)."""
    cols = [_wake_field(q) for q in PACING_QUANTILES]
    if not set(cols) <= set(runs.columns):
        return None
    rows = runs[runs[cols].notna().all(axis=1) & (runs["pacing_wakeups"] > 0)]
    if "sustainable" in rows:
        rows = rows[rows["sustainable"].astype(bool)]
    return rows


def run_pacing_from_runs(runs, *, fallback=None, values_per_run=200, source=""):
    """The twin's :class:`RunPacing` from measured runs' :func:`pacing_fields`, or ``fallback`` without them.

    Sustainable runs only (past the limit TCP flow control holds the
    publishers back: the broker's doing). Runs of one configuration at one
    rate (a search's retries) are pooled. Every publisher's own loop gap is
    ``fallback``'s (the one-publisher back-to-back gap of
    :func:`pacing_from_runs`; 0 without it): a many-publisher run's recorded
    gap holds the other publishers' turns on the core.
    """
    rows = _paced_rows(runs)
    if rows is None or rows.empty:
        return fallback
    gap = fallback.gap_s if fallback is not None else 0.0
    out = {}
    for (kind, config, rate), g in rows.groupby(["broker", "config", "rate_per_s"], sort=True):
        lag = np.concatenate(_quantile_values(g, values_per_run))
        one = PacingLag(wake_lag_s=tuple(lag), gap_s=gap, source=f"{kind} {config} at {rate:.6g}/s", shared_core=False)
        out.setdefault((kind, config), []).append((float(rate), one))
    return RunPacing(
        runs={k: tuple(v) for k, v in out.items()}, fallback=fallback, source=source or f"{len(rows)} measured runs"
    )


def pacing_from_runs(runs, *, values_per_run=200, source=""):
    """The twin's :class:`PacingLag` from measured runs' :func:`pacing_fields`, or None without them.

    Sustainable runs only (where a ``sustainable`` column says so): past
    the limit TCP flow control holds the publishers back, which is the
    broker's doing, not the generator's lateness. Runs with one publisher
    only, where there are any: there no other publisher holds the client
    core, whose sharing the twin adds itself
    (:func:`shared_core_send_times_ns`). Each run gives ``values_per_run``
    lateness values, its quantile function (linear between the recorded
    quantiles, their end values beyond them) at evenly spaced
    probabilities; the gap is the median of the runs' gaps among those that
    sent batches back to back.
    """
    rows = _paced_rows(runs)
    if rows is None:
        return None
    if "publishers" in rows and (rows["publishers"] == 1).any():
        rows = rows[rows["publishers"] == 1]
    if rows.empty:
        return None
    lag = np.concatenate(_quantile_values(rows, values_per_run))
    back = rows[rows["pacing_batches"] > rows["pacing_wakeups"]]
    gap = float(np.median(back["pacing_gap_s"])) if len(back) else 0.0
    return PacingLag(wake_lag_s=tuple(lag), gap_s=gap, source=source or f"{len(rows)} measured runs")
