"""What the system calls of one Mosquitto event-loop pass cost on this machine (a C microbenchmark).

``native/syscall_costs.c`` times back-to-back calls on loopback TCP sockets:
a 1-byte and a 64-byte ``recv`` from a socket holding data (Mosquitto 2.0
reads the command byte and each remaining-length byte with its own
``read``), an 80-byte ``send`` (a delivery), ``epoll_wait`` with one ready
descriptor and ``sigprocmask`` (``src/mux_epoll.c`` calls ``epoll_wait``
between two per pass). Warm, back-to-back calls: a lower bound for the same
calls inside a broker, whose own code runs between them. The source is
compiled with the system's C compiler into a temporary directory.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ...sim.errors import ConfigError

__all__ = ["SOURCE", "measure_syscall_costs"]

SOURCE = Path(__file__).with_name("native") / "syscall_costs.c"
NAMES = ("recv1", "recv64", "send80", "epoll_ready", "sigprocmask")


def _compiler():
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    raise OSError("no C compiler (cc, gcc or clang) on PATH: install one (apt-get install gcc)")


def measure_syscall_costs(*, calls=20000, rounds=15, cpu=None, timeout_s=120.0):
    """Median cost of each call of :data:`NAMES`, in seconds.

    Parameters
    ----------
    calls : int
        Back-to-back calls per round.
    rounds : int
        Rounds per call (the median round is kept).
    cpu : int or None
        Core to pin the benchmark to (``taskset -c``); None: not pinned.
    timeout_s : float
        Longest run, s.

    Returns
    -------
    dict
        ``{name: seconds per call}``.

    Raises
    ------
    OSError
        No C compiler, or the benchmark failed (its message).
    """
    for name, value in (("calls", calls), ("rounds", rounds)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(name, value, "an integer >= 1")
    with tempfile.TemporaryDirectory(prefix="pubsim-syscalls-") as tmp:
        binary = str(Path(tmp) / "syscall_costs")
        subprocess.run([_compiler(), "-O2", "-o", binary, str(SOURCE)], check=True, capture_output=True, timeout=60)
        cmd = ([shutil.which("taskset") or "taskset", "-c", str(int(cpu))] if cpu is not None else []) + [binary]
        proc = subprocess.run([*cmd, str(calls), str(rounds)], capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise OSError(f"syscall_costs failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    out = {}
    for line in proc.stdout.splitlines():
        name, ns = line.split()
        out[name] = float(ns) * 1e-9
    return out
