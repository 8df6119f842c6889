"""The unit of work of a study: one replication of one point.

:func:`run_task` is a plain top-level function of picklable inputs that
returns tidy tables, so any executor (in process, a process pool, Dask
workers on other machines) can run it, and running it twice gives the same
tables: it is pure, and it writes nothing (the runner writes, at the edge).
"""

from __future__ import annotations

import json
import numbers

import numpy as np
import pandas as pd

from ..scenario import parse_scenario

__all__ = ["run_task", "QUANTILES", "tables_of"]

#: Latency quantile levels stored per replication: 0.001, 0.0025, 0.005 to
#: 0.995 in steps of 0.005 (with 0.5, 0.9, 0.99), 0.9975 and 0.999.
QUANTILES = tuple(
    float(q)
    for q in np.unique(np.round(np.concatenate([[0.001, 0.0025], np.arange(1, 200) * 0.005, [0.9975, 0.999]]), 6))
)


def _scalar(value):
    """A varied value as given; lists and mappings as JSON text (one column type)."""
    if value is None or isinstance(value, (str, bool, numbers.Number)):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _ids(df, point_id, replication=None):
    ids = {"point_id": point_id} if replication is None else {"point_id": point_id, "replication": replication}
    out = df.copy()
    for k, (name, value) in enumerate(ids.items()):
        out.insert(k, name, value)
    return out


def tables_of(result, point_id, replication, varied):
    """Tidy tables of one :class:`pubsim.run.RunResult`.

    Returns
    -------
    dict of pandas.DataFrame
        ``summary`` (one row: ids, one column per varied path, every key of
        ``RunResult.summary()``), ``latency`` (``quantile``, ``latency_s`` at
        :data:`QUANTILES`, from the sink's tallies: exact with
        ``record: full``, within the histogram's resolution with ``stream``),
        ``stations``, ``series`` and ``parameters`` (``parameters`` as JSON
        text).
    """
    summary = {
        "point_id": point_id,
        "replication": replication,
        **{path: _scalar(v) for path, v in varied.items()},
        **result.summary(),
    }
    lat = result.sink.latency_stats(QUANTILES)
    latency = pd.DataFrame({"quantile": list(QUANTILES), "latency_s": [float(lat[q]) for q in QUANTILES]})
    params = result.parameters()
    params["parameters"] = params["parameters"].map(lambda p: json.dumps(p, sort_keys=True, default=str))
    return {
        "summary": pd.DataFrame([summary]),
        "latency": _ids(latency, point_id, replication),
        "stations": _ids(result.stations(), point_id, replication),
        "series": _ids(result.throughput_series(), point_id, replication),
        "parameters": _ids(params, point_id),
    }


def run_task(raw, base_dir, seed, replication, run_overrides, point_id, varied):
    """Run replication ``replication`` of one point.

    Parameters
    ----------
    raw : dict
        The point's raw scenario mapping (overrides applied).
    base_dir : str
        Directory that relative paths in the scenario start from.
    seed : int
        The study seed (replaces the mapping's ``seed``).
    replication : int
        Replication index: ``StreamFactory(seed, replication)`` streams.
    run_overrides : dict
        Keyword arguments overriding the scenario's ``run`` settings.
    point_id : str
    varied : dict
        ``{path: value}`` of the point, copied into the summary row.
    """

    scenario = parse_scenario({**raw, "seed": seed}, base_dir)
    result = scenario.simulate(replication, **(run_overrides or {}))
    return tables_of(result, point_id, replication, varied)
