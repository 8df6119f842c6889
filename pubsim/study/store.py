"""Study results on disk, and reading them back.

Layout of an output directory ``OUT`` (a contract with the report tools)::

    OUT/manifest.json                                  study, hashes, versions, points
    OUT/points/<point_id>/rep<r>.summary.parquet       one row; written LAST
    OUT/points/<point_id>/rep<r>.latency.parquet       point_id, replication, quantile, latency_s
    OUT/points/<point_id>/rep<r>.stations.parquet      RunResult.stations() + ids
    OUT/points/<point_id>/rep<r>.series.parquet        RunResult.throughput_series() + ids
    OUT/points/<point_id>/parameters.parquet           RunResult.parameters() once per point

Every file is written to a temporary name in its directory, then renamed
(``os.replace``, atomic on POSIX), so a file is whole or absent. A
(point, replication) is finished when its summary file exists.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import uuid
from importlib import metadata
from pathlib import Path

import pandas as pd

from ..sim.errors import ConfigError

__all__ = [
    "MANIFEST",
    "KINDS",
    "rep_path",
    "is_finished",
    "write_atomic",
    "write_tables",
    "prepare",
    "touch_manifest",
    "read_manifest",
    "load_summary",
    "load_latency",
    "load_stations",
    "load_series",
    "load_parameters",
]

MANIFEST = "manifest.json"
KINDS = ("latency", "stations", "series")  # per-replication tables besides the summary
_PACKAGES = ("numpy", "scipy", "pandas", "numba", "simpy", "networkx", "pyarrow", "dask", "distributed", "pubsim")


def point_dir(out, point_id):
    return Path(out) / "points" / point_id


def rep_path(out, point_id, replication, kind):
    return point_dir(out, point_id) / f"rep{replication}.{kind}.parquet"


def is_finished(out, point_id, replication):
    return rep_path(out, point_id, replication, "summary").exists()


def write_atomic(path, write):
    """Call ``write(tmp)`` on a temporary name beside ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_tables(out, point_id, replication, tables):
    """Write one task's tables; the summary last, marking it finished."""
    params = point_dir(out, point_id) / "parameters.parquet"
    if not params.exists():
        write_atomic(params, lambda p: tables["parameters"].to_parquet(p, index=False))
    for kind in KINDS:
        write_atomic(rep_path(out, point_id, replication, kind), lambda p, k=kind: tables[k].to_parquet(p, index=False))
    write_atomic(
        rep_path(out, point_id, replication, "summary"), lambda p: tables["summary"].to_parquet(p, index=False)
    )


def _versions():
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _git_revision():
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev.stdout.strip() if rev.returncode == 0 and rev.stdout.strip() else "unknown"


def _now():
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _manifest(study, created):

    return {
        "name": study.name,
        "description": study.description,
        "study_file": study.path,
        "study_text": study.text,
        "study_text_sha256": hashlib.sha256(study.text.encode()).hexdigest(),
        "config_hash": study.config_hash,
        "base_hash": study.base_hash,
        "seed": study.seed,
        "replications": study.replications,
        "varied": list(study.varied),
        "points": [
            {"point_id": p.point_id, "overrides": p.overrides, "config_hash": p.config_hash} for p in study.points
        ],
        "versions": _versions(),
        "git_revision": _git_revision(),
        "created": created,
        "updated": _now(),
    }


def read_manifest(out):
    """The manifest of a study directory, or None."""
    try:
        return json.loads((Path(out) / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ConfigError(str(Path(out) / MANIFEST), "unreadable", f"a study manifest ({err})") from None


def _write_manifest(out, manifest):
    write_atomic(Path(out) / MANIFEST, lambda p: p.write_text(json.dumps(manifest, indent=2, default=str)))


def _changed(old, study):
    """One line saying what changed between a manifest and a study."""
    before = {p["point_id"]: p.get("config_hash") for p in old.get("points", [])}
    for p in study.points:
        if p.point_id not in before:
            return f"point {p.point_id} ({p.label()}) is new"
        if before[p.point_id] != p.config_hash:
            return f"point {p.point_id} config hash {before[p.point_id][:12]} is now {p.config_hash[:12]}"
    gone = sorted(set(before) - {p.point_id for p in study.points})
    return f"point {gone[0]} is gone" if gone else f"seed {old.get('seed')} is now {study.seed}"


def prepare(out, study, force_new=False):
    """Make ``out`` ready for ``study``: a new directory, or one of the same study.

    Raises
    ------
    ConfigError
        If ``out`` holds another study (its config hash differs) and
        ``force_new`` is false, or holds files but no manifest.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError("--out", str(out), "a directory (or a path where one can be made)")
    old = read_manifest(out)
    if old is not None and force_new:
        shutil.rmtree(out / "points", ignore_errors=True)
        (out / MANIFEST).unlink()
        old = None
    elif old is not None and old.get("config_hash") != study.config_hash:
        raise ConfigError(
            str(out / MANIFEST),
            f"config hash {str(old.get('config_hash'))[:12]}",
            f"the study that made it (this one has {study.config_hash[:12]}: "
            f"{_changed(old, study)}); use --force-new or a new --out",
        )
    elif old is None and out.exists() and any(out.iterdir()):
        raise ConfigError(
            "--out", str(out), f"a new or empty directory, or one of an earlier run of this study (no {MANIFEST} here)"
        )
    out.mkdir(parents=True, exist_ok=True)
    _write_manifest(out, _manifest(study, old["created"] if old else _now()))


def touch_manifest(out):
    """Set the manifest's ``updated`` time to now."""
    manifest = read_manifest(out)
    if manifest is not None:
        manifest["updated"] = _now()
        _write_manifest(out, manifest)


def _finished(out):
    """[(point_id, replication)] of every finished task, sorted."""
    done = []
    for path in Path(out).glob("points/*/rep*.summary.parquet"):
        rep = path.name[len("rep") : -len(".summary.parquet")]
        if rep.isdigit():
            done.append((path.parent.name, int(rep)))
    return sorted(done)


def _concat(frames, sort):
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(sort, kind="stable", ignore_index=True)


def load_summary(out):
    """Every finished summary row, sorted by point_id, replication.

    ``df.attrs["varied"]`` lists the varied paths (from the manifest).
    """
    df = _concat(
        [pd.read_parquet(rep_path(out, p, r, "summary")) for p, r in _finished(out)], ["point_id", "replication"]
    )
    manifest = read_manifest(out) or {}
    df.attrs["varied"] = list(manifest.get("varied", []))
    return df


def _load_kind(out, kind):
    frames = [
        pd.read_parquet(rep_path(out, p, r, kind)) for p, r in _finished(out) if rep_path(out, p, r, kind).exists()
    ]
    return _concat(frames, ["point_id", "replication"])


def load_latency(out):
    """Latency quantiles of every finished replication (point_id, replication, quantile, latency_s)."""
    return _load_kind(out, "latency")


def load_stations(out):
    """Per-station statistics of every finished replication, with point_id and replication."""
    return _load_kind(out, "stations")


def load_series(out):
    """Throughput time series of every finished replication, with point_id and replication."""
    return _load_kind(out, "series")


def load_parameters(out):
    """Parameters and provenance of every point (parameters as JSON text), with point_id."""
    frames = [pd.read_parquet(p) for p in sorted(Path(out).glob("points/*/parameters.parquet"))]
    return _concat(frames, ["point_id"])
