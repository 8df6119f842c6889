"""Copy the notebooks into the documentation as tutorials, each with a note on how to run it.

    python scripts/tutorials.py docs/tutorials

Writes ``<out>/<name>.ipynb`` for every ``notebooks/*.ipynb``: the notebook
unchanged (no outputs: the documentation shows it without executing it;
mkdocs-jupyter renders it) with one Markdown cell inserted after its title
cell saying where the notebook is and how to run it. Run by scripts/docs.sh.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTE_ID = "how-to-run-this-notebook"

NOTE = """\
> **Run it yourself.** This page is the notebook `notebooks/{name}` of the
> repository, shown without running it. In a clone, after `bash scripts/study.sh`
> or `bash scripts/bootstrap.sh` has made `.venv/`:
>
> ```bash
> .venv/bin/pip install -e ".[notebooks]"
> .venv/bin/jupyter lab notebooks/{name}
> ```
>
> then *Run > Run All Cells*. {timing} The long cells show a progress bar
> (`progress=True`, or `pubsim.progress.track` over a loop). Started with
> `PUBSIM_NOTEBOOK_QUICK=1 .venv/bin/jupyter lab notebooks/`, every notebook
> runs a small, fast version of itself (the one the tests run).
"""

# whole-notebook run times, full mode, measured on a shared 2-core machine
LONG = "Running it whole takes a few minutes, most of them in the cells with a progress bar."
TIMING = {
    "calibration_validation.ipynb": LONG,
    "edge_trees.ipynb": LONG,
    "quickstart_what_if.ipynb": LONG,
    "city_trace.ipynb": "Running it whole takes a minute or two. It reads the CampusIoT traces from "
    "`shared/traces` beside the clone (or `$PUBSIM_TRACES`), and uses a generated load when they are absent.",
}


def note_cell(name: str) -> dict:
    """The Markdown cell telling how to run notebook ``name``."""
    text = NOTE.format(name=name, timing=TIMING.get(name, "Running it whole takes about a minute."))
    return {"cell_type": "markdown", "id": NOTE_ID, "metadata": {}, "source": text.splitlines(keepends=True)}


def with_note(notebook: dict, name: str) -> dict:
    """The notebook with the note after its first (title) cell; the other cells unchanged."""
    cells = notebook["cells"]
    return {**notebook, "cells": [*cells[:1], note_cell(name), *cells[1:]]}


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs" / "tutorials"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ipynb"):
        old.unlink()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = with_note(json.loads(path.read_text()), path.name)
        (out / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
