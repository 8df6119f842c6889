"""Executors keep one set of workers for every run inside ``session()``."""

import os

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
