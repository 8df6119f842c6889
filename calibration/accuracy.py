"""The accuracy a calibrated profile records: validation errors per split and the fitted range.

From a campaign (``runs.csv``, ``saturation.csv``) and its validation table
(``validation-accuracy.csv``: one row per broker and configuration, written
by ``pubsim validate --report`` as ``accuracy.csv``,
:func:`pubsim.calibration.report.accuracy_table`), :func:`validation_accuracy`
gives the ``accuracy`` mapping of one broker's profile
(:mod:`pubsim.models.params.accuracy`): per split the number of
configurations and the saturation, p50 and p99 errors (median and largest
absolute error, signed range), and the range of the training
configurations (payload, fan-out, publishers, CPU cap, QoS, installed
subscriptions). :func:`evidence_accuracy` gives the mapping of a profile
fitted from an evidence table (its fit's intervals, no held-out split).
:func:`record_accuracy` writes the mappings into existing profile files
(``pubsim accuracy DIR --write models/presets/calibrated``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..models.params.accuracy import METRICS, SPLITS, parse_accuracy
from ..sim.errors import ConfigError
from ..sim.safeyaml import safe_load
from .profile import profile_yaml
from .workload import installed_filters

__all__ = [
    "VALIDATION_FILE",
    "fitted_range",
    "split_errors",
    "validation_accuracy",
    "evidence_accuracy",
    "with_accuracy",
    "campaign_accuracy",
    "record_accuracy",
]

#: The validation table a campaign folder keeps beside its runs.
VALIDATION_FILE = "validation-accuracy.csv"

_NOTE = (
    "errors are (simulated - measured) / measured in %, one value per configuration (latency: the median "
    "over its runs below saturation); median_abs / max_abs: median and largest absolute error, low / high: "
    "most negative and most positive error; fitted_range: the training configurations"
)


def fitted_range(runs, kind, split="train"):
    """``{parameter: [low, high]}`` of the configurations of ``kind`` in ``split`` (campaign ``runs``)."""
    rows = runs[(runs["broker"] == kind) & (runs["split"] == split)]
    if rows.empty:
        raise ConfigError("runs", kind, f"runs of broker {kind} in split {split}")
    configs = rows.drop_duplicates("config")
    cap = configs["cpu_cap_fraction"].astype(float).fillna(1.0)
    qos = configs["qos"].astype(float).fillna(0.0) if "qos" in configs else pd.Series([0.0])
    values = {
        "payload_bytes": configs["payload_bytes"].astype(float),
        "fanout": configs["fanout"].astype(float),
        "publishers": configs["publishers"].astype(float),
        "cpu_cap_cores": cap,
        "qos": qos,
    }
    if {"subscribers", "topics"} <= set(configs):
        values["installed_subscriptions"] = configs.apply(installed_filters, axis=1).astype(float)
    return {k: [_plain(v.min()), _plain(v.max())] for k, v in values.items()}


def _plain(x):
    x = float(x)
    return int(x) if x.is_integer() else float(f"{x:.6g}")


def _stats(errors):
    e = np.asarray(errors, dtype=float)
    e = e[np.isfinite(e)]
    if not e.size:
        return None
    return {
        "n": int(e.size),
        "median_abs": round(float(np.median(np.abs(e))), 1),
        "max_abs": round(float(np.abs(e).max()), 1),
        "low": round(float(e.min()), 1),
        "high": round(float(e.max()), 1),
    }


def split_errors(rows):
    """``{configurations, <metric>: {median_abs, max_abs, low, high}}`` of validation rows (one split)."""
    out = {"configurations": int(len(rows))}
    for metric in METRICS:
        if metric in rows:
            stats = _stats(rows[metric])
            if stats is not None:
                out[metric] = stats
    return out


def _unreached(saturation, kind):
    """Configurations of ``kind`` whose measured limit the load generator did not reach."""
    if saturation is None or "limit_reached" not in saturation:
        return set()
    rows = saturation[saturation["broker"] == kind]
    return set(rows.loc[~rows["limit_reached"].astype(bool), "config"])


def validation_accuracy(validation, runs, kind, *, saturation=None, reference=""):
    """The ``accuracy`` mapping of broker ``kind``'s profile from its campaign validation.

    Parameters
    ----------
    validation : pandas.DataFrame
        One row per (broker, config): ``split`` and the error columns
        ``saturation_error_pct``, ``p50_error_pct``, ``p99_error_pct`` (%).
    runs : pandas.DataFrame
        The campaign's ``runs.csv`` (configuration columns, ``split``).
    kind : str
        Broker kind.
    saturation : pandas.DataFrame, optional
        The campaign's ``saturation.csv``: configurations whose limit was
        not reached (above the load generator) are left out of the
        saturation errors (their error says nothing) and named in the note.
    reference : str
        Where the validation table is (the mapping's ``reference``).
    """
    rows = validation[validation["broker"] == kind]
    if rows.empty:
        raise ConfigError("validation", kind, f"validation rows of broker {kind}")
    unreached = _unreached(saturation, kind)
    out = {"basis": "held-out validation", "reference": str(reference)}
    for split in SPLITS:
        mine = rows[rows["split"] == split]
        if mine.empty:
            continue
        errors = split_errors(mine)
        sat = mine[~mine["config"].isin(unreached)]
        errors.pop("saturation_error_pct", None)
        stats = _stats(sat["saturation_error_pct"]) if "saturation_error_pct" in sat else None
        if stats is not None:
            errors = {"configurations": errors["configurations"], "saturation_error_pct": stats, **errors}
        out[split] = errors
    out["fitted_range"] = fitted_range(runs, kind)
    note = _NOTE
    if unreached & set(rows["config"]):
        note += (
            "; saturation errors leave out the configurations whose measured limit was above the load "
            f"generator's reach ({', '.join(sorted(unreached & set(rows['config'])))})"
        )
    out["note"] = note
    return parse_accuracy(out)


def evidence_accuracy(evidence):
    """The ``accuracy`` mapping of a profile fitted from an evidence table (its ``evidence`` mapping,
    :func:`pubsim.calibration.evidence_fit.evidence_profile`): the fit's residuals and intervals,
    the fitted ranges, no held-out split."""
    intervals = {
        name: list(term["ci"])
        for name, term in evidence.get("terms", {}).items()
        if term.get("ci") is not None and term.get("identifiable", True)
    }
    ranges = {k: v for k, v in evidence.get("fitted_ranges", {}).items() if k != "rate_per_s"}
    out = {
        "basis": "evidence fit",
        "reference": str(evidence.get("table", "")),
        "fit": {
            "confidence_level": float(evidence.get("confidence_level", math.nan)),
            "rms_residual_pct": round(100 * float(evidence.get("rms_relative_error", math.nan)), 2),
            "max_residual_pct": round(100 * float(evidence.get("max_relative_error", math.nan)), 2),
            "intervals": intervals,
        },
        "fitted_range": ranges,
        "note": (
            "no held-out validation: residuals of the fitted rows (relative, %) and bootstrap confidence "
            "intervals of the fitted terms; see the profile's evidence mapping"
        ),
    }
    out["fit"] = {k: v for k, v in out["fit"].items() if not (isinstance(v, float) and math.isnan(v))}
    return parse_accuracy(out)


def with_accuracy(profile, accuracy):
    """A copy of ``profile`` whose broker presets record ``accuracy`` in their provenance."""
    out = dict(profile)
    out["broker"] = {
        name: {**fields, "provenance": {**fields.get("provenance", {}), "accuracy": accuracy}}
        for name, fields in profile.get("broker", {}).items()
    }
    return out


def _reference(path):
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


_NEEDS = {
    "validation": ("broker", "config", "split"),
    "runs.csv": ("broker", "config", "split", "payload_bytes", "fanout", "publishers", "cpu_cap_fraction"),
    "saturation.csv": ("broker", "config"),
}


def _read(path, what):
    """A CSV table with the columns ``what`` needs (one-line ConfigError otherwise)."""
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as err:  # EmptyDataError is a ValueError
        raise ConfigError(str(path), "unreadable", f"a CSV table ({type(err).__name__})") from None
    missing = [c for c in _NEEDS[what] if c not in df]
    if missing:
        raise ConfigError(str(path), f"no column {missing[0]}", f"a {what} table with columns {list(_NEEDS[what])}")
    return df


def campaign_accuracy(results_dir, validation=None):
    """``{broker kind: accuracy mapping}`` of a campaign folder and its validation table
    (default ``results_dir/validation-accuracy.csv``)."""
    out = Path(results_dir)
    path = Path(validation) if validation is not None else out / VALIDATION_FILE
    for p in (path, out / "runs.csv"):
        if not p.is_file():
            raise ConfigError("results", str(p), "a campaign's runs.csv and its validation table")
    table = _read(path, "validation")
    runs = _read(out / "runs.csv", "runs.csv")
    sat = _read(out / "saturation.csv", "saturation.csv") if (out / "saturation.csv").is_file() else None
    return {
        kind: validation_accuracy(table, runs, kind, saturation=sat, reference=_reference(path))
        for kind in dict.fromkeys(table["broker"])
    }


def record_accuracy(results_dir, preset_dir, validation=None):
    """Write each broker's accuracy into ``preset_dir/<broker>.yaml`` (existing profiles only).

    Returns
    -------
    dict
        ``{broker kind: path written}``; kinds without a profile file are skipped.
    """
    written = {}
    for kind, accuracy in campaign_accuracy(results_dir, validation).items():
        path = Path(preset_dir) / f"{kind}.yaml"
        if not path.is_file():
            continue
        try:
            profile = safe_load(path.read_text())
        except (ValueError, yaml.YAMLError) as err:
            raise ConfigError(str(path), "unreadable", f"a profile YAML file ({err})") from None
        path.write_text(profile_yaml(with_accuracy(profile, accuracy)))
        written[kind] = path
    return written
