"""Copy the Python sources into the installed layout (``DEST/pubsim/sim/...``).

setuptools maps the repository's top-level ``sim/``, ``models/`` and
``calibration/`` folders to ``pubsim.sim``, ``pubsim.models`` and
``pubsim.calibration`` (``package_dir`` in setup.cfg). Import hooks make
that work for an editable install, but static tools that walk the file system
(import-linter's grimp, mypy) need the installed tree: this writes one, with
the ``.py`` files only, for ``scripts/lint.sh``.

Usage: ``python scripts/layout_view.py DEST``
"""

from __future__ import annotations

import configparser
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, Path]:
    """``package_dir`` of setup.cfg: dotted package name -> source folder."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    pairs = (line.split("=") for line in cfg["options"]["package_dir"].strip().splitlines())
    return {name.strip(): ROOT / folder.strip() for name, folder in pairs}


def main(dest: str) -> None:
    out = Path(dest)
    for name, src in package_dirs().items():
        target = out.joinpath(*name.split("."))
        for py in src.rglob("*.py"):
            rel = py.relative_to(src)
            if any(part.startswith(".") for part in rel.parts):
                continue
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(py, target / rel)


if __name__ == "__main__":
    main(sys.argv[1])
