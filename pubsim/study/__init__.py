"""Batch studies (sweeps) of scenarios, on one machine or a Dask cluster.

>>> from sim.study import load_study, run_study, load_summary   # doctest: +SKIP
>>> study = load_study("experiments/studies/load_sweep.yaml")
>>> run_study(study, "results/load_sweep", executor="local")
>>> summary_with_ci(load_summary("results/load_sweep"))

Modules: :mod:`~pubsim.study.spec` (study files, points, seeds),
:mod:`~pubsim.study.sampling` (grid, zip, random and Latin-hypercube samples),
:mod:`~pubsim.study.fieldpath` (field paths into scenario mappings),
:mod:`~pubsim.study.tasks` (one replication of one point),
:mod:`~pubsim.study.executors` (serial, process pool, Dask),
:mod:`~pubsim.study.store` (layout on disk, resume, loading),
:mod:`~pubsim.study.runner` and :mod:`~pubsim.study.stats` (confidence intervals).
"""

from .runner import run_study
from .spec import Point, Study, load_study, parse_study
from .stats import summary_with_ci, t_half_width
from .store import load_latency, load_parameters, load_series, load_stations, load_summary, read_manifest

__all__ = [
    "load_study",
    "parse_study",
    "run_study",
    "Study",
    "Point",
    "load_summary",
    "load_latency",
    "load_stations",
    "load_series",
    "load_parameters",
    "read_manifest",
    "summary_with_ci",
    "t_half_width",
]
