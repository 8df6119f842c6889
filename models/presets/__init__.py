"""Named parameter sets shipped with pubsim, each with its provenance.

Hand-written presets live in ``brokers.yaml`` and ``links.yaml``; calibrated
profiles, one file per broker written by ``pubsim calibrate``, in
``calibrated/*.yaml`` as ``{broker: {name: ...}, link: {name: ...}}``.
``load("broker", "mosquitto-placeholder")`` returns the mapping of a preset;
:func:`apply` merges a preset with overrides and records the overrides in the
provenance note.

A user preset folder (:func:`user_dir`: ``$PUBSIM_PRESETS``, else
``$XDG_CONFIG_HOME/pubsim/presets``, else ``~/.config/pubsim/presets``) holds
``*.yaml`` files of the same form; ``pubsim calibrate --write`` writes there.
A user preset with a built-in name shadows the built-in one, and its
provenance note says so.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import yaml

from ...sim.errors import ConfigError
from ...sim.safeyaml import safe_load

__all__ = ["load", "names", "apply", "kinds", "user_dir", "origin"]

_FILES = {"broker": "brokers.yaml", "link": "links.yaml"}
_FILES.update({"socket": "sockets.yaml", "disk": "disks.yaml"})  # ZeroMQ sockets, disks (persistence)
_FILES["serialization"] = "serialization.yaml"  # message formats (models.params.serialization)
#: Fitted fields besides the ``*_cost_s`` costs: overriding one voids a profile's accuracy record.
_FITTED = ("workers", "background_cpu_fraction")
_FILES["host"] = "hosts.yaml"  # machines processes are placed on (models.params.host)
_FILES["store"] = "stores.yaml"  # product store designs for persistent messages (models.params.store)


def user_dir() -> Path:
    """The user preset folder: ``$PUBSIM_PRESETS``, else the platform's config folder."""
    if os.environ.get("PUBSIM_PRESETS"):
        return Path(os.environ["PUBSIM_PRESETS"]).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "pubsim" / "presets"


def _read_folder(folder, kind):
    """``{name: (fields, file)}`` of the presets of ``kind`` in the ``*.yaml`` files of ``folder``."""
    out = {}
    if not folder.is_dir():
        return out
    for entry in sorted(folder.glob("*.yaml")):
        try:
            data = safe_load(entry.read_text()) or {}
        except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as err:
            raise ConfigError(str(entry), "unreadable", f"a preset YAML file ({err})") from None
        if not isinstance(data, dict) or not isinstance(data.get(kind, {}), dict):
            raise ConfigError(str(entry), type(data).__name__, "a mapping {kind: {name: fields}}")
        for name, fields in data.get(kind, {}).items():
            if not isinstance(fields, dict):
                raise ConfigError(f"{entry}: {kind}.{name}", fields, "a mapping of preset fields")
            out[str(name)] = (fields, str(entry))
    return out


def _all_with_origin(kind):
    """``{name: (mapping, origin)}``: built-in, then calibrated, then the user's (which shadow)."""
    if not isinstance(kind, str) or kind not in _FILES:
        raise ConfigError("preset kind", kind, f"one of {sorted(_FILES)}")
    root = resources.files(__package__)
    builtin = yaml.safe_load(root.joinpath(_FILES[kind]).read_text())
    presets = {name: (fields, "built-in") for name, fields in builtin.items()}
    calibrated = _read_folder(Path(str(root.joinpath("calibrated"))), kind)
    presets.update((name, (fields, "built-in (calibrated)")) for name, (fields, _) in calibrated.items())
    for name, (fields, path) in _read_folder(user_dir(), kind).items():
        if name in presets and isinstance(fields, dict):
            prov = dict(fields.get("provenance") or {})
            prov["note"] = (
                str(prov.get("note", "")) + f" [user preset from {path}; shadows the built-in {name}]"
            ).strip()
            fields = {**fields, "provenance": prov}
        presets[name] = (fields, path)
    return presets


def _all(kind):
    return {name: fields for name, (fields, _) in _all_with_origin(kind).items()}


def _check_name(kind, name, presets):
    """Refuse a preset name that is not text (a list or mapping given as a name) or names no preset."""
    if not isinstance(name, str) or name not in presets:
        raise ConfigError(f"{kind}.preset", name, f"one of {sorted(presets)}")


def origin(kind, name):
    """Where preset ``name`` comes from: ``built-in``, ``built-in (calibrated)`` or a user file path."""
    presets = _all_with_origin(kind)
    _check_name(kind, name, presets)
    return presets[name][1]


def kinds():
    """Preset kinds, sorted."""
    return sorted(_FILES)


def names(kind):
    """Preset names of a kind (``broker``, ``link`` or ``serialization``)."""
    return sorted(_all(kind))


def load(kind, name):
    """The mapping of preset ``name`` (a copy)."""
    presets = _all(kind)
    _check_name(kind, name, presets)
    return dict(presets[name])


def apply(kind, spec):
    """Merge ``spec["preset"]`` (if any) with the other fields of ``spec``.

    A ``preset`` key must name a preset: an empty ``preset:`` is refused, not ignored.
    Overridden fields are named in the provenance note; overriding a fitted
    cost (``*_cost_s``, ``workers``, ``background_cpu_fraction``) drops the
    profile's ``accuracy`` record (its validation was of the fitted values),
    while operating settings (``cpu_fraction``, queue sizes) keep it.
    """
    spec = dict(spec)
    if "preset" not in spec:
        return spec
    name = spec.pop("preset")
    merged = load(kind, name)
    overridden = sorted(k for k in spec if k != "provenance")
    merged.update(spec)
    if overridden and "provenance" not in spec and isinstance(merged.get("provenance"), dict):
        prov = dict(merged["provenance"])
        prov["note"] = (prov.get("note", "") + f" [preset {name}; overridden here: {', '.join(overridden)}]").strip()
        refitted = [k for k in overridden if k.endswith("_cost_s") or k in _FITTED]
        if "accuracy" in prov and refitted:  # its validation was of the fitted values, not of these
            del prov["accuracy"]
            prov["note"] += f" [no validation: fitted {', '.join(refitted)} overridden, its accuracy record dropped]"
        merged["provenance"] = prov
    return merged
