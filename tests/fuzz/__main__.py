"""The long fuzz profile: many cases, a table of verdicts, failing cases saved.

    python -m tests.fuzz --cases 2000 [--start 0] [--kinds scenario,study,...]
                         [--save DIR] [--csv FILE] [--time-s 20] [--mem-gib 1.5]

Cases are numbered from ``--start``; ``--cases`` is the total over the kinds
(split evenly). Prints one row per kind and a total row with the columns of
issue 17's table, then one line per unacceptable outcome. ``--save DIR``
writes each unacceptable case into ``DIR/<case>/`` (the layout of
``tests/fuzz/corpus/``), so it can be replayed and kept as a regression test.
Exits 1 when any outcome is unacceptable.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from tests.fuzz.budget import FUZZ_ENV
from tests.fuzz.cases import KINDS, make_case
from tests.fuzz.sandbox import ACCEPTABLE, MEM_BYTES, TIME_S, VERDICTS, Sandbox


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Cases per kind and verdict, with a total row."""
    counts = pd.crosstab(rows["kind"], rows["verdict"]).reindex(columns=list(VERDICTS), fill_value=0)
    counts.insert(0, "cases", counts.sum(axis=1))
    counts.loc["total"] = counts.sum()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--save", type=Path)
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--time-s", type=float, default=TIME_S)
    parser.add_argument("--mem-gib", type=float, default=MEM_BYTES / 2**30)
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    per_kind = max(1, args.cases // len(kinds))
    rows, bad = [], []
    t0 = time.monotonic()
    with Sandbox(time_s=args.time_s, mem_bytes=args.mem_gib * 2**30) as box:
        for n in range(args.start, args.start + per_kind):
            for kind in kinds:
                outcome = box.run(make_case(kind, n, env=FUZZ_ENV))
                rows.append(outcome.record())
                if outcome.verdict not in ACCEPTABLE:
                    bad.append(outcome)
                    print(outcome.explain(), file=sys.stderr, flush=True)
                    if args.save:
                        outcome.case.write(args.save / outcome.case.name)
    frame = pd.DataFrame(rows)
    if args.csv:
        frame.to_csv(args.csv, index=False)
    print(table(frame).to_string())
    print(f"{len(frame)} cases in {time.monotonic() - t0:.0f} s; {len(bad)} unacceptable")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
