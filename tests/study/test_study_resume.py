"""Interrupted studies: kill -9 of the CLI, and a Dask worker lost mid-study."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from pubsim.study import load_latency, load_parameters, load_series, load_stations, load_summary, parse_study, run_study
from tests import ROOT
from tests.study.study_cases import study_dict, write_study

RATE = "topology.publishers[0].rate_per_s"
LOADERS = (load_summary, load_latency, load_stations, load_series, load_parameters)
# 6 points x 2 replications of about 0.2-0.5 s each
SLOW = study_dict(
    vary={"grid": {RATE: ["10k/s", "15k/s", "20k/s"], "topology.broker.queue_messages": [50, 500]}},
    replications=2,
    set={"run.duration": "3s"},  # long enough that a kill or Ctrl-C lands mid-study on a fast, quiet machine
)


def _summaries(out):
    return sorted(out.glob("points/*/rep*.summary.parquet"))


def _assert_same_tables(a, b):
    for load in LOADERS:
        x, y = load(a), load(b)
        assert len(x) > 0
        pd.testing.assert_frame_equal(x, y, check_exact=True)


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return [sys.executable, "-m", "pubsim", *args], env


@pytest.mark.timeout(300)
def test_kill_9_then_rerun_resumes_without_recomputing(tmp_path):
    path = write_study(tmp_path, SLOW)
    out = tmp_path / "out"
    cmd, env = _cli("study", "run", str(path), "--out", str(out), "--executor", "serial")
    proc = subprocess.Popen(
        cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 240
        while len(_summaries(out)) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    finished = _summaries(out)
    assert 3 <= len(finished) < 12, "the study ended before the kill: make its tasks longer"
    reps = {(f.parent, f.name.split(".")[0]) for f in finished}  # (point dir, "rep<r>")
    kept = {
        p: (p.stat().st_mtime_ns, p.stat().st_ino)
        for d, rep in reps
        for p in [*d.glob(f"{rep}.*.parquet"), d / "parameters.parquet"]
    }
    assert len(kept) >= 4 * len(finished)
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert f"{len(finished)} tasks already finished, {12 - len(finished)} to run" in said
    for p, stamp in kept.items():
        assert (p.stat().st_mtime_ns, p.stat().st_ino) == stamp, f"{p} was rewritten"
    assert not list(out.rglob("*.tmp"))
    run_study(parse_study(SLOW), tmp_path / "whole", executor="serial", progress=False)
    _assert_same_tables(out, tmp_path / "whole")


@pytest.mark.dask
@pytest.mark.timeout(300)
def test_study_survives_a_killed_dask_worker(tmp_path):
    from distributed import Client, LocalCluster

    study = parse_study(SLOW)
    run_study(study, tmp_path / "serial", executor="serial", progress=False)
    out = tmp_path / "dask"
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        pids = client.run(os.getpid)
        assert len(pids) == 2
        errors = []

        def work():
            try:
                run_study(study, out, dask_address=cluster.scheduler_address, progress=False)
            except BaseException as err:  # noqa: BLE001 - reported below
                errors.append(err)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        deadline = time.monotonic() + 200
        while len(_summaries(out)) < 2 and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        busy = [addr for addr, keys in client.processing().items() if keys and addr in pids]
        assert busy, "no worker had a task at the time of the kill"
        victim = pids[busy[0]]  # a worker with a task in hand: the scheduler must run it elsewhere
        at_kill = len(_summaries(out))
        os.kill(victim, signal.SIGKILL)
        thread.join(timeout=240)
        assert not thread.is_alive(), "the study did not finish after a worker was killed"
        assert not errors, errors
        assert at_kill < 12, "the study ended before the kill: make its tasks longer"
        assert victim not in client.run(os.getpid).values()  # the nanny started a new worker
    assert len(_summaries(out)) == 12
    _assert_same_tables(tmp_path / "serial", out)


def _session_processes(sid):
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.getsid(int(d.name)) == sid:
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@pytest.mark.timeout(300)
def test_ctrl_c_stops_the_pool_and_keeps_finished_work(tmp_path):
    path = write_study(tmp_path, SLOW)
    out = tmp_path / "out"
    # Ctrl-C interrupts, as in a terminal, even if this test runs in a job that ignores SIGINT
    child = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from pubsim.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", child, "study", "run", str(path), "--out", str(out), "--workers", "2"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while len(_summaries(out)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: to the whole foreground group
        err = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("pubsim: interrupted"), err
    assert "Traceback" not in err  # the workers ignore the Ctrl-C; the parent stops them
    deadline = time.monotonic() + 30
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _session_processes(proc.pid), "worker processes outlived the study"
    assert 2 <= len(_summaries(out)) < 12 and not list(out.rglob("*.tmp"))
    for summary in _summaries(out):  # a finished task has all its tables
        for kind in ("latency", "stations", "series"):
            assert summary.with_name(summary.name.replace("summary", kind)).exists()
