"""The virtual benchmark: SYSTEMS.md §4's interval search on the simulator,
and the knee of a load sweep.

:func:`saturation_search` drives :func:`pubsim.analysis.interval_search.interval_search`
(the search used on real brokers) with a probe that simulates the topology
with every publisher sending one message per interval: publish intervals
``start, 2 start, 4 start ...`` until one is sustainable
(``egress / (ingress x sp_ratio) >= 0.99`` in the window), then ``[x/2, x]``
in 20 steps; the smallest sustainable interval gives the limit, with a
relative error bound of one step over that interval (at most 5 %).

Only the publishers matched by ``rerate`` (glob patterns of names) are
re-rated; the others (a 1 msg/s latency probe, say) keep their rates.
Sustainability is judged with a *rate-weighted* sp-ratio. Finding (checked
in ``tests/study/test_saturation_rerate.py``): ``RunResult.summary()``'s
``sp_ratio`` is the network's ``sum_t P(t) S(t) / sum_t P(t)``, which counts
*publishers* per topic, not their rates, so with a fast fan-out-10 publisher
and a slow fan-out-5 one it is 7.5 whatever the rates; its
``sustainability`` inherits that error. The summary's
``expected_deliveries`` however counts the deliveries owed per published
message, so ``expected_deliveries / published`` is the rate-weighted
sp-ratio (sum over flows of rate x copies owed / sum of rates, measured);
the probes add ``sp_ratio_weighted``, ``sustainability_weighted`` and
``delivery_ratio_weighted`` and the search judges by those.

The probes are independent simulations: with an ``executor``
(:func:`pubsim.study.executors.make_executor`) they run side by side, each
with the replication number it has in the serial order, so the results are
identical to a serial search: the whole refine grid at once, and the
doubling phase a bracket of intervals at a time (``x, 2x, 4x ...``, one per
worker), speculatively: the probes past the first sustainable interval are
dropped, as the serial search never runs them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import math
from dataclasses import dataclass

import networkx as nx
import pandas as pd

from .. import progress as P
from ..models import topology as T
from ..run import simulate
from ..sim.errors import ConfigError
from ..study.executors import SerialExecutor
from .ci import with_ci
from .interval_search import SUSTAINABLE_RATIO, interval_search, is_sustainable

__all__ = ["Saturation", "saturation_search", "with_publisher_rate", "rerated_publishers", "knees"]


@dataclass(frozen=True, kw_only=True)
class Saturation:
    """Outcome of :func:`saturation_search`.

    Attributes
    ----------
    limit_per_s : float
        Total offered rate of the re-rated publishers at the smallest
        sustainable interval, ``publishers / interval_s``, msg/s (a lower
        bound when ``limit_reached`` is False).
    interval_s : float
        Smallest sustainable publish interval per re-rated publisher, s.
    error_bound_pct : float
        Resolution of the limit, ``100 x step / interval_s`` %.
    publishers : int
        Re-rated publishers.
    limit_reached : bool
        Some probe was unsustainable (else the limit lies above the range).
    saturated_everywhere : bool
        No probe was sustainable (the limit lies below the range).
    probes : pandas.DataFrame
        One row per simulated probe, in the serial order: ``interval_s``,
        ``phase``, ``sustainable``, the run summary, the rate-weighted
        ratios and the probe's busiest station.
    other_rate_per_s : float
        Rate of the publishers not re-rated (kept), msg/s.
    limit_total_per_s : float
        ``limit_per_s + other_rate_per_s``: everything offered at the limit, msg/s.
    bottleneck : str or None
        Station with the highest utilization in the first unsustainable
        probe above the limit (the unsustainable probe of largest interval
        below ``interval_s``; the last probe when none was sustainable);
        None when the limit was not reached.
    bottleneck_utilization : float
        Its utilization in that probe (0..1); NaN without a bottleneck.
    bottleneck_interval_s : float
        Publish interval of that probe, s.
    """

    limit_per_s: float
    interval_s: float
    error_bound_pct: float
    publishers: int
    limit_reached: bool
    saturated_everywhere: bool
    probes: pd.DataFrame
    other_rate_per_s: float = 0.0
    limit_total_per_s: float = math.nan
    bottleneck: str | None = None
    bottleneck_utilization: float = math.nan
    bottleneck_interval_s: float = math.nan

    def record(self) -> dict:
        """The headline figures as one tidy row (no probe table)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "probes"}


def with_publisher_rate(graph, rate_per_s, names=None):
    """A copy of ``graph`` where every publisher (or those in ``names``) sends ``rate_per_s`` msg/s.

    Publishers keep their arrival process (Poisson, constant ...); explicit
    schedules cannot be re-rated and raise ConfigError.
    """
    g = graph.copy()
    for n in T.clients(g, T.NodeKind.PUBLISHER) if names is None else names:
        p = g.nodes[n][T.PARAMS]
        if p.arrival == "schedule":
            raise ConfigError(
                f"publisher {n!r}.arrival",
                "schedule",
                "a rate-driven arrival process (a schedule has no publish interval to vary)",
            )
        g.nodes[n][T.PARAMS] = dataclasses.replace(p, rate_per_s=float(rate_per_s))
    return g


def rerated_publishers(graph, patterns=None) -> list:
    """Publishers of ``graph`` whose names match any glob pattern (:mod:`fnmatch`).

    Parameters
    ----------
    graph : networkx.Graph
    patterns : str, sequence of str or None
        ``pub-*``, ``sensor-?`` ...; None: every publisher.

    Raises
    ------
    ConfigError
        A pattern matches no publisher.
    """
    pubs = list(T.clients(graph, T.NodeKind.PUBLISHER))
    if patterns is None:
        return pubs
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    if not patterns:
        raise ConfigError("rerate", patterns, "at least one publisher name pattern")
    for pat in patterns:
        if not any(fnmatch.fnmatchcase(str(n), pat) for n in pubs):
            raise ConfigError(
                "rerate",
                pat,
                f"a pattern matching some publisher (there are {len(pubs)}: "
                f"{', '.join(map(str, pubs[:5]))}{' ...' if len(pubs) > 5 else ''})",
            )
    return [n for n in pubs if any(fnmatch.fnmatchcase(str(n), pat) for pat in patterns)]


def _factory(source, rerate):
    """``(interval_s -> graph, re-rated publishers, rate of the others msg/s)``."""
    graph = getattr(source, "topology", source)
    if isinstance(graph, nx.Graph):
        names = rerated_publishers(graph, rerate)
        others = [n for n in T.clients(graph, T.NodeKind.PUBLISHER) if n not in set(names)]
        kept = float(sum(graph.nodes[n][T.PARAMS].rate_per_s or 0.0 for n in others))
        return (lambda interval_s: with_publisher_rate(graph, 1.0 / interval_s, names)), len(names), kept
    if callable(source):
        if rerate is not None:
            raise ConfigError("rerate", rerate, "a Scenario or topology source (a factory re-rates itself)")
        return source, None, 0.0
    raise ConfigError(
        "saturation_search source",
        type(source).__name__,
        "a Scenario, a topology graph or a callable interval_s -> graph",
    )


def _probe(graph, duration_s, warmup_s, seed, replication, driver, batch_options=None) -> dict:
    """One simulated probe: the run summary, rate-weighted ratios and the busiest station.

    Top level and of picklable arguments, so that executors can run it in
    worker processes.
    """
    res = simulate(
        graph,
        duration_s=duration_s,
        warmup_s=warmup_s,
        seed=seed,
        replication=replication,
        driver=driver,
        record="stream",
        batch_options=batch_options,
    )
    rec = res.summary()
    owed, published = rec["expected_deliveries"], rec["published"]
    sp_w = owed / published if published else math.nan
    span = rec["window_s"]
    ing, egr = rec["ingress_per_s"], rec["egress_per_s"]
    rec["sp_ratio_weighted"] = sp_w
    rec["sustainability_weighted"] = egr / (ing * sp_w) if ing * sp_w > 0 else math.nan
    rec["delivery_ratio_weighted"] = egr * span / owed if owed else math.nan
    st = res.stations()
    if len(st):
        top = st.loc[st["utilization"].idxmax()]
        rec["bottleneck"], rec["bottleneck_utilization"] = str(top["station"]), float(top["utilization"])
    else:
        rec["bottleneck"], rec["bottleneck_utilization"] = None, math.nan
    return rec


def _weighted_sustainable(rec) -> bool:
    """The 0.99 rule with the rate-weighted sp-ratio."""
    return is_sustainable(
        {"sustainability": rec["sustainability_weighted"], "delivery_ratio": rec["delivery_ratio_weighted"]}
    )


def _bottleneck(probes, best_interval_s, limit_reached, saturated_everywhere):
    """``(station, utilization, interval_s)`` of the first unsustainable probe above the limit."""
    if saturated_everywhere:
        row = probes.loc[probes["interval_s"].idxmax()]
    elif not limit_reached:
        return None, math.nan, math.nan
    else:
        bad = probes[~probes["sustainable"] & (probes["interval_s"] < best_interval_s)]
        if not len(bad):
            return None, math.nan, math.nan
        row = bad.loc[bad["interval_s"].idxmax()]
    return row["bottleneck"], float(row["bottleneck_utilization"]), float(row["interval_s"])


def saturation_search(
    source,
    *,
    start_interval_s=1e-3,
    duration_s=2.0,
    warmup_s=0.5,
    seed=0,
    steps=20,
    max_doublings=12,
    stop_at_first_failure=False,
    driver="batch",
    progress=None,
    rerate=None,
    executor=None,
    speculate=None,
    batch_options=None,
    stop_at_first_success=False,
) -> Saturation:
    """Find a simulated system's limit by the interval search of SYSTEMS.md §4.

    Parameters
    ----------
    source : Scenario, networkx.Graph or callable
        A scenario or topology whose publishers (those matched by ``rerate``)
        are re-rated to one message per interval each, or
        ``factory(interval_s) -> graph``.
    start_interval_s : float
        First (smallest) publish interval per publisher, s (1 ms in the paper).
    duration_s, warmup_s : float
        Length of each simulated probe and its warm-up, s.
    seed : int
        Probe ``k`` (in the serial order) runs replication ``k`` of this seed
        (reproducible, the same with any executor).
    steps, max_doublings, stop_at_first_failure, stop_at_first_success
        As :func:`pubsim.analysis.interval_search.interval_search`.
        ``stop_at_first_success`` measures the refine grid upwards and stops
        at the first sustainable point: the same limit, error bound and
        bottleneck as the full grid for the same seed (each point runs the
        replication it has in the full search), without the probes above
        the limit.
    driver : str
        ``batch`` or ``reference``.
    progress : bool, str or callable, optional
        True (or a label) shows a bar counting the probes, each probe's
        interval and verdict beside it (tqdm: a widget in Jupyter, text on
        stderr elsewhere; :mod:`pubsim.progress`); a callable gets
        ``progress(record)`` after each probe. Refine probes arrive together
        when run by an executor.
    rerate : str, sequence of str or None
        Glob patterns (:func:`fnmatch.fnmatchcase`) of the publisher names to
        re-rate; the others keep their rates. None: every publisher. A
        pattern matching no publisher raises ConfigError.
    executor : object, optional
        An executor of :mod:`pubsim.study.executors` (serial, local process
        pool, Dask) running probes side by side: the whole refine grid, and
        the doubling phase ``speculate`` intervals at a time; None runs them
        in this process one after the other. Results are identical.
    speculate : int, optional
        With a parallel executor: doubling intervals measured at once
        (``x, 2x, 4x ...``; those past the first sustainable one are
        dropped unseen) and, with ``stop_at_first_failure``, refine points
        measured at once. Default: the executor's workers (2 when it does
        not say).
    batch_options : dict, optional
        More keyword arguments of the batch driver for every probe
        (:func:`pubsim.run.simulate`), e.g. ``{"cycles": "optimistic"}``.

    Returns
    -------
    Saturation
    """
    with P.counter(progress, desc="saturation search", unit="probe", label=_probe_label) as notify:
        return _search(
            source,
            start_interval_s,
            duration_s,
            warmup_s,
            seed,
            steps,
            max_doublings,
            stop_at_first_failure,
            driver,
            notify,
            rerate,
            executor,
            speculate,
            batch_options,
            stop_at_first_success,
        )


def _speculation(executor, speculate):
    """Points a parallel executor measures at once: ``speculate``, else its workers (2 when unknown)."""
    if speculate is None:
        return max(1, int(getattr(executor, "workers", 2) or 2))
    if isinstance(speculate, bool) or not isinstance(speculate, int) or speculate < 1:
        raise ConfigError("speculate", speculate, "an integer >= 1 (points measured at once)")
    return speculate


def _probe_label(rec):
    verdict = "sustainable" if _weighted_sustainable(rec) else "unsustainable"
    return f"{rec['interval_s'] * 1e3:.4g} ms {verdict}"


def _search(
    source,
    start_interval_s,
    duration_s,
    warmup_s,
    seed,
    steps,
    max_doublings,
    stop_at_first_failure,
    driver,
    progress,
    rerate,
    executor,
    speculate,
    batch_options,
    stop_at_first_success,
):
    make, publishers, kept = _factory(source, rerate)
    batch = _speculation(executor, speculate)
    kept_records = {"k": 0}  # records kept so far: the next probe's replication in the serial order

    def keep(rec):
        kept_records["k"] += 1
        if progress is not None:
            progress(rec)

    def measure(interval_s):
        return _probe(make(interval_s), duration_s, warmup_s, seed, kept_records["k"], driver, batch_options)

    def measure_many(intervals_s, first):
        # costliest (shortest interval, most messages) first, so that a pool of few workers ends together
        order = sorted(range(len(intervals_s)), key=lambda i: intervals_s[i])
        jobs = [
            (i, (make(intervals_s[i]), duration_s, warmup_s, seed, first + i, driver, batch_options)) for i in order
        ]
        out = dict(executor.run(_probe, jobs))
        return [out[i] for i in range(len(intervals_s))]

    def measure_serial(intervals_s, first):  # positions given by the search (stop_at_first_success)
        return [
            _probe(make(v), duration_s, warmup_s, seed, first + i, driver, batch_options)
            for i, v in enumerate(intervals_s)
        ]

    if publishers is None:  # a factory: count its publishers on the first probe
        publishers = len(T.clients(make(start_interval_s), T.NodeKind.PUBLISHER))
    parallel = executor is not None and not isinstance(executor, SerialExecutor)
    session = getattr(executor, "session", None) if parallel else None
    with session() if session is not None else contextlib.nullcontext():  # one pool for every bracket
        found = interval_search(
            measure,
            start_interval_s=start_interval_s,
            publishers=publishers,
            max_doublings=max_doublings,
            steps=steps,
            stop_at_first_failure=stop_at_first_failure,
            sustainable=_weighted_sustainable,
            measure_many=measure_many if parallel else measure_serial if stop_at_first_success else None,
            batch=batch if parallel else 1 if stop_at_first_success else None,
            on_record=keep,
            stop_at_first_success=stop_at_first_success,
        )
    probes = pd.DataFrame(found.records)
    probes.insert(1, "rate_per_publisher_per_s", 1.0 / probes["interval_s"])
    station, util, at = _bottleneck(probes, found.interval_s, found.limit_reached, found.saturated_everywhere)
    return Saturation(
        limit_per_s=found.rate_per_s,
        interval_s=found.interval_s,
        error_bound_pct=100.0 * found.error_bound,
        publishers=int(publishers),
        limit_reached=found.limit_reached,
        saturated_everywhere=found.saturated_everywhere,
        probes=probes,
        other_rate_per_s=kept,
        limit_total_per_s=found.rate_per_s + kept,
        bottleneck=station,
        bottleneck_utilization=util,
        bottleneck_interval_s=at,
    )


def knees(summary, by, *, load_col="offered_per_s", point_col="point_id", confidence=0.95):
    """Where each configuration of a load sweep stops being sustainable.

    Parameters
    ----------
    summary : pandas.DataFrame
        One row per (point, replication) with ``load_col``, ``sustainability``,
        ``delivery_ratio``, ``egress_per_s`` and ``sp_ratio``
        (:func:`pubsim.study.load_summary`).
    by : list of str
        Columns naming a configuration (e.g. the broker preset).

    Returns
    -------
    pandas.DataFrame
        Per configuration: ``last_sustainable_per_s`` and
        ``first_unsustainable_per_s`` (mean offered load of those points; the
        knee lies between), the mean sustainability at each with its
        confidence half-width, ``saturated_egress_per_s`` (mean egress /
        sp_ratio at the first unsustainable point: the throughput the system
        delivers once saturated) with its half-width, and ``replications``.
        NaN where every point was sustainable (knee above the sweep) or none.
    """
    by = list(by)
    df = summary.copy()
    df["_egress_per_pub"] = df["egress_per_s"] / df["sp_ratio"]
    df["_ratio"] = df[["sustainability", "delivery_ratio"]].min(axis=1)
    pts = with_ci(df, by + [point_col], [load_col, "_ratio", "_egress_per_pub"], confidence)
    rows = []
    for key, grp in pts.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        grp = grp.sort_values(f"{load_col}_mean")
        ok = grp["_ratio_mean"] >= SUSTAINABLE_RATIO
        good, bad = grp[ok], grp[~ok]
        bad = bad[bad[f"{load_col}_mean"] > (good[f"{load_col}_mean"].max() if len(good) else -math.inf)]
        row = dict(zip(by, key))
        g, b = (good.iloc[-1] if len(good) else None), (bad.iloc[0] if len(bad) else None)
        nan = math.nan
        row.update(
            last_sustainable_per_s=g[f"{load_col}_mean"] if g is not None else nan,
            sustainability_below=g["_ratio_mean"] if g is not None else nan,
            sustainability_below_hw=g["_ratio_hw"] if g is not None else nan,
            first_unsustainable_per_s=b[f"{load_col}_mean"] if b is not None else nan,
            sustainability_above=b["_ratio_mean"] if b is not None else nan,
            sustainability_above_hw=b["_ratio_hw"] if b is not None else nan,
            saturated_egress_per_s=b["_egress_per_pub_mean"] if b is not None else nan,
            saturated_egress_hw=b["_egress_per_pub_hw"] if b is not None else nan,
            replications=int(grp[f"{load_col}_n"].max()),
        )
        rows.append(row)
    return pd.DataFrame(rows)
