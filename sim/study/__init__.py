"""Batch studies (sweeps) of scenarios, on one machine or a Dask cluster.

>>> from sim.study import load_study, run_study, load_summary   # doctest: +SKIP
>>> study = load_study("experiments/studies/load_sweep.yaml")
>>> run_study(study, "results/load_sweep", executor="local")
>>> summary_with_ci(load_summary("results/load_sweep"))

Modules: :mod:`~sim.study.spec` (study files, points, seeds),
:mod:`~sim.study.sampling` (grid, zip, random and Latin-hypercube samples),
:mod:`~sim.study.fieldpath` (field paths into scenario mappings),
:mod:`~sim.study.tasks` (one replication of one point),
:mod:`~sim.study.executors` (serial, process pool, Dask),
:mod:`~sim.study.store` (layout on disk, resume, loading),
:mod:`~sim.study.runner` and :mod:`~sim.study.stats` (confidence intervals).
"""
from .runner import run_study
from .spec import Point, Study, load_study, parse_study
from .stats import summary_with_ci, t_half_width
from .store import load_latency, load_parameters, load_series, load_stations, load_summary, read_manifest

__all__ = ["load_study", "parse_study", "run_study", "Study", "Point", "load_summary", "load_latency",
           "load_stations", "load_series", "load_parameters", "read_manifest", "summary_with_ci",
           "t_half_width"]
