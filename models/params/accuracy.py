"""How accurate a calibrated model was, and on which configurations it was fitted.

A calibrated broker profile records, in its provenance, an ``accuracy``
mapping (written by :mod:`pubsim.calibration.accuracy`, never by hand):

``basis``
    ``held-out validation`` (the profile was simulated against measured
    configurations, some of them held out of the fit) or ``evidence fit``
    (fitted from an evidence table: no held-out split, the fit's intervals
    instead).
``reference``
    The table the numbers come from.
``train``, ``holdout`` (held-out validation)
    Per split: ``configurations`` (how many were compared) and, per metric
    (``saturation_error_pct``, ``p50_error_pct``, ``p99_error_pct``), the
    signed errors ``(simulated - measured) / measured`` in % summarised as
    ``{n, median_abs, max_abs, low, high}`` (configurations with a value,
    median and largest absolute error, most negative and most positive
    error) over the configurations.
``fit`` (evidence fit)
    ``confidence_level``, ``rms_residual_pct``, ``max_residual_pct`` and
    ``intervals`` ({term: [low, high]}).
``fitted_range``
    ``{parameter: [low, high]}`` of the configurations the profile was
    fitted on (:data:`RANGE_PARAMETERS`); a run outside it extrapolates.
``note``
    Anything else a reader should know (optional).

A preset without this mapping has no validation (a placeholder, an estimate
or a published value): its predictions carry no error band.
"""

from __future__ import annotations

import math
from typing import Any

from ...sim.errors import ConfigError

__all__ = [
    "BASES",
    "METRICS",
    "RANGE_PARAMETERS",
    "SPLITS",
    "parse_accuracy",
    "error_band",
    "out_of_range",
]

BASES = ("held-out validation", "evidence fit")
SPLITS = ("train", "holdout")
METRICS = ("saturation_error_pct", "p50_error_pct", "p99_error_pct")
_STATS = ("median_abs", "max_abs", "low", "high")
#: Configuration parameters a fitted range may bound, with what they mean (units in the names).
RANGE_PARAMETERS = {
    "payload_bytes": "mean payload of a publisher, bytes",
    "fanout": "deliveries per published message at the broker (its local sp-ratio)",
    "publishers": "publishing clients attached to the broker",
    "cpu_cap_cores": "CPU available to the broker, cores (cpu_fraction)",
    "qos": "MQTT QoS of the broker's publishers and subscribers",
    "installed_subscriptions": "topic filters installed at the broker",
}
_KEYS = {"basis", "reference", "note", "fitted_range", "fit", *SPLITS}
_FIT_KEYS = {"confidence_level", "rms_residual_pct", "max_residual_pct", "intervals"}


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(field, value, "a finite number")
    return float(value)


def _mapping(spec: Any, field: str, allowed: set | None = None) -> dict:
    if not isinstance(spec, dict):
        raise ConfigError(field, spec, "a mapping")
    unknown = [k for k in spec if str(k) not in allowed] if allowed is not None else []
    if unknown:
        raise ConfigError(f"{field}.{unknown[0]}", spec[unknown[0]], f"one of {sorted(allowed or ())}")
    return spec


def _pair(value: Any, field: str) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ConfigError(field, value, "[low, high]")
    low, high = _number(value[0], f"{field}[0]"), _number(value[1], f"{field}[1]")
    if low > high:
        raise ConfigError(field, value, "[low, high] with low <= high")
    return [v if isinstance(v, int) else float(v) for v in value]  # integers stay integers (readable YAML)


def _split(spec: Any, field: str) -> dict:
    spec = _mapping(spec, field, {"configurations", *METRICS})
    n = spec.get("configurations", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"{field}.configurations", n, "an integer >= 0")
    out: dict[str, Any] = {"configurations": n}
    for metric in METRICS:
        if spec.get(metric) is None:
            continue
        stats = _mapping(spec[metric], f"{field}.{metric}", {"n", *_STATS})
        missing = [s for s in _STATS if s not in stats]
        if missing:
            raise ConfigError(f"{field}.{metric}.{missing[0]}", None, "a number (median_abs, max_abs, low, high)")
        n = stats.get("n", n)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"{field}.{metric}.n", n, "an integer >= 1 (configurations with this error)")
        out[metric] = {"n": n, **{s: _number(stats[s], f"{field}.{metric}.{s}") for s in _STATS}}
    return out


def _fit(spec: Any, field: str) -> dict:
    spec = _mapping(spec, field, _FIT_KEYS)
    out: dict[str, Any] = {
        k: _number(spec[k], f"{field}.{k}")
        for k in ("confidence_level", "rms_residual_pct", "max_residual_pct")
        if k in spec
    }
    intervals = _mapping(spec.get("intervals") or {}, f"{field}.intervals")
    out["intervals"] = {str(k): _pair(v, f"{field}.intervals.{k}") for k, v in intervals.items()}
    return out


def parse_accuracy(spec: Any, field: str = "provenance.accuracy") -> dict | None:
    """Check an accuracy mapping (see the module docstring); a normalised copy, or None.

    Raises
    ------
    ConfigError
        On an unknown key, a basis not in :data:`BASES`, a range parameter
        not in :data:`RANGE_PARAMETERS` or a value that is not a number.
    """
    if spec is None:
        return None
    spec = _mapping(spec, field, _KEYS)
    basis = spec.get("basis")
    if basis not in BASES:
        raise ConfigError(f"{field}.basis", basis, f"one of {list(BASES)}")
    out: dict[str, Any] = {"basis": basis, "reference": str(spec.get("reference", ""))}
    for split in SPLITS:
        if split in spec:
            out[split] = _split(spec[split], f"{field}.{split}")
    if "fit" in spec:
        out["fit"] = _fit(spec["fit"], f"{field}.fit")
    ranges = _mapping(spec.get("fitted_range") or {}, f"{field}.fitted_range", set(RANGE_PARAMETERS))
    out["fitted_range"] = {k: _pair(v, f"{field}.fitted_range.{k}") for k, v in ranges.items()}
    if spec.get("note"):
        out["note"] = str(spec["note"])
    return out


def error_band(accuracy: dict | None, metric: str, split: str = "holdout") -> tuple[float, float] | None:
    """``(low, high)`` signed error (%) of ``metric`` on ``split``, or None when not validated."""
    stats = ((accuracy or {}).get(split) or {}).get(metric)
    return None if stats is None else (stats["low"], stats["high"])


def out_of_range(accuracy: dict | None, config: dict) -> list[dict]:
    """Parameters of ``config`` outside the fitted range, in :data:`RANGE_PARAMETERS` order.

    Parameters
    ----------
    accuracy : dict or None
        A parsed accuracy mapping.
    config : dict
        ``{parameter: (low, high)}`` of the run (a single value as ``(v, v)``).

    Returns
    -------
    list of dict
        ``{parameter, low, high, fitted_low, fitted_high}`` per parameter
        whose run values leave the fitted range (relative tolerance 1e-9).
    """
    ranges = (accuracy or {}).get("fitted_range") or {}
    out = []
    for name in RANGE_PARAMETERS:
        if name not in ranges or name not in config:
            continue
        low, high = config[name]
        flo, fhi = ranges[name]
        tol = 1e-9 * max(abs(flo), abs(fhi), 1.0)
        if low < flo - tol or high > fhi + tol:
            out.append({"parameter": name, "low": low, "high": high, "fitted_low": flo, "fitted_high": fhi})
    return out
