"""Model error bands of a run: how accurate each broker's profile was, and whether the run extrapolates.

A calibrated broker profile records in its provenance how far its
simulations were from measurements on held-out configurations and on which
configurations it was fitted (:mod:`pubsim.models.params.accuracy`, written
by :mod:`pubsim.calibration.accuracy`). :func:`accuracy_table` gives, per
broker of a topology, that held-out band (saturation, p50 and p99 errors:
``(simulated - measured) / measured``, %) and the configuration parameters
of the run that leave the fitted range (:func:`operating_point`): such a
run extrapolates, and its error may be larger than the band. Brokers whose
preset has no such record (placeholders, estimates, published values) say
"no validation". :func:`summary_fields` folds the table into the scalar
fields of :meth:`pubsim.run.RunResult.summary`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .models import topology as T
from .models.params.accuracy import METRICS, RANGE_PARAMETERS, error_band, out_of_range
from .models.params.topics import SubscriptionTable
from .sim.errors import ConfigError

__all__ = [
    "operating_point",
    "accuracy_table",
    "summary_fields",
    "band_text",
    "extrapolation_text",
    "real_range",
    "COLUMNS",
]

_SHORT = {"saturation_error_pct": "saturation", "p50_error_pct": "p50", "p99_error_pct": "p99"}
#: Columns of :func:`accuracy_table`.
COLUMNS = (
    "broker",
    "validation",
    "source",
    "holdout_configurations",
    *(f"{_SHORT[m]}_error_{end}_pct" for m in METRICS for end in ("low", "high")),
    "band",
    "extrapolated",
    "extrapolation",
)


def _payload_bytes(params):
    """Mean payload of one publisher, bytes."""
    if params.arrival == "schedule":
        sizes = np.asarray(params.schedule_size_bytes, dtype=float)
        return float(sizes.mean()) if sizes.size else 0.0
    return float(params.size_bytes.mean)


def _fanout(g, broker, params, pubs, subs):
    """Deliveries per published message at ``broker``: sum_t P(t) S_b(t) / sum_t P(t), with P(t)
    the publishers of topic t (the broker's own, else all) and S_b(t) its local subscribers
    whose filters match t (the sp-ratio of SYSTEMS.md §4, restricted to the broker); None when
    the filters cannot be read in the broker's syntax."""
    senders = pubs or T.clients(g, T.NodeKind.PUBLISHER)
    table = SubscriptionTable(params.topic_syntax)
    try:
        for s in subs:
            for f in g.nodes[s][T.PARAMS].subscriptions:
                table.add(s, f)
        counts: dict = {}
        for p in senders:
            for t in g.nodes[p][T.PARAMS].topics:
                counts[t] = counts.get(t, 0) + 1
        total = sum(counts.values())
        return sum(n * len(table.subscribers(t)) for t, n in counts.items()) / total if total else None
    except ConfigError:
        return None


def _attached(g, kind):
    """``{broker: [its clients of kind]}`` (sorted names)."""
    out: dict = {}
    for n in T.clients(g, kind):
        out.setdefault(T.home_broker(g, n), []).append(n)
    return out


def operating_point(g, broker, *, attached=None):
    """``{parameter: (low, high)}`` of ``broker`` in topology ``g`` (:data:`RANGE_PARAMETERS`).

    Payload: the mean payload of each publisher attached to the broker
    (low / high over publishers); QoS: of its publishers and subscribers;
    fan-out: its local sp-ratio (see :func:`_fanout`); publishers and
    installed subscriptions: counts of its own clients; CPU: its
    ``cpu_fraction`` (cores). A parameter without clients to measure it is
    left out; a broker without clients of its own (a transit broker of a
    tree, whose load is forwarded traffic) is checked on its CPU only. ``attached``: ``(publishers, subscribers)`` per broker, when
    already grouped (:func:`accuracy_table` groups them once).
    """
    params = g.nodes[broker][T.PARAMS]
    if attached is None:
        attached = (_attached(g, T.NodeKind.PUBLISHER), _attached(g, T.NodeKind.SUBSCRIBER))
    pubs, subs = attached[0].get(broker, []), attached[1].get(broker, [])
    cpu = (float(params.cpu_fraction), float(params.cpu_fraction))
    if not pubs and not subs:
        return {"cpu_cap_cores": cpu}
    out = {
        "publishers": (len(pubs), len(pubs)),
        "cpu_cap_cores": cpu,
        "installed_subscriptions": (sum(len(g.nodes[s][T.PARAMS].subscriptions) for s in subs),) * 2,
    }
    if pubs:
        sizes = [_payload_bytes(g.nodes[p][T.PARAMS]) for p in pubs]
        out["payload_bytes"] = (min(sizes), max(sizes))
    qos = [g.nodes[c][T.PARAMS].qos for c in pubs + subs]
    if qos:
        out["qos"] = (min(qos), max(qos))
    fanout = _fanout(g, broker, params, pubs, subs)
    if fanout is not None:
        out["fanout"] = (fanout, fanout)
    return {k: out[k] for k in RANGE_PARAMETERS if k in out}


def _num(x):
    return f"{x:.4g}"


def _span(low, high):
    return _num(low) if low == high else f"{_num(low)}..{_num(high)}"


def extrapolation_text(items):
    """One clause per parameter out of range: ``cpu_cap_cores 1 outside the fitted 0.2``."""
    return "; ".join(
        f"{i['parameter']} {_span(i['low'], i['high'])} outside the fitted {_span(i['fitted_low'], i['fitted_high'])}"
        for i in items
    )


def _pct(low, high):
    return f"{low:+.0f}..{high:+.0f} %"


def band_text(accuracy, source):
    """What the profile's accuracy record says, in one line (``no validation`` without one)."""
    if accuracy is None:
        return f"no validation ({source}: no error band)"
    if accuracy["basis"] == "evidence fit":
        fit = accuracy.get("fit", {})
        rms, worst = fit.get("rms_residual_pct", math.nan), fit.get("max_residual_pct", math.nan)
        level = fit.get("confidence_level", math.nan)
        return (
            f"evidence fit, no held-out validation: residuals rms {rms:.3g} %, max {worst:.3g} %; "
            f"{level:.0%} intervals of {len(fit.get('intervals', {}))} fitted terms in the profile"
        )
    held = accuracy.get("holdout")
    if not held:
        return "validated on its training configurations only (no held-out split)"
    parts = [f"{_SHORT[m]} {_pct(held[m]['low'], held[m]['high'])}" for m in METRICS if held.get(m) is not None]
    return f"held out ({held['configurations']} configurations): " + ", ".join(parts)


def _status(accuracy):
    if accuracy is None:
        return "none"
    if accuracy["basis"] == "evidence fit":
        return "evidence fit"
    return "held-out" if accuracy.get("holdout") else "train only"


def accuracy_table(g):
    """One row per broker of topology ``g``: its profile's held-out error band and extrapolations.

    Returns
    -------
    pandas.DataFrame
        :data:`COLUMNS`: ``validation`` (``held-out``, ``train only``,
        ``evidence fit`` or ``none``), ``source`` (provenance source),
        ``holdout_configurations``, the signed held-out error range of the
        saturation limit, p50 and p99 latency (``*_error_low_pct``,
        ``*_error_high_pct``; NaN without validation), ``band`` (one line),
        ``extrapolated`` (parameters out of the fitted range, comma-separated)
        and ``extrapolation`` (naming each with its value and fitted range).
    """
    rows = []
    attached = None
    for b in T.brokers(g):
        prov = g.nodes[b][T.PARAMS].provenance
        acc = prov.accuracy
        if acc is not None and attached is None:
            attached = (_attached(g, T.NodeKind.PUBLISHER), _attached(g, T.NodeKind.SUBSCRIBER))
        items = out_of_range(acc, operating_point(g, b, attached=attached)) if acc is not None else []
        row = {
            "broker": str(b),
            "validation": _status(acc),
            "source": prov.source.value,
            "holdout_configurations": int(((acc or {}).get("holdout") or {}).get("configurations", 0)),
        }
        for m in METRICS:
            band = error_band(acc, m)
            row[f"{_SHORT[m]}_error_low_pct"] = band[0] if band else math.nan
            row[f"{_SHORT[m]}_error_high_pct"] = band[1] if band else math.nan
        row["band"] = band_text(acc, prov.source.value)
        row["extrapolated"] = ", ".join(i["parameter"] for i in items)
        row["extrapolation"] = extrapolation_text(items)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def summary_fields(table):
    """Scalar summary fields of an :func:`accuracy_table`.

    ``model_validation`` (the brokers' statuses, distinct, comma-separated;
    ``no brokers`` without any); ``model_<metric>_error_low_pct`` /
    ``_high_pct`` for saturation, p50 and p99: the envelope of the brokers'
    held-out bands, NaN unless every broker has one; ``model_band`` (each
    broker's band line); ``model_extrapolation`` (each extrapolating
    broker's clauses, empty when the run stays inside every fitted range).
    """
    if table.empty:
        return {"model_validation": "no brokers", "model_band": "", "model_extrapolation": ""}
    many = len(table) > 1
    out = {"model_validation": ", ".join(dict.fromkeys(table["validation"]))}
    for m in METRICS:
        for end, fold in (("low", min), ("high", max)):
            col = table[f"{_SHORT[m]}_error_{end}_pct"]
            out[f"model_{_SHORT[m]}_error_{end}_pct"] = float(fold(col)) if col.notna().all() else math.nan
    out["model_band"] = _grouped(table, "band", many)
    out["model_extrapolation"] = _grouped(table[table["extrapolation"] != ""], "extrapolation", many)
    return out


def _grouped(table, col, many):
    """``b1, b2: text | b3: other`` (brokers sharing a text named together; just the text with one broker)."""
    if not many:
        return "; ".join(table[col])
    groups: dict = {}
    for broker, text in zip(table["broker"], table[col]):
        groups.setdefault(text, []).append(broker)
    return " | ".join(f"{_names(b)}: {text}" for text, b in groups.items())


def _names(brokers, most=4):
    shown = ", ".join(brokers[:most])
    return shown + (f" ... ({len(brokers)} brokers)" if len(brokers) > most else "")


def real_range(predicted, low_pct, high_pct):
    """Where the real value lies if the model errs by ``low_pct`` .. ``high_pct`` (simulated =
    real x (1 + error)): ``(predicted / (1 + high), predicted / (1 + low))``, or None (no band)."""
    if not (math.isfinite(low_pct) and math.isfinite(high_pct)) or low_pct <= -100:
        return None
    return predicted / (1 + high_pct / 100), predicted / (1 + low_pct / 100)
