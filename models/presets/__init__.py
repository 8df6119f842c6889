"""Named parameter sets shipped with pubsim, each with its provenance.

``load("broker", "mosquitto-placeholder")`` returns the mapping of a preset;
:func:`apply` merges a preset with overrides and records the overrides in the
provenance note.
"""
from __future__ import annotations

from importlib import resources

import yaml

from sim.errors import ConfigError

__all__ = ["load", "names", "apply"]

_FILES = {"broker": "brokers.yaml", "link": "links.yaml"}


def _all(kind):
    if kind not in _FILES:
        raise ConfigError("preset kind", kind, f"one of {sorted(_FILES)}")
    text = resources.files(__package__).joinpath(_FILES[kind]).read_text()
    return yaml.safe_load(text)


def names(kind):
    """Preset names of a kind (``broker`` or ``link``)."""
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
