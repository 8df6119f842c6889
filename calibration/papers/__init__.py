"""The seeds' settings as ready experiments: ``experiments/papers/<study>/`` (issue 15).

A paper folder holds the published setting of one seed study (scenario or
study files, or a class setting), the calibration inputs SYSTEMS.md gives as
an evidence table, and ``paper.yaml`` (:mod:`.spec`). :func:`run_paper`
calibrates (when there is evidence), runs every point not yet in the store
and returns the predicted tables and figures in the layout of the paper's
results (:class:`.result.PaperResult`); ``pubsim paper run FOLDER --out DIR
[--quick]`` (:mod:`.cli`) writes them.

Kinds (:data:`.spec.KINDS`): ``iot-classes`` (:mod:`.iot`), ``limits``
(:mod:`.limits`), ``studies`` (:mod:`.studies`).
"""

from __future__ import annotations

from .iot import run_iot
from .limits import run_limits
from .result import MemoryStore, PaperResult
from .spec import KINDS, Paper, load_paper
from .studies import run_studies

__all__ = ["KINDS", "Paper", "PaperResult", "MemoryStore", "load_paper", "run_paper"]


def run_paper(paper, store, *, date, study_dir=None, progress=None):
    """Calibrate, run and tabulate one paper folder.

    Parameters
    ----------
    paper : Paper
        From :func:`load_paper` (full or quick setting).
    store : object
        ``get(key)`` / ``put(key, record)`` of finished points
        (:class:`MemoryStore`, or the command's folder of JSON files).
    date : str
        ISO date recorded in calibrated profiles.
    study_dir : Path, optional
        Where a ``studies`` folder's studies keep their results
        (:func:`pubsim.study.run_study` resumes from it); required for that kind.
    progress : callable, optional
        Called with a label after each point.

    Returns
    -------
    PaperResult
    """
    if paper.kind == "iot-classes":
        return run_iot(paper, store, date=date, progress=progress)
    if paper.kind == "limits":
        return run_limits(paper, store, progress=progress)
    return run_studies(paper, study_dir, store, progress=progress)
