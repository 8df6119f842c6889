"""Replaying a recorded trace: exact, time-scaled, resampled without bias, scaled up.

:func:`exact`
    The trace as recorded (a copy, optionally a time window).
:func:`time_scaled`
    Every time divided by ``k``: the same messages ``k`` times faster.
:func:`resample`
    The unbiased replay of SYSTEMS.md §5: for every interval of the day
    (15 minutes by default), the empirical distribution of message sizes
    (with their topics) and of inter-message times of that interval; a
    resampled stream draws the gap after a message, and the message's size
    and topic, from the interval of the day the message falls in. Each copy
    starts at a random position of the source (its time of day uniform over
    the source's span) and its first message comes after the equilibrium
    residual of a gap (a length-biased gap times a uniform fraction), so a
    copy is stationary from ``t = 0``.
:func:`scale_up`
    ``n_gateways`` x ``devices_per_gateway``: every gateway superposes
    ``devices_per_gateway`` independent resampled copies on its own random
    stream, spawned from ``rng`` (gateway ``g`` gets the same stream whatever
    ``n_gateways`` is).
:func:`interval_ks`
    Two-sample Kolmogorov-Smirnov tests per interval of the day, the
    fidelity check of a resampled trace against its source.

Gaps are taken per publisher of the source (the time from each message to
the next one of the same publisher), attributed to the interval of the
earlier message. An interval of the day without data borrows the pool of the
nearest earlier interval that has some (cyclically).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...sim.errors import ConfigError
from .trace import DAY_S, Trace

__all__ = ["exact", "time_scaled", "IntervalPools", "resample", "scale_up", "interval_ks", "interval_of_day"]


def exact(trace: Trace, start_s=None, end_s=None) -> Trace:
    """The trace as recorded, or its window ``[start_s, end_s)`` shifted to start at 0."""
    if start_s is None and end_s is None:
        return trace.copy_with(trace.frame.copy())
    t = trace.t_s
    lo = 0.0 if start_s is None else float(start_s)
    hi = (float(t[-1]) + 1.0 if len(t) else 0.0) if end_s is None else float(end_s)
    return trace.window(lo, hi)


def time_scaled(trace: Trace, k: float) -> Trace:
    """The trace played ``k`` times faster (``k > 1``) or slower (``k < 1``).

    The time of day of ``t = 0`` is kept; a daily pattern then repeats every
    ``1 / k`` days of simulated time.
    """
    try:
        k = float(k)
    except (TypeError, ValueError):
        raise ConfigError("k", k, "a speed-up factor > 0") from None
    if not np.isfinite(k) or k <= 0:
        raise ConfigError("k", k, "a speed-up factor > 0")
    frame = trace.frame.copy()
    frame["t_s"] = frame["t_s"] / k
    return trace.copy_with(frame)


def interval_of_day(t_s, t0_of_day_s, interval_s):
    """Index of the interval of the day of times ``t_s`` (trace time, s)."""
    return (((np.asarray(t_s, dtype=float) + t0_of_day_s) % DAY_S) // interval_s).astype(np.int64)


def _check_interval(interval_s):
    try:
        iv = float(interval_s)
    except (TypeError, ValueError):
        raise ConfigError("interval_s", interval_s, "a divisor of 86400 s") from None
    n = DAY_S / iv if iv > 0 else 0
    if not iv > 0 or abs(n - round(n)) > 1e-9:
        raise ConfigError("interval_s", interval_s, "a divisor of 86400 s (900 = 15 minutes)")
    return iv, int(round(n))


def _fill(starts, lens):
    """Empty pools borrow the nearest earlier non-empty one, cyclically."""
    k = len(lens)
    nonempty = np.flatnonzero(lens > 0)
    if not len(nonempty):
        return starts, lens
    src = np.arange(k)
    for i in range(k):
        if lens[i] == 0:
            prev = nonempty[nonempty < i]
            src[i] = prev[-1] if len(prev) else nonempty[-1]
    return starts[src], lens[src]


class IntervalPools:
    """Empirical distributions of a trace per interval of the day.

    Parameters
    ----------
    trace : Trace
        The source; its ``t0_of_day_s`` places it in the day.
    interval_s : float
        Interval length, a divisor of a day (900 s = 15 minutes).
    """

    def __init__(self, trace: Trace, interval_s: float = 900.0):
        if len(trace) < 2:
            raise ConfigError("trace", f"{len(trace)} messages", "at least two messages to resample")
        self.interval_s, self.n_intervals = _check_interval(interval_s)
        self.trace = trace
        t = trace.t_s
        self.t0_of_day_s = trace.t0_of_day_s
        iv = interval_of_day(t, self.t0_of_day_s, self.interval_s)
        order = np.argsort(iv, kind="stable")
        self.msg_size = trace.size_bytes[order]
        self.msg_topic = trace.frame["topic"].cat.codes.to_numpy()[order]
        self.topic_names = list(trace.frame["topic"].cat.categories)
        counts = np.bincount(iv, minlength=self.n_intervals)
        self.msg_count = counts
        self.msg_start, self.msg_len = _fill(np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        # per-publisher gaps, attributed to the earlier message's interval
        codes = trace.frame["publisher"].cat.codes.to_numpy()
        by_pub = np.argsort(codes, kind="stable")
        same = codes[by_pub][1:] == codes[by_pub][:-1]
        gaps = np.diff(t[by_pub])[same]
        giv = iv[by_pub][:-1][same]
        if not len(gaps) or not np.any(gaps > 0):
            raise ConfigError(
                "trace", "no positive inter-message time", "a publisher with at least two messages at different times"
            )
        order = np.argsort(giv, kind="stable")
        self.gap_values = gaps[order]
        gcounts = np.bincount(giv, minlength=self.n_intervals)
        self.gap_count = gcounts
        self.gap_start, self.gap_len = _fill(np.concatenate([[0], np.cumsum(gcounts)[:-1]]), gcounts)
        self.span_s = float(t[-1] - t[0])
        self.first_s = float(t[0])

    def draw_gaps(self, rng, interval):
        return self.gap_values[
            self.gap_start[interval] + (rng.random(len(interval)) * self.gap_len[interval]).astype(np.int64)
        ]

    def draw_first_gaps(self, rng, interval):
        """Time to the first message from a random instant, s: the
        equilibrium residual of a renewal process, ``U x G*`` with ``G*``
        drawn with probability proportional to its length (the gap a random
        instant falls in is length-biased; Cox 1962, *Renewal Theory*,
        §1.3). Pools whose gaps are all 0 fall back to a plain draw."""
        cum = self._gap_cum()
        lo, n = self.gap_start[interval], self.gap_len[interval]
        total = cum[lo + n] - cum[lo]
        pos = cum[lo] + rng.random(len(interval)) * total
        idx = np.clip(np.searchsorted(cum, pos, side="right") - 1, lo, lo + n - 1)
        flat = total <= 0
        if flat.any():
            idx[flat] = lo[flat] + (rng.random(int(flat.sum())) * n[flat]).astype(np.int64)
        return rng.random(len(interval)) * self.gap_values[idx]

    def _gap_cum(self):
        if getattr(self, "_cum", None) is None:
            self._cum = np.concatenate([[0.0], np.cumsum(self.gap_values)])
        return self._cum

    def draw_messages(self, rng, interval):
        idx = self.msg_start[interval] + (rng.random(len(interval)) * self.msg_len[interval]).astype(np.int64)
        return self.msg_size[idx], self.msg_topic[idx]

    def start_tod(self, rng, n):
        """Times of day of ``n`` random start positions in the source."""
        return (self.t0_of_day_s + self.first_s + rng.random(n) * self.span_s) % DAY_S


def _resample_arrays(pools, rng, copies, duration_s, start_tod_s):
    """(t, copy, size, topic code) of ``copies`` resampled streams, unsorted."""
    tod0 = pools.start_tod(rng, copies) if start_tod_s is None else np.full(copies, float(start_tod_s) % DAY_S)
    iv_len = pools.interval_s
    k = pools.n_intervals

    def interval(t, who):
        return (((tod0[who] + t) % DAY_S) // iv_len).astype(np.int64) % k

    who = np.arange(copies)
    t = pools.draw_first_gaps(rng, interval(np.zeros(copies), who))
    out_t, out_c, out_s, out_p = [], [], [], []
    rounds = 0
    stalled = 0
    while True:
        live = t < duration_s
        if not live.all():
            t, who = t[live], who[live]
        if not len(t):
            break
        iv = interval(t, who)
        size, topic = pools.draw_messages(rng, iv)
        out_t.append(t)
        out_c.append(who)
        out_s.append(size)
        out_p.append(topic)
        gap = pools.draw_gaps(rng, iv)
        stalled = stalled + 1 if not np.any(gap > 0) else 0
        if stalled > 100_000:  # pragma: no cover - only zero gaps drawn for ages
            raise ConfigError("trace", "inter-message times of 0", "positive inter-message times")
        t = t + gap
        rounds += 1
    if not out_t:
        return np.empty(0), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int16), tod0
    return np.concatenate(out_t), np.concatenate(out_c), np.concatenate(out_s), np.concatenate(out_p), tod0


def _pools(trace_or_pools, interval_s):
    if isinstance(trace_or_pools, IntervalPools):
        return trace_or_pools
    if not isinstance(trace_or_pools, Trace):
        raise ConfigError("trace", type(trace_or_pools).__name__, "a Trace")
    return IntervalPools(trace_or_pools, interval_s)


def _duration(duration_s):
    try:
        d = float(duration_s)
    except (TypeError, ValueError):
        raise ConfigError("duration_s", duration_s, "a duration > 0 s") from None
    if not np.isfinite(d) or d <= 0:
        raise ConfigError("duration_s", duration_s, "a duration > 0 s")
    return d


def resample(trace, rng, *, duration_s, copies=1, interval_s=900.0, start_tod_s=None, publisher=None, prefix="r"):
    """Unbiased resampled replay (SYSTEMS.md §5) of ``copies`` independent streams.

    Parameters
    ----------
    trace : Trace or IntervalPools
        The recorded source (pools are reused when given).
    rng : numpy.random.Generator
    duration_s : float
        Length of the output.
    copies : int
        Independent resampled streams, superposed.
    interval_s : float
        Interval of the day over which the empirical distributions are taken.
    start_tod_s : float, optional
        Time of day at which every copy starts; default a random position
        in the source for each copy.
    publisher : str, optional
        Publisher name of every copy (a gateway carrying them all); default
        ``{prefix}{copy}``, one publisher per copy.

    Returns
    -------
    Trace
        ``t0_of_day_s`` is ``start_tod_s`` when given, else the source's;
        with one publisher per copy, the in-memory attribute
        ``publisher_t0_of_day_s`` (array by publisher code, not saved) holds
        each copy's own starting time of day.
    """
    if not isinstance(rng, np.random.Generator):
        raise ConfigError("rng", type(rng).__name__, "a numpy.random.Generator")
    if isinstance(copies, bool) or not isinstance(copies, (int, np.integer)) or copies < 1:
        raise ConfigError("copies", copies, "an integer >= 1")
    pools = _pools(trace, interval_s)
    dur = _duration(duration_s)
    t, who, size, topic, tod0 = _resample_arrays(pools, rng, int(copies), dur, start_tod_s)
    order = np.argsort(t, kind="stable")
    if publisher is None:
        pub, names = who[order].astype(np.int32), [f"{prefix}{i}" for i in range(copies)]
    else:
        pub, names = np.zeros(len(t), np.int32), [str(publisher)]
    t0 = pools.t0_of_day_s if start_tod_s is None else float(start_tod_s)
    out = Trace.from_arrays(
        t[order],
        pub,
        topic[order].astype(np.int32),
        size[order],
        publisher_names=names,
        topic_names=pools.topic_names,
        t0_of_day_s=t0,
        sort=False,
        where="resample",
    )
    if publisher is None:
        out.publisher_t0_of_day_s = tod0
    return out


def scale_up(
    trace, rng, *, n_gateways, devices_per_gateway, duration_s, interval_s=900.0, start_tod_s=None, prefix="gw"
):
    """``n_gateways`` gateways, each the superposition of ``devices_per_gateway`` resampled copies.

    Gateway ``g`` (publisher ``{prefix}{g}``) draws from the ``g``-th child of
    ``rng.spawn(n_gateways)``: the gateways are independent, and gateway
    ``g`` sends the same messages whatever ``n_gateways`` is.
    """
    if not isinstance(rng, np.random.Generator):
        raise ConfigError("rng", type(rng).__name__, "a numpy.random.Generator")
    for name, v in (("n_gateways", n_gateways), ("devices_per_gateway", devices_per_gateway)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(name, v, "an integer >= 1")
    pools = _pools(trace, interval_s)
    dur = _duration(duration_s)
    ts, gs, ss, ps = [], [], [], []
    for g, child in enumerate(rng.spawn(int(n_gateways))):
        t, _, size, topic, _ = _resample_arrays(pools, child, int(devices_per_gateway), dur, start_tod_s)
        ts.append(t)
        gs.append(np.full(len(t), g, dtype=np.int32))
        ss.append(size)
        ps.append(topic)
    t = np.concatenate(ts)
    order = np.argsort(t, kind="stable")
    t0 = pools.t0_of_day_s if start_tod_s is None else float(start_tod_s)
    return Trace.from_arrays(
        t[order],
        np.concatenate(gs)[order],
        np.concatenate(ps)[order].astype(np.int32),
        np.concatenate(ss)[order],
        publisher_names=[f"{prefix}{g}" for g in range(n_gateways)],
        topic_names=pools.topic_names,
        t0_of_day_s=t0,
        sort=False,
        where="scale_up",
    )


def _per_interval(trace, interval_s):
    """(message intervals, sizes, gap intervals, gaps) of a trace."""
    t = trace.t_s
    codes = trace.frame["publisher"].cat.codes.to_numpy()
    own = getattr(trace, "publisher_t0_of_day_s", None)
    iv = interval_of_day(t, trace.t0_of_day_s if own is None else np.asarray(own)[codes], interval_s)
    by_pub = np.argsort(codes, kind="stable")
    same = codes[by_pub][1:] == codes[by_pub][:-1]
    gaps = np.diff(t[by_pub])[same]
    giv = iv[by_pub][:-1][same]
    return iv, trace.size_bytes, giv, gaps


def interval_ks(source: Trace, resampled: Trace, *, interval_s=900.0, min_samples=20) -> pd.DataFrame:
    """Two-sample KS tests of sizes and of inter-message times, per interval of the day.

    Gaps are per publisher in both traces, so compare a resampled trace with
    one publisher per copy. A trace with ``publisher_t0_of_day_s`` (from
    :func:`resample` with random starts) places each publisher's messages in
    the day by its own start. Intervals where either side has fewer than
    ``min_samples`` values get NaN.

    Returns
    -------
    pandas.DataFrame
        ``interval, n_size_source, n_size_resampled, p_size, n_gap_source,
        n_gap_resampled, p_gap``.
    """
    from scipy.stats import ks_2samp  # optional heavy dependency: scipy.stats, only for this check

    iv_s, n = _check_interval(interval_s)
    a_iv, a_size, a_giv, a_gap = _per_interval(source, iv_s)
    b_iv, b_size, b_giv, b_gap = _per_interval(resampled, iv_s)
    rows = []
    for i in range(n):
        row = {"interval": i}
        for label, (xa, xb) in (
            ("size", (a_size[a_iv == i], b_size[b_iv == i])),
            ("gap", (a_gap[a_giv == i], b_gap[b_giv == i])),
        ):
            row[f"n_{label}_source"], row[f"n_{label}_resampled"] = len(xa), len(xb)
            row[f"p_{label}"] = float(ks_2samp(xa, xb).pvalue) if min(len(xa), len(xb)) >= min_samples else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)
