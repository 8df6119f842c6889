"""A paper folder: ``paper.yaml``, its evidence table and its scenario or study files.

Layout of ``experiments/papers/<study>/paper.yaml``::

    name: iot-traffic-classes          # a short name
    title: ...                         # what the folder reproduces
    source: Happ et al. 2017 (SYSTEMS.md §5)
    kind: iot-classes                  # iot-classes | limits | studies (see KINDS)
    evidence: evidence.yaml            # optional: the calibration inputs (docs/evidence.md)
    full: {...}                        # the published setting (kind-specific keys)
    quick: {...}                       # overrides of ``full`` for a short run (tests)

``quick`` is merged into ``full`` mapping by mapping (a list replaces a
list). Every error is one :class:`~pubsim.sim.errors.ConfigError` line naming
the folder and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ...sim.errors import ConfigError
from ...sim.safeyaml import safe_load

__all__ = ["KINDS", "Paper", "load_paper", "merged"]

#: Kinds of paper folders and what their ``full`` mapping holds.
KINDS = {
    "iot-classes": "trace classes replayed per interval of the day, scale-up of publishers (SYSTEMS.md §5)",
    "limits": "the §4 limit search per scenario, plus a latency run per scenario (SYSTEMS.md §3-4)",
    "studies": "study files run with pubsim.study, tabulated and drawn by the folder's table specs",
}
_KEYS = {"name", "title", "source", "kind", "evidence", "full", "quick"}


@dataclass(frozen=True, kw_only=True)
class Paper:
    """One seed study's folder, read and checked.

    Attributes
    ----------
    folder : Path
        The folder.
    name, title, source, kind : str
        From ``paper.yaml``.
    evidence : Path or None
        The evidence table (calibration inputs), when the folder has one.
    setting : dict
        ``full``, with ``quick`` merged in when ``quick`` was asked for.
    quick : bool
        The short setting.
    """

    folder: Path
    name: str
    title: str
    source: str
    kind: str
    evidence: Path | None
    setting: dict
    quick: bool


def merged(base, over):
    """``base`` with ``over`` merged in, mapping by mapping (other values replace)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _text(data, key, where):
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key}", value, "a non-empty string")
    return value


def _mapping(data, key, where, required):
    value = data.get(key, None if required else {})
    if not isinstance(value, dict) or (required and not value):
        raise ConfigError(f"{where}.{key}", value, "a non-empty mapping" if required else "a mapping")
    return value


def load_paper(folder, *, quick=False):
    """Read ``folder/paper.yaml`` and check it (not yet the kind-specific keys).

    Raises
    ------
    ConfigError
        A missing folder or ``paper.yaml``, malformed YAML, an unknown key or
        kind, or a missing evidence file: one line.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(str(folder), "not a folder", "a paper folder holding paper.yaml (experiments/papers/...)")
    path = folder / "paper.yaml"
    if not path.is_file():
        raise ConfigError(str(folder), "no paper.yaml", "a paper folder holding paper.yaml (experiments/papers/...)")
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(str(path), "malformed YAML", str(err).splitlines()[0]) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(str(path), "unreadable", str(err).splitlines()[0]) from None
    where = str(path)
    if not isinstance(data, dict):
        raise ConfigError(where, type(data).__name__, "a mapping (name, title, source, kind, full, ...)")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", data[unknown[0]], f"one of {sorted(_KEYS)}")
    kind = data.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"{where}.kind", kind, f"one of {sorted(KINDS)}")
    evidence = data.get("evidence")
    if evidence is not None:
        if not isinstance(evidence, str) or not (folder / evidence).is_file():
            raise ConfigError(f"{where}.evidence", evidence, "an evidence table in the folder (.csv, .yaml)")
        evidence = folder / evidence
    full = _mapping(data, "full", where, True)
    over = _mapping(data, "quick", where, False)
    return Paper(
        folder=folder,
        name=_text(data, "name", where),
        title=_text(data, "title", where),
        source=_text(data, "source", where),
        kind=kind,
        evidence=evidence,
        setting=merged(full, over) if quick else full,
        quick=bool(quick),
    )
