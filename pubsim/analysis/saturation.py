"""The virtual benchmark: SYSTEMS.md §4's interval search on the simulator,
and the knee of a load sweep.

:func:`saturation_search` drives :func:`pubsim.analysis.interval_search.interval_search`
(the search used on real brokers) with a probe that simulates the topology
with every publisher sending one message per interval: publish intervals
``start, 2 start, 4 start ...`` until one is sustainable
(``egress / (ingress x sp_ratio) >= 0.99`` in the window), then ``[x/2, x]``
in 20 steps; the smallest sustainable interval gives the limit, with a
relative error bound of one step over that interval (at most 5 %).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import networkx as nx
import pandas as pd

from .interval_search import SUSTAINABLE_RATIO, interval_search
from ..models import topology as T
from ..sim.errors import ConfigError
from ..run import simulate

from .ci import with_ci

__all__ = ["Saturation", "saturation_search", "with_publisher_rate", "knees"]


@dataclass(frozen=True, kw_only=True)
class Saturation:
    """Outcome of :func:`saturation_search`.

    Attributes
    ----------
    limit_per_s : float
        Total offered rate at the smallest sustainable interval, msg/s
        (a lower bound when ``limit_reached`` is False).
    interval_s : float
        Smallest sustainable publish interval per publisher, s.
    error_bound_pct : float
        Resolution of the limit, ``100 x step / interval_s`` %.
    publishers : int
    limit_reached : bool
        Some probe was unsustainable (else the limit lies above the range).
    saturated_everywhere : bool
        No probe was sustainable (the limit lies below the range).
    probes : pandas.DataFrame
        One row per simulated probe, in the order run: ``interval_s``,
        ``phase``, ``sustainable`` and the run summary.
    """

    limit_per_s: float
    interval_s: float
    error_bound_pct: float
    publishers: int
    limit_reached: bool
    saturated_everywhere: bool
    probes: pd.DataFrame

    def record(self) -> dict:
        """The headline figures as one tidy row (no probe table)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "probes"}


def with_publisher_rate(graph, rate_per_s):
    """A copy of ``graph`` where every publisher sends ``rate_per_s`` msg/s.

    Publishers keep their arrival process (Poisson, constant ...); explicit
    schedules cannot be re-rated and raise ConfigError.
    """
    g = graph.copy()
    for n in T.clients(g, T.NodeKind.PUBLISHER):
        p = g.nodes[n][T.PARAMS]
        if p.arrival == "schedule":
            raise ConfigError(f"publisher {n!r}.arrival", "schedule", "a rate-driven arrival process "
                              "(a schedule has no publish interval to vary)")
        g.nodes[n][T.PARAMS] = dataclasses.replace(p, rate_per_s=float(rate_per_s))
    return g


def _factory(source):
    """``(interval_s -> graph, publishers)`` from a scenario, graph or callable."""
    graph = getattr(source, "topology", source)
    if isinstance(graph, nx.Graph):
        n = len(T.clients(graph, T.NodeKind.PUBLISHER))
        return (lambda interval_s: with_publisher_rate(graph, 1.0 / interval_s)), n
    if callable(source):
        return source, None
    raise ConfigError("saturation_search source", type(source).__name__,
                      "a Scenario, a topology graph or a callable interval_s -> graph")


def saturation_search(source, *, start_interval_s=1e-3, duration_s=2.0, warmup_s=0.5, seed=0,
                      steps=20, max_doublings=12, stop_at_first_failure=False, driver="batch",
                      progress=None):
    """Find a simulated system's limit by the interval search of SYSTEMS.md §4.

    Parameters
    ----------
    source : Scenario, networkx.Graph or callable
        A scenario or topology whose publishers are re-rated to one message
        per interval each, or ``factory(interval_s) -> graph``.
    start_interval_s : float
        First (smallest) publish interval per publisher, s (1 ms in the paper).
    duration_s, warmup_s : float
        Length of each simulated probe and its warm-up, s.
    seed : int
        Probe ``k`` runs replication ``k`` of this seed (reproducible).
    steps, max_doublings, stop_at_first_failure
        As :func:`pubsim.analysis.interval_search.interval_search`.
    driver : str
        ``batch`` or ``reference``.
    progress : callable, optional
        ``progress(record)`` after each probe.

    Returns
    -------
    Saturation
    """
    make, publishers = _factory(source)
    counter = {"k": 0, "publishers": publishers}

    def measure(interval_s):
        g = make(interval_s)
        counter["publishers"] = counter["publishers"] or len(T.clients(g, T.NodeKind.PUBLISHER))
        res = simulate(g, duration_s=duration_s, warmup_s=warmup_s, seed=seed,
                       replication=counter["k"], driver=driver, record="stream")
        counter["k"] += 1
        rec = res.summary()
        if progress is not None:
            progress({"interval_s": interval_s, **rec})
        return rec

    if publishers is None:  # a factory: count its publishers on the first probe
        counter["publishers"] = len(T.clients(make(start_interval_s), T.NodeKind.PUBLISHER))
    found = interval_search(measure, start_interval_s=start_interval_s,
                            publishers=counter["publishers"], max_doublings=max_doublings, steps=steps,
                            stop_at_first_failure=stop_at_first_failure)
    probes = pd.DataFrame(found.records)
    probes.insert(1, "rate_per_publisher_per_s", 1.0 / probes["interval_s"])
    return Saturation(limit_per_s=found.rate_per_s, interval_s=found.interval_s,
                      error_bound_pct=100.0 * found.error_bound, publishers=int(counter["publishers"]),
                      limit_reached=found.limit_reached, saturated_everywhere=found.saturated_everywhere,
                      probes=probes)


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
