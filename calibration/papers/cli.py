"""``pubsim paper run FOLDER --out DIR [--quick] [--force-new]``: one seed study, calibrated, run and tabulated.

Writes under DIR: ``paper.json`` (folder, setting hash, quick or full),
``points/*.json`` (one finished point each, written atomically: a second
run skips them), ``studies/<label>/`` (study results, resumed by
:func:`pubsim.study.run_study`), ``calibration/<broker>.yaml`` (profiles
calibrated from the folder's evidence), ``tables/<name>.csv``,
``figures/<name>.png`` and ``headline.txt`` (the lines printed). A DIR
holding results of another setting (a changed ``paper.yaml`` or evidence,
or quick vs full) is refused unless ``--force-new``.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from ...sim.errors import ConfigError
from ..profile import profile_yaml
from . import load_paper, run_paper

__all__ = ["add_commands", "DirStore"]


def _atomic_write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


class DirStore:
    """Finished points as ``DIR/points/<key with / as __>.json``."""

    def __init__(self, out):
        self.root = Path(out) / "points"

    def _path(self, key):
        return self.root / (key.replace("/", "__") + ".json")

    def get(self, key):
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key, record):
        _atomic_write(self._path(key), json.dumps(record, indent=1))


def _fingerprint(paper):
    h = hashlib.sha256()
    for path in sorted(paper.folder.rglob("*")):
        if path.is_file() and path.suffix in (".yaml", ".yml", ".csv"):
            h.update(str(path.relative_to(paper.folder)).encode() + b"\0" + path.read_bytes())
    return {"name": paper.name, "quick": paper.quick, "files_sha256": h.hexdigest()}


def _prepare(out, paper, force_new):
    manifest = out / "paper.json"
    want = _fingerprint(paper)
    if manifest.is_file():
        try:
            have = json.loads(manifest.read_text(encoding="utf-8"))
        except ValueError:
            have = {}
        if have != want:
            if not force_new:
                what = "quick" if have.get("quick") else "full"
                raise ConfigError(
                    "--out",
                    str(out),
                    f"a folder of this paper's setting (it holds {have.get('name')!r}, {what}, "
                    "other files: --force-new starts over)",
                )
            for sub in ("points", "studies", "tables", "figures", "calibration"):
                shutil.rmtree(out / sub, ignore_errors=True)
    elif out.exists() and any(out.iterdir()) and not force_new:
        raise ConfigError("--out", str(out), "an empty or new folder, or one of an earlier run of this paper")
    fresh = not manifest.is_file()
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(manifest, json.dumps(want, indent=1))
    return fresh


def run_command(args, console):
    """Calibrate, run (skipping finished points), write tables, figures and profiles, print the headline."""
    paper = load_paper(args.folder, quick=args.quick)
    out = Path(args.out)
    fresh = _prepare(out, paper, args.force_new)
    console.print(f"paper {paper.name} ({'quick' if paper.quick else 'full'} setting): {paper.title}")
    try:
        with console.status("running") as status:
            result = run_paper(
                paper,
                DirStore(out),
                date=datetime.date.today().isoformat(),
                study_dir=out / "studies",
                progress=lambda label: status.update(f"done: {label}"),
            )
    except ConfigError:
        if fresh and not (out / "points").exists() and not (out / "studies").exists():
            (out / "paper.json").unlink(missing_ok=True)  # a setting refused before any point: leave no manifest
        raise
    for kind, profile in result.profiles.items():
        _atomic_write(out / "calibration" / f"{kind}.yaml", profile_yaml(profile))
    for name, table in result.tables.items():
        (out / "tables").mkdir(parents=True, exist_ok=True)
        _atomic_write(out / "tables" / f"{name}.csv", table.to_csv(index=False))
    for name, fig in result.figures.items():
        (out / "figures").mkdir(parents=True, exist_ok=True)
        fig.savefig(out / "figures" / f"{name}.png", dpi=110)
    # optional heavy dependency: matplotlib, only to free the figures drawn
    import matplotlib.pyplot as plt

    plt.close("all")
    lines = [*result.headline, f"points: {result.ran} run, {result.skipped} already finished (skipped)"]
    _atomic_write(out / "headline.txt", "\n".join(lines) + "\n")
    for line in lines:
        console.print(line, markup=False, highlight=False)
    console.print(
        f"wrote {out}: tables/ ({len(result.tables)} CSV), figures/ ({len(result.figures)} PNG)"
        + (f", calibration/ ({len(result.profiles)} profiles)" if result.profiles else "")
    )
    return 0


def add_commands(subparsers):
    """Add ``paper run`` to an argparse subparsers object."""
    paper = subparsers.add_parser("paper", help="run a seed study's folder (experiments/papers/...)")
    psub = paper.add_subparsers(dest="paper_command", required=True)
    run = psub.add_parser("run", help="calibrate, run and tabulate one paper folder (resumes)")
    run.add_argument("folder", help="paper folder holding paper.yaml, e.g. experiments/papers/iot-traffic-classes")
    run.add_argument("--out", required=True, help="output folder (resumed when it holds this paper's results)")
    run.add_argument("--quick", action="store_true", help="the short setting (tests, a first look)")
    run.add_argument("--force-new", action="store_true", help="delete results of another setting in --out")
    run.set_defaults(func=run_command)
    return paper
