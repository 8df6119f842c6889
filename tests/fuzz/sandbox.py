"""Run fuzz cases in the fork server and judge each outcome.

Verdicts (the columns of the issue's table):

- ``error``: exit status 2 and exactly one line ``pubsim: error: ...`` of
  at most :data:`MAX_ERROR_CHARS` characters, no traceback;
- ``valid``: exit status 0 for an input that may be valid;
- ``nonsense``: exit status 0 for an input that must be refused;
- ``unreadable_error``: exit status 2, but the message runs over several
  lines or past :data:`MAX_ERROR_CHARS` characters (a value quoted whole);
- ``traceback``: anything else that ends the process (an exception that
  escaped, another exit status, a signal);
- ``hang``: killed after the time budget;
- ``memory``: killed past the memory budget, or a ``MemoryError``.

Only ``error`` and ``valid`` are acceptable.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import ROOT
from tests.fuzz.cases import Case

VERDICTS = ("error", "valid", "unreadable_error", "traceback", "hang", "memory", "nonsense")
ACCEPTABLE = {"error", "valid"}
#: A ConfigError cuts each of its parts (field 300, value 200, expected 600 characters), so its line stays under
#: about 1,200 characters; a study adds its point's label (values cut at 60). Longer is a value quoted whole.
MAX_ERROR_CHARS = 1500
#: Budgets of one case: the issue's hang threshold, and memory far above a small run's (~0.4 GB).
TIME_S = 20.0
MEM_BYTES = 1.5e9


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How one case ended."""

    case: Case
    verdict: str
    exit: int | None
    wall_s: float
    peak_rss_bytes: int
    stderr: str

    def explain(self) -> str:
        """A few lines to read in a failing test: the case, the verdict, the end of stderr."""
        m = self.case.mutation
        tail = "\n".join(self.stderr.strip().splitlines()[-12:])
        return (
            f"{self.case.name}: {self.verdict} (exit {self.exit}, {self.wall_s:.1f} s, "
            f"{self.peak_rss_bytes / 2**20:.0f} MiB) after {m.operator} at {m.where} "
            f"(must refuse: {m.must_refuse}); argv {self.case.argv}\n{tail}"
        )

    def record(self) -> dict[str, Any]:
        """One tidy row."""
        m = self.case.mutation
        first = self.stderr.strip().splitlines()[-1:] or [""]
        return {
            "case": self.case.name,
            "kind": self.case.kind,
            "operator": m.operator,
            "where": m.where,
            "must_refuse": m.must_refuse,
            "verdict": self.verdict,
            "exit": self.exit,
            "wall_s": self.wall_s,
            "peak_rss_mib": self.peak_rss_bytes / 2**20,
            "message": first[0][:200],
        }


def judge(case: Case, answer: dict[str, Any], stderr: str) -> str:
    """The verdict of a finished case (see the module docstring)."""
    if answer["killed"] == "time":
        return "hang"
    if answer["killed"] == "memory" or "MemoryError" in stderr:
        return "memory"
    code = answer["exit"]
    if code == 0:
        return "nonsense" if case.mutation.must_refuse else "valid"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if code != 2 or "Traceback" in stderr:
        return "traceback"
    clean = len(lines) == 1 and lines[0].startswith("pubsim: error:") and len(lines[0]) <= MAX_ERROR_CHARS
    return "error" if clean else "unreadable_error"


class Sandbox:
    """A running fork server (``with Sandbox() as box: box.run(case)``)."""

    def __init__(self, time_s: float = TIME_S, mem_bytes: float = MEM_BYTES) -> None:
        self.time_s = time_s
        self.mem_bytes = mem_bytes
        self._proc: subprocess.Popen[str] | None = None
        self._tmp = Path(tempfile.mkdtemp(prefix="pubsim-fuzz-"))

    def __enter__(self) -> Sandbox:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.server"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self._read()
        if not ready.get("ready"):
            raise RuntimeError(f"fuzz server did not start: {ready}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.stdin.close()  # type: ignore[union-attr]
            self._proc.wait(timeout=30)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _read(self) -> dict[str, Any]:
        line = self._proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError("fuzz server exited")
        return json.loads(line)

    def run(self, case: Case) -> Outcome:
        """Write ``case`` into a fresh folder, run it, and judge it."""
        folder = self._tmp / case.name
        shutil.rmtree(folder, ignore_errors=True)
        case.write(folder)
        request = {"dir": str(folder), "argv": case.argv, "env": case.env, "time_s": self.time_s}
        request["mem_bytes"] = self.mem_bytes
        self._proc.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self._proc.stdin.flush()  # type: ignore[union-attr]
        answer = self._read()
        stderr = (folder / "stderr").read_text(errors="replace") if (folder / "stderr").exists() else ""
        outcome = Outcome(
            case=case,
            verdict=judge(case, answer, stderr),
            exit=answer["exit"],
            wall_s=answer["wall_s"],
            peak_rss_bytes=answer["peak_rss_bytes"],
            stderr=stderr,
        )
        shutil.rmtree(folder, ignore_errors=True)
        return outcome
