"""Fit every CPU term an evidence table identifies, with confidence intervals.

Per ingress message a broker spends (CPU seconds of one core)::

    d = ingress + fanout x delivery + payload x (1 + fanout) x per_byte
        + s(installed_subscriptions) x filter_scan
        + handshake(qos) x (1 + fanout) x ack
        [+ pages(payload) x heap_fault]
        + idle_wakeup x (1 - U) + background / rate

with ``handshake(qos)`` = 0, 1, 3 packets per hop (PUBACK; PUBREC, PUBREL,
PUBCOMP; :mod:`pubsim.models.mechanisms.qos.rules`), ``pages`` the pages a
broker known to give large buffers back after each message faults in again
(:func:`pubsim.calibration.heapfit.heap_rule`; Mosquitto), ``s(n)`` = ``n``
(linear) or ``ln(1 + n)`` (logarithmic, the better of the two by
leave-one-out error), ``U`` the broker's utilization and ``background`` a
constant CPU load (cores). Observations give ``d`` by the utilization law:

- ``limit``: the broker is saturated (``U = 1``), ``d = cap / limit``;
- ``cpu`` at a rate: ``d = cpu_fraction / rate``, ``U = cpu_fraction / cap``;
- ``throughput`` below 0.99 x rate x fan-out (saturated, SYSTEMS.md §4):
  ``d = cap x fanout / throughput`` (each copy delivered stands for
  ``1 / fanout`` ingress message served at full utilization).

Other rows (sustainable throughput, latency, loss) carry no demand and are
counted, not fitted. Costs are fitted by non-negative least squares
(``scipy.optimize.nnls``) on relative errors (rows weighted by ``1 / d``).

A term is fitted only if the table identifies it: a configuration term whose
column never varies, or is a linear combination of the terms before it (in
the order above), is reported as not identifiable with the reason, never set
to zero silently. The load terms need observations at several rates of one
configuration (two for the background, three for the wake-up as well).
Confidence intervals are percentiles of a bootstrap over rows (seeded).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ..models.mechanisms.qos.rules import handshake_packets
from ..models.params.broker import filter_load
from ..sim.errors import ConfigError
from .accuracy import evidence_accuracy
from .evidence import CONFIG_COLUMNS
from .fit import extra_length_bytes_of, heap_pages_of
from .forms import LOO_MARGIN
from .heapfit import heap_rule, heap_rule_reason, heap_trim_mapping
from .profile import build_profile, length_reads_reason

__all__ = ["TERMS", "demand_rows", "EvidenceCalibrator", "evidence_profile"]

#: Fitted terms, in identification order: (name, unit, meaning).
TERMS = (
    ("ingress_cost_s", "s", "per ingress message"),
    ("delivery_cost_s", "s", "per delivered copy"),
    ("per_byte_cost_s", "s/B", "per payload byte in and out"),
    ("length_byte_cost_s", "s", "per MQTT remaining-length byte beyond the first (brokers that read it byte by byte)"),
    ("filter_scan_cost_s", "s", "per installed subscription (linear or log form)"),
    ("ack_cost_s", "s", "per QoS handshake packet"),
    ("heap_fault_cost_s", "s", "per page faulted in again after the allocator trimmed its heap (brokers known to)"),
    ("background_cpu_fraction", "cores", "constant background CPU"),
    ("idle_wakeup_cost_s", "s", "per message that finds the broker idle"),
)
NAMES = tuple(t[0] for t in TERMS)
LOAD_TERMS = {"background_cpu_fraction": 2, "idle_wakeup_cost_s": 3}  # distinct rates needed in one configuration
SATURATED = 0.99  # the sustainability rule of SYSTEMS.md §4


def demand_rows(table):
    """Rows of an evidence table that give a demand per message, with ``demand_s``, ``rate_per_s``, ``util``.

    Returns
    -------
    pandas.DataFrame
        The configuration columns, ``observation``, ``rate_per_s`` (ingress
        rate the demand was observed at, msg/s), ``demand_s`` (CPU s per
        ingress message) and ``util`` (broker utilization, 0..1).
    """
    t = table
    cap = t["cpu_cap_cores"].astype(float)
    out = []
    lim = t[t.observation == "limit"]
    out.append(lim.assign(rate=lim.limit_msg_per_s, demand_s=cap[lim.index] / lim.limit_msg_per_s, util=1.0))
    cpu = t[t.observation == "cpu"]
    frac = cpu.cpu_percent.astype(float) / 100.0
    out.append(cpu.assign(rate=cpu.rate_per_s, demand_s=frac / cpu.rate_per_s, util=(frac / cap[cpu.index]).clip(0, 1)))
    thr = t[t.observation == "throughput"]
    thr = thr[thr.throughput_msg_per_s < SATURATED * thr.rate_per_s * thr.fanout]
    served = thr.throughput_msg_per_s / thr.fanout.where(thr.fanout > 0, 1.0)
    thr = thr.assign(rate=served, demand_s=cap[thr.index] / served, util=1.0)
    out.append(thr[served > 0])
    rows = pd.concat(out)
    rows = rows[list(CONFIG_COLUMNS) + ["observation", "source_kind", "source_reference", "rate", "demand_s", "util"]]
    return rows.rename(columns={"rate": "rate_per_s"}).reset_index(drop=True)


def _columns(rows, sub_form, length_reads=False, heap=None):
    """Regressor of each term per row; the length bytes only for a broker that reads them one by one
    (the evidence form has no topic length: the harness's,
    :data:`pubsim.calibration.fit.HARNESS_TOPIC_BYTES`); the pages faulted in again only with a
    ``heap`` rule (:func:`pubsim.calibration.fit.heap_pages_of`)."""
    fan = rows.fanout.to_numpy(dtype=float)
    pay = rows.payload_bytes.to_numpy(dtype=float)
    subs = rows.installed_subscriptions.to_numpy(dtype=float)
    hs = handshake_packets(rows.qos.to_numpy(dtype=int)).astype(float)
    return {
        "ingress_cost_s": np.ones(len(rows)),
        "delivery_cost_s": fan,
        "per_byte_cost_s": pay * (1 + fan),
        "length_byte_cost_s": extra_length_bytes_of(rows) if length_reads else np.zeros(len(rows)),
        "filter_scan_cost_s": filter_load(subs, sub_form),
        "ack_cost_s": hs * (1 + fan),
        "heap_fault_cost_s": heap_pages_of(rows, heap) if heap is not None else np.zeros(len(rows)),
        "background_cpu_fraction": 1.0 / rows.rate_per_s.to_numpy(dtype=float),
        "idle_wakeup_cost_s": 1.0 - rows.util.to_numpy(dtype=float),
    }


def _rates_per_config(rows):
    """Most distinct observation rates of any one configuration."""
    key = list(CONFIG_COLUMNS)
    return int(rows.groupby(key, dropna=False)["rate_per_s"].nunique().max()) if len(rows) else 0


def _identify(cols, rows, tol=1e-9):
    """``{term: None (identifiable) or reason}`` by adding terms in order while the rank grows."""
    status = {}
    kept = []
    rates = _rates_per_config(rows)
    for name in NAMES:
        x = cols[name]
        if name in LOAD_TERMS and rates < LOAD_TERMS[name]:
            status[name] = f"not identifiable: needs observations at {LOAD_TERMS[name]} rates of one configuration"
            continue
        if name != "ingress_cost_s" and np.ptp(x) <= tol * max(np.abs(x).max(), 1e-300):
            status[name] = (
                f"not identifiable: its column never varies (always {x[0]:.4g}; the fitted terms hold its share)"
            )
            continue
        if not np.any(x):
            status[name] = "not identifiable: its column is zero"
            continue
        base = np.column_stack([cols[k] for k in kept] + [x])
        scaled = base / np.maximum(np.linalg.norm(base, axis=0), 1e-300)
        sv = np.linalg.svd(scaled, compute_uv=False)
        if sv[-1] <= 1e-8 * sv[0]:
            status[name] = f"not identifiable: collinear with {', '.join(kept)} (they hold its share)"
            continue
        kept.append(name)
        status[name] = None
    return status


def _nnls(x, y, passes=2):
    """NNLS on relative errors: rows weighted by 1 / observed, then by 1 / fitted demand.

    Weighting by the noisy observation favours rows observed low (a bias of
    the order of the noise's variance); the second pass weights by the
    first pass's fitted demand instead.
    """
    scale = np.maximum(np.abs(x).max(axis=0), 1e-300)
    xs = x / scale
    ref = y
    for _ in range(passes):
        w = 1.0 / np.maximum(ref, 1e-300)
        coef, _ = nnls(xs * w[:, None], y * w)
        fitted = xs @ coef
        ref = np.where(fitted > 0, fitted, y)
    return coef / scale


def _loo_error(x, y):
    """Root mean square relative leave-one-out prediction error."""
    errs = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        coef = _nnls(x[keep], y[keep])
        errs.append((x[i] @ coef - y[i]) / y[i])
    return float(np.sqrt(np.mean(np.square(errs))))


class EvidenceCalibrator:
    """Fit per-message CPU terms of one broker from an evidence table, with bootstrap CIs.

    Parameters
    ----------
    n_boot : int
        Bootstrap resamples of the rows.
    level : float
        Confidence level of the intervals.
    seed : int
        Seed of the bootstrap's ``numpy.random.Generator``.
    sub_form : {"auto", "linear", "log"}
        Form of the subscription term; ``auto`` keeps the one with the
        smaller leave-one-out error.

    Attributes
    ----------
    params_ : dict
        Per term of :data:`TERMS`: ``{"value", "low", "high", "identifiable",
        "reason"}`` (value and bounds NaN when not identifiable; units as in
        :data:`TERMS`); ``"subscription_form"``, ``"subscription_choice"``
        (why), ``"n_rows"``, ``"rms_relative_error"``,
        ``"max_relative_error"``, ``"ranges"`` (min / max of the fitted
        configuration columns) and ``"unused"`` (rows without a demand, by
        observation kind).
    kind_ : str
        The table's broker kind.
    length_reads_ : bool
        Whether that broker reads MQTT remaining lengths byte by byte
        (``length_reads`` in :data:`pubsim.calibration.profile.BROKER_MODELS`):
        only then is ``length_byte_cost_s`` fitted.
    heap_rule_ : HeapTrimParams or None
        That broker's pages faulted in again per payload
        (:func:`pubsim.calibration.heapfit.heap_rule`): only then is
        ``heap_fault_cost_s`` fitted.
    residuals_ : pandas.Series
        Observed minus fitted demand per fitted row, relative to the observed.
    rows_ : pandas.DataFrame
        The demand rows fitted (:func:`demand_rows`).
    """

    def __init__(self, *, n_boot=300, level=0.95, seed=0, sub_form="auto"):
        if sub_form not in ("auto", "linear", "log"):
            raise ConfigError("sub_form", sub_form, "auto, linear or log")
        self.n_boot = n_boot
        self.level = level
        self.seed = seed
        self.sub_form = sub_form

    def _design(self, rows, form):
        cols = _columns(rows, form, self.length_reads_, self.heap_rule_)
        status = _identify(cols, rows)
        if not self.length_reads_:
            status["length_byte_cost_s"] = length_reads_reason(self.kind_)
        if self.heap_rule_ is None:
            status["heap_fault_cost_s"] = heap_rule_reason(self.kind_)
        names = [n for n in NAMES if status[n] is None]
        return np.column_stack([cols[n] for n in names]), names, status

    def _choose_form(self, rows, y):
        x_lin, names, status = self._design(rows, "linear")
        if status["filter_scan_cost_s"] is not None or self.sub_form != "auto":
            form = "linear" if self.sub_form == "auto" else self.sub_form
            why = "fixed by the caller" if self.sub_form != "auto" else "no subscription term to compare"
            return form, why
        levels = rows.installed_subscriptions.nunique()
        if levels < 3:
            return "linear", f"{levels} subscription counts cannot tell the forms apart; linear is the simulator's"
        x_log, _, status_log = self._design(rows, "log")
        if status_log["filter_scan_cost_s"] is not None:
            return "linear", "the log form is not identifiable here"
        lin, log = _loo_error(x_lin, y), _loo_error(x_log, y)
        form = "log" if log < (1 - LOO_MARGIN) * lin else "linear"
        why = f"leave-one-out rms relative error {log:.2%} (log) vs {lin:.2%} (linear)"
        if form == "linear" and log < lin:
            why += f"; within {LOO_MARGIN:.0%}: linear, the simpler form"
        return form, why

    def fit(self, table):
        """Fit from an evidence table (:func:`pubsim.calibration.evidence.read_evidence`) of one broker."""
        if table["broker"].nunique() != 1:
            raise ConfigError("evidence.broker", sorted(table["broker"].unique()), "one broker kind per fit")
        self.kind_ = str(table["broker"].iloc[0])
        self.length_reads_ = length_reads_reason(self.kind_) is None
        self.heap_rule_ = heap_rule(self.kind_)
        rows = demand_rows(table)
        if len(rows) < 1:
            raise ConfigError(
                "evidence", "no rows with a demand", "at least one limit, cpu or saturated throughput row"
            )
        y = rows.demand_s.to_numpy(dtype=float)
        form, why = self._choose_form(rows, y)
        x, names, status = self._design(rows, form)
        coef = _nnls(x, y)
        if len(y) > x.shape[1] + 1:
            boot = self._bootstrap(x, y)
            lo, hi = np.percentile(boot, [50 * (1 - self.level), 50 * (1 + self.level)], axis=0)
        else:  # as many rows as terms: an exact fit, and no interval to be had
            lo = hi = np.full(x.shape[1], np.nan)
        params = {}
        for name in NAMES:
            if status[name] is None:
                i = names.index(name)
                params[name] = {
                    "value": float(coef[i]),
                    "low": float(lo[i]),
                    "high": float(hi[i]),
                    "identifiable": True,
                    "reason": "" if np.isfinite(lo[i]) else f"no interval: {len(y)} rows for {len(names)} terms",
                }
            else:
                nan = float("nan")
                params[name] = {"value": nan, "low": nan, "high": nan, "identifiable": False, "reason": status[name]}
        rel = (y - x @ coef) / y
        unused = table.observation.value_counts().sub(rows.observation.value_counts(), fill_value=0)
        self.params_ = {
            **params,
            "subscription_form": form,
            "subscription_choice": why,
            "n_rows": len(y),
            "rms_relative_error": float(np.sqrt(np.mean(rel**2))),
            "max_relative_error": float(np.abs(rel).max()),
            "ranges": _ranges(rows),
            "unused": {str(k): int(v) for k, v in unused.items() if v},
        }
        self.residuals_ = pd.Series(rel, name="relative_residual")
        self.rows_ = rows
        self.names_ = names
        return self

    def _bootstrap(self, x, y):
        rng = np.random.default_rng(self.seed)
        n = len(y)
        out = np.empty((self.n_boot, x.shape[1]))
        for b in range(self.n_boot):
            pick = rng.integers(0, n, n)
            out[b] = _nnls(x[pick], y[pick])
        return out

    def predict(self, table):
        """Fitted demand per ingress message of the demand rows of ``table``, s."""
        rows = demand_rows(table)
        cols = _columns(rows, self.params_["subscription_form"], self.length_reads_, self.heap_rule_)
        return sum(cols[n] * self.params_[n]["value"] for n in self.names_)


def _ranges(rows):
    out = {}
    for col in ("payload_bytes", "fanout", "cpu_cap_cores", "installed_subscriptions", "qos", "rate_per_s"):
        v = rows[col].astype(float)
        out[col] = [float(v.min()), float(v.max())]
    return out


def _provenance_source(kinds):
    """Provenance source of a profile fitted on rows of these source kinds."""
    if "publication" in kinds:
        return "publication"
    return "measured" if set(kinds) == {"measured-here"} else "assumption"


def _terms_record(params):
    out = {}
    for name, unit, _ in TERMS:
        p = params[name]
        if p["identifiable"]:
            ci = [float(f"{p['low']:.6g}"), float(f"{p['high']:.6g}")] if np.isfinite(p["low"]) else None
            out[name] = {"value": float(f"{p['value']:.6g}"), "ci": ci, "unit": unit}
            if p["reason"]:
                out[name]["note"] = p["reason"]
        else:
            out[name] = {"identifiable": False, "reason": p["reason"]}
    return out


def evidence_profile(kind, table, cal, *, source, date):
    """Profile mapping (:func:`pubsim.calibration.profile.build_profile`) of a fitted evidence table.

    The broker preset carries the identifiable terms (the others keep their
    default, 0, and are listed as not identifiable); the top-level
    ``evidence`` mapping records the sources, the fitted range of each
    configuration column, every term with its confidence interval and the
    fit's residual errors. The preset's subscription term takes the chosen
    form (``filter_cost_form``, :func:`pubsim.models.params.broker.filter_load`).

    Parameters
    ----------
    kind : str
        Broker kind (one of the table's).
    table : pandas.DataFrame
        The evidence rows of that broker.
    cal : EvidenceCalibrator
        Fitted on ``table``.
    source : str
        The table's file name (the provenance reference).
    date : str
        ISO date of the calibration.
    """
    p = cal.params_
    demand = {n: (p[n]["value"] if p[n]["identifiable"] else 0.0) for n in NAMES}
    if p["subscription_form"] != "linear":
        demand["filter_cost_form"] = p["subscription_form"]
    kinds = sorted(table.source_kind.unique())
    refs = list(dict.fromkeys(table.source_reference))
    missing = [n for n in NAMES if not p[n]["identifiable"]]
    note = (
        f"CPU s per ingress message from {p['n_rows']} evidence rows ({', '.join(kinds)}) by the utilization law "
        f"(limits: cap / limit; CPU %: CPU / rate), NNLS on relative errors, {cal.level:.0%} bootstrap intervals in "
        f"the profile's evidence mapping; rms relative residual {p['rms_relative_error']:.2%}. "
        f"Subscription term: {p['subscription_form']} form ({p['subscription_choice']}). "
        + (f"Not identifiable from this table, left at 0: {', '.join(missing)}. " if missing else "")
        + "Valid within the fitted ranges (evidence.fitted_ranges)."
    )
    versions = sorted({str(v) for v in table.version if v})
    hosts = sorted({str(h) for h in table.host if h})
    metadata = {
        "data": f"{source}: " + "; ".join(refs[:3]) + (f"; and {len(refs) - 3} more" if len(refs) > 3 else ""),
        "date": date,
        "source": _provenance_source(kinds),
        "note": note,
    }
    evidence = {
        "table": source,
        "sources": {k: int((table.source_kind == k).sum()) for k in kinds},
        "references": refs[:20],
        "versions": versions,
        "hosts": hosts,
        "n_rows_fitted": p["n_rows"],
        "unused_rows": p["unused"],
        "fitted_ranges": p["ranges"],
        "terms": _terms_record(p),
        "confidence_level": cal.level,
        "subscription_form": p["subscription_form"],
        "subscription_choice": p["subscription_choice"],
        "preset_subscription_form": p["subscription_form"],
        "rms_relative_error": float(f"{p['rms_relative_error']:.4g}"),
        "max_relative_error": float(f"{p['max_relative_error']:.4g}"),
    }
    heap = p["heap_fault_cost_s"]
    return build_profile(
        name=kind,
        broker_kind=kind,
        demand_params=demand,
        link_params=None,
        metadata=metadata,
        evidence=evidence,
        accuracy=evidence_accuracy(evidence),
        heap_trim=heap_trim_mapping(kind, heap["value"], data=metadata["data"]) if heap["identifiable"] else None,
    )
