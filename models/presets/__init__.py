"""Named parameter sets shipped with pubsim, each with its provenance.

Hand-written presets live in ``brokers.yaml`` and ``links.yaml``; calibrated
profiles, one file per broker written by ``pubsim calibrate``, in
``calibrated/*.yaml`` as ``{broker: {name: ...}, link: {name: ...}}``.
``load("broker", "mosquitto-placeholder")`` returns the mapping of a preset;
:func:`apply` merges a preset with overrides and records the overrides in the
provenance note.
"""
from __future__ import annotations

from importlib import resources

import yaml

from ...sim.errors import ConfigError

__all__ = ["load", "names", "apply", "kinds"]

_FILES = {"broker": "brokers.yaml", "link": "links.yaml"}
_FILES.update({"socket": "sockets.yaml", "disk": "disks.yaml"})  # ZeroMQ sockets, disks (persistence)
_FILES["serialization"] = "serialization.yaml"  # message formats (models.params.serialization)


def _all(kind):
    if kind not in _FILES:
        raise ConfigError("preset kind", kind, f"one of {sorted(_FILES)}")
    root = resources.files(__package__)
    presets = yaml.safe_load(root.joinpath(_FILES[kind]).read_text())
    calibrated = root.joinpath("calibrated")
    if calibrated.is_dir():
        for entry in sorted(calibrated.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".yaml"):
                presets.update((yaml.safe_load(entry.read_text()) or {}).get(kind, {}))
    return presets


def kinds():
    """Preset kinds, sorted."""
    return sorted(_FILES)


def names(kind):
    """Preset names of a kind (``broker``, ``link`` or ``serialization``)."""
    return sorted(_all(kind))


def load(kind, name):
    """The mapping of preset ``name`` (a copy)."""
    presets = _all(kind)
    if name not in presets:
        raise ConfigError(f"{kind}.preset", name, f"one of {sorted(presets)}")
    return dict(presets[name])


def apply(kind, spec):
    """Merge ``spec["preset"]`` (if any) with the other fields of ``spec``."""
    spec = dict(spec)
    name = spec.pop("preset", None)
    if name is None:
        return spec
    merged = load(kind, name)
    overridden = sorted(k for k in spec if k != "provenance")
    merged.update(spec)
    if overridden and "provenance" not in spec:
        prov = dict(merged["provenance"])
        prov["note"] = (prov.get("note", "") + f" [preset {name}; overridden here: {', '.join(overridden)}]").strip()
        merged["provenance"] = prov
    return merged
