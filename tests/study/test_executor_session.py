"""Executors keep one set of workers for every run inside ``session()``."""

import os
import subprocess
import sys

import pytest

from pubsim.study.executors import LocalExecutor, SerialExecutor


def _pids(executor, jobs):
    return {pid for _, pid in executor.run(os.getpid, [(k, ()) for k in range(jobs)])}


def test_a_session_reuses_the_local_pool():
    ex = LocalExecutor(2)
    with ex.session():
        seen = set().union(*(_pids(ex, 4) for _ in range(3)))
    assert len(seen) <= 2 and os.getpid() not in seen
    assert ex._pool is None  # closed with the block
    assert _pids(ex, 2) - seen  # outside a session every run starts its own workers


def test_a_session_stops_the_pool_on_an_error():
    ex = LocalExecutor(2)
    with pytest.raises(ZeroDivisionError):
        with ex.session():
            dict(ex.run(divmod, [(0, (1, 0))]))
    assert ex._pool is None


def test_serial_session_runs_in_process():
    ex = SerialExecutor()
    with ex.session():
        assert _pids(ex, 3) == {os.getpid()}


_PRELOAD_PROBE = """
from pubsim.study.executors import LocalExecutor
probe = "[m in __import__('sys').modules for m in ('pubsim.study.spec', 'pubsim.models.topology', 'pandas')]"
print(dict(LocalExecutor(1).run(eval, [(0, (probe,))]))[0])
"""


def test_the_pool_starts_the_forkserver_with_pubsim_preloaded():
    """The forkserver is shared by every forkserver child of a process (the
    harness's load-generator clients too): started by a pool, it has pubsim
    imported, so a child does not import it again (about 2 s of CPU each).
    A fresh interpreter, so that this pool starts the forkserver; the probe
    is ``eval``, whose unpickling imports nothing of pubsim in the worker."""
    out = subprocess.run(
        [sys.executable, "-c", _PRELOAD_PROBE], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.split() == ["[True,", "True,", "True]"]
