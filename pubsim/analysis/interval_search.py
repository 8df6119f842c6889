"""Saturation: the sustainability rule and the interval search of SYSTEMS.md §4.

A load is *sustainable* when ``egress / (ingress x sp_ratio) >= 0.99``
counted within the measurement window (Banno et al. 2017); below that,
pending messages grow. The limit of a broker is found by measuring with
publish intervals that double (1, 2, 4, 8 ... ms in the paper) until one is
sustainable, then dividing ``[x/2, x]`` into 20 steps and measuring each:
the smallest sustainable interval gives the limit, with at most 5 % error.

The search takes any ``measure(interval_s) -> record`` callable, so it runs
the same on a real broker (:mod:`pubsim.calibration.runner`) and on the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..sim.errors import ConfigError

__all__ = ["SUSTAINABLE_RATIO", "is_sustainable", "latency_trend_s_per_s", "SearchResult", "interval_search"]

SUSTAINABLE_RATIO = 0.99


def is_sustainable(record, *, ratio=SUSTAINABLE_RATIO, max_trend=None):
    """Whether a measured or simulated run was under the limit.

    Parameters
    ----------
    record : mapping
        Needs ``sustainability`` (egress / (ingress x sp_ratio) in the window).
        ``delivery_ratio`` (egress / (offered x sp_ratio)), when present, must
        pass the same rule: a publisher slowed by back-pressure (TCP flow
        control, AMQP credit) lowers ingress with egress, so ingress alone
        hides the overload. ``latency_trend_s_per_s`` is used when
        ``max_trend`` is given.
    ratio : float
        The 0.99 rule of SYSTEMS.md §4.
    max_trend : float or None
        Queue-growth rule: a latency that rises faster than this many seconds
        per second of send time marks the run as saturated even when egress
        keeps up within the window (the backlog is still growing).
    """
    for key in ("sustainability", "delivery_ratio"):
        value = record.get(key, math.nan if key == "sustainability" else 1.0)
        if not (value >= ratio):
            return False
    if max_trend is not None:
        trend = record.get("latency_trend_s_per_s", 0.0)
        if trend > max_trend:
            return False
    return True


def latency_trend_s_per_s(t_send_s, latency_s):
    """Least-squares slope of latency against send time (s per s).

    Near zero below saturation; about ``1 - capacity / offered`` above it,
    where every message waits behind a backlog that grows linearly.
    """
    t = np.asarray(t_send_s, dtype=float)
    y = np.asarray(latency_s, dtype=float)
    if t.size < 3 or np.ptp(t) == 0:
        return 0.0
    return float(np.polyfit(t - t.mean(), y, 1)[0])


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """Outcome of :func:`interval_search`.

    Attributes
    ----------
    interval_s : float
        Smallest sustainable publish interval found, s (per publisher).
    rate_per_s : float
        Limit as an offered rate, ``publishers / interval_s``, msg/s.
    error_bound : float
        Relative resolution of the limit, ``step / interval_s``.
    records : list of dict
        Every measurement, in the order taken, with ``interval_s``,
        ``phase`` (``doubling`` or ``refine``) and ``sustainable`` added.
    saturated_everywhere : bool
        No tried interval was sustainable (limit below the search range).
    limit_reached : bool
        Some tried interval was unsustainable; False when even the first
        (smallest) interval was sustainable, so the limit lies above the
        search range and ``rate_per_s`` is only a lower bound.
    """

    interval_s: float
    rate_per_s: float
    error_bound: float
    records: list = field(default_factory=list)
    saturated_everywhere: bool = False
    limit_reached: bool = True


def _check_search(start_interval_s, max_doublings, steps):
    if not (start_interval_s > 0 and math.isfinite(start_interval_s)):
        raise ConfigError("start_interval_s", start_interval_s, "a positive number of seconds")
    if not (isinstance(max_doublings, int) and max_doublings >= 0):
        raise ConfigError("max_doublings", max_doublings, "an integer >= 0")
    if not (isinstance(steps, int) and steps >= 1):
        raise ConfigError("steps", steps, "an integer >= 1")


def interval_search(
    measure,
    *,
    start_interval_s,
    publishers=1,
    max_doublings=12,
    steps=20,
    stop_at_first_failure=False,
    sustainable=is_sustainable,
    measure_many=None,
    batch=None,
    on_record=None,
    stop_at_first_success=False,
    retries=0,
):
    """Find a broker's limit by the interval search of SYSTEMS.md §4.

    Parameters
    ----------
    measure : callable
        ``measure(interval_s) -> dict`` runs one measurement with every
        publisher sending one message per ``interval_s`` seconds.
    start_interval_s : float
        First (smallest) interval tried, s; the paper starts at 1 ms.
    publishers : int
        Publishers, to express the limit as a total rate.
    max_doublings : int
        Give up after this many doublings without a sustainable run.
    steps : int
        Steps dividing ``[x/2, x]``; 20 in the paper (5 % resolution).
    stop_at_first_failure : bool
        Measure the refine grid from ``x`` downwards and stop at the first
        unsustainable point instead of measuring all of it (saves time when
        sustainability is monotone in the rate; the paper measures all).
    sustainable : callable
        ``sustainable(record) -> bool``; defaults to the 0.99 rule.
    measure_many : callable, optional
        ``measure_many(intervals_s, first) -> list of dict``, the records of
        ``measure`` for each interval (s), in the order given; ``first`` is
        the position of the first of them in the serial order (the number
        of records kept so far), so that a simulator can seed each point as
        the serial search would. When given, points are handed to it several
        at once (a simulator evaluates them side by side): the whole refine
        grid, and with ``batch`` the doubling phase ``batch`` points at a
        time. Records, their order and the result are the serial ones:
        points measured beyond the one that ends a phase are speculative and
        dropped. Leave it None for a real broker, which cannot be measured
        twice at once.
    batch : int or None
        With ``measure_many``: doubling intervals ``x, 2x, ... 2^(batch-1) x``
        are measured at once (the first sustainable one ends the phase), and
        with ``stop_at_first_failure`` the refine grid is measured ``batch``
        points at a time. None: the doubling phase is sequential through
        ``measure`` and the refine grid goes to ``measure_many`` whole.
    on_record : callable, optional
        ``on_record(record)`` for every kept record (tagged with
        ``interval_s``, ``phase`` and ``sustainable``), in the serial order.
    stop_at_first_success : bool
        Measure the refine grid from ``x/2`` upwards and stop at the first
        sustainable point. The smallest sustainable interval is the first
        one found from below, so the limit, its error bound and the
        unsustainable point just below it are those of measuring the whole
        grid, with no assumption of monotonicity: only the points above the
        limit are not measured (they cannot change the result). Each point
        keeps its position in the full search's serial order (``first`` of
        ``measure_many`` counts the points of the full grid, so a simulator
        seeds it as in the full search; then pass ``measure_many``, even
        serially, with ``batch`` 1); records come in the order measured.
        ``batch`` points are measured at once (1 when None).
    retries : int
        A point whose run is unsustainable is measured again, up to this
        many more times, and counts as sustainable when any of its runs is.
        Interference from the rest of the machine (another process, a
        hypervisor) only ever lowers a run's throughput, so the best of a few
        runs estimates the broker's own capacity, as timing benchmarks keep
        their fastest run; one spurious failure would otherwise end the
        doubling phase an interval too late (the limit up to halved) or the
        refinement too early. Every run is kept as a record with
        ``attempt`` (0 for the first run of a point) and its own
        ``sustainable``; ``point_sustainable`` (the point's verdict) is
        added to the last record of each point. Serial only: not with
        ``measure_many``.

    Returns
    -------
    SearchResult
    """
    _check_search(start_interval_s, max_doublings, steps)
    if stop_at_first_failure and stop_at_first_success:
        raise ConfigError("stop_at_first_success", True, "not both stop_at_first_failure and stop_at_first_success")
    if batch is not None and not (isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1):
        raise ConfigError("batch", batch, "an integer >= 1 or None")
    if not (isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0):
        raise ConfigError("retries", retries, "an integer >= 0")
    if retries and measure_many is not None:
        raise ConfigError("retries", retries, "0 with measure_many (retries are for serial measurements)")
    records = []

    def tag(rec, interval_s, phase):
        rec = dict(rec)
        rec.update(interval_s=interval_s, phase=phase, sustainable=bool(sustainable(rec)))
        records.append(rec)
        if on_record is not None:
            on_record(rec)
        return rec["sustainable"]

    def point(interval_s, phase):
        """Measure one point serially, again after each failure up to ``retries`` times; its verdict."""
        for attempt in range(retries + 1):
            rec = measure(interval_s)
            ok = tag({**rec, "attempt": attempt} if retries else rec, interval_s, phase)
            if ok:
                break
        if retries:
            records[-1]["point_sustainable"] = ok
        return ok

    def take(intervals_s, size, phase, stop):
        """Measure ``intervals_s`` ``size`` at a time (``measure`` when None), keep records up to the
        first ``stop(ok)``; the kept points' flags."""
        flags = []
        for lo in range(0, len(intervals_s), size or 1):
            part = intervals_s[lo : lo + (size or 1)]
            if size is None:
                flags.append(point(part[0], phase))
                if stop(flags[-1]):
                    return flags
                continue
            for v, rec in zip(part, measure_many(part, len(records))):
                flags.append(tag(rec, v, phase))
                if stop(flags[-1]):
                    return flags
        return flags

    def upward(grid, size):
        """Measure ``grid`` (descending) from its end ``size`` points at a time, each at its position in
        the full serial order, until the first sustainable point; ``(interval, flag)`` of the kept points."""
        pos0, kept, hi = len(records), [], len(grid)
        while hi > 0:
            lo = max(0, hi - size)
            part = grid[lo:hi]  # descending: positions pos0 + lo ... pos0 + hi - 1 in the full search
            if measure_many is None:
                kept.append((part[0], point(part[0], "refine")))
                if kept[-1][1]:
                    return kept
                hi = lo
                continue
            measured = list(measure_many(part, pos0 + lo))
            for v, rec in zip(part[::-1], measured[::-1]):  # from the smallest interval up
                kept.append((v, tag(rec, v, "refine")))
                if kept[-1][1]:
                    return kept
            hi = lo
        return kept

    doubling = [start_interval_s * 2.0**k for k in range(max_doublings + 1)]
    flags = take(doubling, batch if measure_many is not None else None, "doubling", bool)
    if not flags[-1]:
        return SearchResult(
            interval_s=math.nan,
            rate_per_s=math.nan,
            error_bound=math.nan,
            records=records,
            saturated_everywhere=True,
            limit_reached=True,
        )
    x = doubling[len(flags) - 1]
    best = x
    if x > start_interval_s:  # [x/2, x]: x/2 already failed, x passed
        grid = [float(v) for v in (x / 2.0 + (x / 2.0) * np.arange(1, steps) / steps)[::-1]]
        if stop_at_first_success:
            for interval_s, ok in upward(grid, 1 if measure_many is None else batch or 1):
                if ok:
                    best = min(best, interval_s)
            return SearchResult(
                interval_s=best,
                rate_per_s=publishers / best,
                error_bound=x / 2.0 / steps / best,
                records=records,
                limit_reached=True,
            )
        size = None if measure_many is None else (batch or len(grid)) if stop_at_first_failure else len(grid)
        stop = (lambda ok: not ok) if stop_at_first_failure else (lambda ok: False)
        for interval_s, ok in zip(grid, take(grid, size, "refine", stop)):
            if ok:
                best = min(best, interval_s)
        step = x / 2.0 / steps
    else:
        step = 0.0  # the smallest interval tried is sustainable: limit not reached
    return SearchResult(
        interval_s=best,
        rate_per_s=publishers / best,
        error_bound=step / best,
        records=records,
        limit_reached=x > start_interval_s,
    )
