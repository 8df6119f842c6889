"""Run a study: every (point, replication) not yet finished in ``out_dir``.

Finished tasks (their summary file present) are skipped, never recomputed,
so an interrupted study (Ctrl-C, ``kill -9``, a lost Dask worker) resumes
where it stopped when run again with the same output directory.
"""

from __future__ import annotations

from contextlib import nullcontext

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import interrupts
from .. import progress as P
from . import store
from .executors import make_executor
from .tasks import run_task

__all__ = ["run_study", "pending_tasks"]


def pending_tasks(study, out_dir):
    """[(point, replication)] of the study not finished in ``out_dir``."""
    return [
        (p, r) for p in study.points for r in range(study.replications) if not store.is_finished(out_dir, p.point_id, r)
    ]


def _jobs(study, pending, run_overrides):
    for point, r in pending:
        args = (
            study.raw(point),
            study.base_dir,
            study.seed,
            r,
            dict(run_overrides or {}),
            point.point_id,
            study.columns(point),
        )
        yield (point.point_id, r), args


def _progress(console):

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def run_study(
    study,
    out_dir,
    executor="local",
    dask_address=None,
    workers=None,
    progress=False,
    force_new=False,
    run_overrides=None,
    console=None,
):
    """Run every unfinished task of ``study``, writing results to ``out_dir``.

    Parameters
    ----------
    study : sim.study.Study
        From :func:`pubsim.study.load_study`.
    out_dir : str or Path
        Output directory (layout in :mod:`pubsim.study.store`); a directory of
        an earlier run of the same study resumes it, one of a different
        study is refused unless ``force_new`` (which deletes its results).
    executor : {"local", "serial", "dask"}
        Process pool (``workers`` processes, default ``os.cpu_count()``),
        in process, or Dask.
    dask_address : str, optional
        ``tcp://host:port`` of a running Dask scheduler, or ``local`` for a
        local cluster of ``workers`` processes; implies ``executor="dask"``.
    progress : bool, str or "rich"
        True (or a label): a bar of tasks done / total (tqdm: a widget in
        Jupyter, text on stderr elsewhere; :mod:`pubsim.progress`);
        ``"rich"``: a line about the study and a rich bar on ``console``
        (the command line's); False: nothing.
    run_overrides : dict, optional
        Keyword arguments overriding every point's ``run`` settings
        (``driver``, ``record``).

    Returns
    -------
    pandas.DataFrame
        The summary table (:func:`pubsim.study.load_summary`) of the study's
        points and replications.
    """
    runner = make_executor(executor, dask_address, workers)
    store.prepare(out_dir, study, force_new=force_new)
    pending = pending_tasks(study, out_dir)
    total = len(study.points) * study.replications
    rich = progress == "rich"
    if rich:
        console = console or Console(stderr=True)
        console.print(
            f"study {study.name}: {len(study.points)} points x {study.replications} replications; "
            f"{total - len(pending)} tasks already finished, {len(pending)} to run on "
            f"{runner.description}"
        )
    with (
        _progress(console) if rich else nullcontext() as bar,
        P.bar(False if rich else progress, desc=f"study {study.name}", total=total, unit="task") as tq,
    ):
        task = bar.add_task("tasks", total=total, completed=total - len(pending)) if rich else None
        if tq is not None:
            tq.update(total - len(pending))
        for (point_id, r), tables in runner.run(run_task, _jobs(study, pending, run_overrides)):
            store.write_tables(out_dir, point_id, r, tables)
            interrupts.raise_if_swallowed()  # a Ctrl-C that a writer's finalizer swallowed stops here
            if rich:
                bar.advance(task)
            if tq is not None:
                tq.update(1)
    store.touch_manifest(out_dir)
    df = store.load_summary(out_dir)
    ids = {p.point_id for p in study.points}
    keep = df["point_id"].isin(ids) & (df["replication"] < study.replications) if len(df) else []
    out = df[keep].reset_index(drop=True) if len(df) else df
    out.attrs["varied"] = list(study.varied)
    return out
