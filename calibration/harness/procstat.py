"""Former name of :mod:`.procfs` (the harness's one ``/proc`` reader), kept for old imports.

``calibration/runner.py`` still does ``from .harness import procstat``; new code imports
:mod:`pubsim.calibration.harness.procfs`. Nothing is parsed here.
"""
from __future__ import annotations

from .procfs import CLK_TCK, ProcessGone, ProcSample, diff, sample

__all__ = ["CLK_TCK", "ProcSample", "ProcessGone", "diff", "sample"]
