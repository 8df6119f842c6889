"""The load generator split by role: the package keeps today's names, each role lives in its module."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys

import pytest

import pubsim.calibration.harness.loadgen as L
from pubsim.calibration.harness.loadgen import (
    STRIDE,
    batch_size,
    pacing_batch,
    publisher,
    records,
    result,
    runner,
    spec,
    subscriber,
    subscriber_topics,
    topic_of,
)


def test_public_names_unchanged():
    assert L.__all__ == [
        "PROTOCOLS",
        "HEADER",
        "HEADER_BYTES",
        "RECORD_DTYPE",
        "PROBE_SEQ",
        "LoadSpec",
        "LoadResult",
        "HarnessError",
        "PublisherBlocked",
        "SetupTimeout",
        "run_load",
        "subscriber_topics",
        "topic_of",
    ]
    assert (STRIDE, batch_size, pacing_batch, subscriber_topics, topic_of) == (
        records.STRIDE,
        spec.batch_size,
        spec.pacing_batch,
        spec.subscriber_topics,
        spec.topic_of,
    )


def test_each_role_in_its_module():
    assert L.LoadSpec.__module__ == spec.__name__ and L.LoadResult.__module__ == result.__name__
    assert L.run_load.__module__ == runner.__name__
    assert publisher._publisher_main.__module__ == publisher.__name__
    assert subscriber._subscriber_main.__module__ == subscriber.__name__
    assert records.RECORD_DTYPE.itemsize == records.STRIDE == records.HEADER_BYTES + 16  # two receive times


@pytest.mark.skipif("forkserver" not in mp.get_all_start_methods(), reason="no forkserver here")
def test_forkserver_preloads_the_whole_package():
    ctx = runner._context()
    assert ctx.get_start_method() == "forkserver"
    assert runner.__package__ == L.__name__


_MAIN_SCRIPT = """
import sys, time
with open(sys.argv[1], "a") as f:  # one line per run of this script, as __main__ or __mp_main__
    f.write("ran\\n")
if __name__ == "__main__":
    import contextlib
    from pubsim.calibration.harness.loadgen import runner
    ctx = runner._context()
    hide = runner._main_hidden if sys.argv[2] == "hidden" else contextlib.nullcontext
    for _ in range(3):
        with hide():
            p = ctx.Process(target=time.sleep, args=(0,))
            p.start()
        p.join()
        assert p.exitcode == 0, p.exitcode
"""


@pytest.mark.parametrize("mode, runs", [("hidden", 1), ("shown", 4)])
def test_clients_start_without_rerunning_the_main_script(tmp_path, mode, runs):
    # Under `pubsim measure` the main script imports the whole CLI (0.9 s of CPU);
    # re-run in each of 64 clients, it pushed the set-up past its deadline.
    # "shown" is the control: without the guard every child re-runs the script.
    script, log = tmp_path / "main_script.py", tmp_path / "runs.txt"
    script.write_text(_MAIN_SCRIPT)
    subprocess.run([sys.executable, str(script), str(log), mode], check=True, timeout=120)
    assert log.read_text().count("ran") == runs
