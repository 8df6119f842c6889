"""Where a study's tasks run: in process, a local process pool, or Dask.

An executor runs ``fn(*args)`` for every ``(key, args)`` job and yields
``(key, result)`` as results arrive, in any order. ``fn`` must be a
top-level function of picklable arguments; the caller writes results, so
workers need no shared file system.

Each ``run`` starts its workers and stops them at the end, unless it is
called inside ``with executor.session():``, which keeps one set of workers
(a process pool, a Dask client) for every ``run`` within it: a caller that
hands over work in several rounds (the saturation search's brackets) pays
the workers' start-up (interpreter, imports, compilation) once.

With Dask (``dask.distributed``), tasks of a worker that dies are
rescheduled on the others by the scheduler; tasks are pure (same inputs,
same tables), so a rerun gives the same result.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import forkserver

from ..sim.errors import ConfigError

__all__ = ["SerialExecutor", "LocalExecutor", "DaskExecutor", "make_executor", "EXECUTORS"]


@contextlib.contextmanager
def _sigint_ignored():
    """Ignore SIGINT while child processes start, so that they inherit that.

    A Ctrl-C at a terminal reaches every process of the foreground group;
    workers that ignore it leave the parent to stop them in order (a Python
    started with SIGINT ignored keeps it ignored). Only the main thread can
    change signal handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class SerialExecutor:
    """Run jobs one after the other in this process (tests, debugging)."""

    description = "serial (in process)"

    @contextlib.contextmanager
    def session(self):
        """Nothing to keep between runs."""
        yield self

    def run(self, fn, jobs):
        for key, args in jobs:
            yield key, fn(*args)


class LocalExecutor:
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes.

    Workers start with the ``forkserver`` method (no fork of a parent that
    runs threads, such as the progress display); default ``os.cpu_count()``.
    """

    def __init__(self, workers=None):
        self.workers = workers or os.cpu_count() or 1
        self.description = f"local process pool ({self.workers} workers)"
        self._pool = None

    def _start(self, jobs):
        ctx = multiprocessing.get_context("forkserver")
        # The forkserver is one per process, and whoever starts it first sets what it preloads: with the
        # default (only ``__main__``) every child it forks imports pubsim itself, about 2 s of CPU each,
        # the harness's load-generator clients too (32 of them ran past their set-up deadline).
        ctx.set_forkserver_preload([__package__])
        # Workers are forked by the forkserver and keep the SIGINT disposition it started with: start it
        # with Ctrl-C ignored, and every worker ignores it; this process handles it from then on (a Ctrl-C
        # while submitting jobs could be lost when SIGINT was ignored here around every submission).
        with _sigint_ignored():
            forkserver.ensure_running()
            return ProcessPoolExecutor(max_workers=min(self.workers, jobs), mp_context=ctx)

    @staticmethod
    def _stop(pool):
        """Stop a pool's workers now (Ctrl-C, an error, or the caller stopped)."""
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.terminate()  # no public way before Python 3.14 (terminate_workers)
        pool.shutdown(wait=False, cancel_futures=True)

    @contextlib.contextmanager
    def session(self):
        """Keep one pool of ``workers`` processes for every :meth:`run` inside the block."""
        if self._pool is not None:
            yield self
            return
        self._pool = self._start(self.workers)
        try:
            yield self
        except BaseException:
            self._stop(self._pool)
            raise
        else:
            self._pool.shutdown(wait=True)
        finally:
            self._pool = None

    def run(self, fn, jobs):
        jobs = list(jobs)
        if not jobs:
            return
        pool = self._pool or self._start(len(jobs))
        futures = {}
        try:
            futures = {pool.submit(fn, *args): key for key, args in jobs}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        except BaseException:
            if pool is self._pool:
                for fut in futures:
                    fut.cancel()
            else:
                self._stop(pool)
            raise
        if pool is not self._pool:
            pool.shutdown(wait=True)


class DaskExecutor:
    """Tasks on a Dask distributed cluster.

    Parameters
    ----------
    address : str
        ``tcp://host:port`` of a running scheduler (its workers must be
        able to import pubsim, and see GraphML files a scenario names at
        the same paths), or ``local`` for a
        :class:`dask.distributed.LocalCluster` of worker processes.
    workers : int, optional
        Worker processes of a local cluster (default ``os.cpu_count()``).
    """

    def __init__(self, address, workers=None):
        try:
            # optional heavy dependency: dask.distributed, only for --dask
            import distributed  # noqa: F401
        except ImportError:
            raise ConfigError(
                "--dask", address, "dask.distributed installed (pip install 'dask[distributed]')"
            ) from None
        if not isinstance(address, str) or not (address == "local" or "://" in address):
            raise ConfigError("--dask", address, "local or a scheduler address such as tcp://host:8786")
        self.address = address
        self.workers = workers or os.cpu_count() or 1
        self.description = (
            f"Dask local cluster ({self.workers} worker processes)"
            if address == "local"
            else f"Dask scheduler {address}"
        )
        self._open = None

    @contextlib.contextmanager
    def session(self):
        """Keep one client (and local cluster) for every :meth:`run` inside the block."""
        if self._open is not None:
            yield self
            return
        self._open = self._client()
        try:
            yield self
        finally:
            client, cluster = self._open
            self._open = None
            client.close()
            if cluster is not None:
                cluster.close()

    def _client(self):
        # optional heavy dependency: dask.distributed, only for --dask
        from distributed import Client, LocalCluster

        if self.address != "local":
            try:
                return Client(self.address, timeout="20s"), None
            except OSError as err:
                raise ConfigError("--dask", self.address, f"a reachable Dask scheduler ({err})") from None
        with _sigint_ignored():  # Ctrl-C stops this process, which closes the cluster cleanly
            cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        return Client(cluster), cluster

    def run(self, fn, jobs):
        # optional heavy dependency: dask.distributed, only for --dask
        from distributed import as_completed as dask_completed

        jobs = list(jobs)
        if not jobs:
            return
        client, cluster = self._open or self._client()
        tag = uuid.uuid4().hex[:8]
        futures = {}
        try:
            for key, args in jobs:
                name = "-".join(str(k) for k in key) if isinstance(key, tuple) else str(key)
                futures[client.submit(fn, *args, key=f"pubsim-{name}-{tag}", pure=False)] = key
            for fut in dask_completed(list(futures)):
                key, result = futures[fut], fut.result()
                fut.release()
                yield key, result
        finally:
            client.cancel(list(futures))
            if self._open is None:
                client.close()
                if cluster is not None:
                    cluster.close()


EXECUTORS = {"serial": SerialExecutor, "local": LocalExecutor}


def make_executor(executor="local", dask_address=None, workers=None):
    """The executor named by the command line or :func:`pubsim.study.run_study` arguments."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError("--workers", workers, "an integer >= 1")
    if executor == "dask" or dask_address is not None:
        return DaskExecutor(dask_address or "local", workers)
    if executor == "serial":
        return SerialExecutor()
    if executor == "local":
        return LocalExecutor(workers)
    raise ConfigError("--executor", executor, "one of ['dask', 'local', 'serial']")
