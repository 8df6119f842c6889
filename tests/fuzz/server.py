"""The fuzzer's fork server: imports pubsim once, then runs each case in a forked child.

Started by :class:`tests.fuzz.sandbox.Sandbox` as ``python -m tests.fuzz.server``.
It reads one JSON request per line on standard input::

    {"dir": "/tmp/case", "argv": ["run", "s.yaml"], "env": {...}, "time_s": 20, "mem_bytes": 1.5e9}

forks, and in the child changes to ``dir``, sets ``env``, sends file
descriptors 1 and 2 to ``dir/stdout`` and ``dir/stderr`` and calls
``pubsim.cli.main(argv)``; an exception that escapes is printed with its
traceback and exits 99. The parent polls the child's resident memory
(``/proc/PID/status``) and wall time, kills it past either budget, and
answers one JSON line: exit status, signal, what killed it, wall time and
peak RSS (``ru_maxrss`` of ``wait4``, else the largest VmRSS seen).

Forking a warmed process costs milliseconds where a fresh interpreter costs
seconds (numba, pandas, pyarrow); the server starts no threads of its own,
so forking it is safe. The child's address space is capped (RLIMIT_AS) at a
few times the memory budget above its size at fork, so a huge allocation
fails at once instead of paging the machine.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import traceback
from typing import Any

from pubsim import cli
from pubsim.scenario import parse_scenario
from pubsim.sim.errors import ConfigError
from tests.fuzz import seeds

POLL_S = 0.01
EXIT_TRACEBACK = 99


def _warm() -> None:
    """Compile (or load from numba's cache) the kernels a small run uses, once, before forking."""
    scenario = parse_scenario(seeds.scenarios()["quickstart"], base_dir=seeds.EXPERIMENTS)
    scenario.simulate(0)


def _status_kib(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _child(request: dict[str, Any]) -> None:
    """Run one case; never returns."""
    code = EXIT_TRACEBACK
    try:
        os.chdir(request["dir"])
        os.environ.update(request.get("env", {}))
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
        limit = _status_kib(os.getpid(), "VmSize") * 1024 + 4 * int(request["mem_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            code = cli.main(request["argv"]) or 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except ConfigError as exc:  # raised outside main's handler (e.g. while parsing arguments)
            print(f"pubsim: error: {exc}", file=sys.stderr)
            code = 2
        except BaseException:  # the finding the fuzzer looks for: anything else escaping
            traceback.print_exc()
            code = EXIT_TRACEBACK
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _watch(pid: int, time_s: float, mem_bytes: float) -> dict[str, Any]:
    """Wait for ``pid``, killing it past ``time_s`` of wall time or ``mem_bytes`` of RSS."""
    start = time.monotonic()
    killed, peak_kib = None, 0
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        rss_kib = _status_kib(pid, "VmRSS")
        peak_kib = max(peak_kib, rss_kib)
        if killed is None and rss_kib * 1024 > mem_bytes:
            killed = "memory"
        elif killed is None and time.monotonic() - start > time_s:
            killed = "time"
        if killed:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(POLL_S)
    return {
        "exit": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "killed": killed,
        "wall_s": time.monotonic() - start,
        "peak_rss_bytes": max(peak_kib, usage.ru_maxrss) * 1024,
    }


def serve() -> None:
    """Answer requests on stdin until it closes."""
    _warm()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        answer = _watch(pid, request["time_s"], request["mem_bytes"])
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    serve()
