"""Past the limit: fit the socket buffers that throttle publishers, and check the model there.

What the harness measures past Mosquitto's limit (``calibration/README.md``,
"Past the limit"): egress stays at the broker's capacity, nothing is lost,
and once a publisher's connection is full its blocking ``send`` waits, so the
latency of messages stamped when sent levels off at the backlog one
connection holds over the broker's throughput (Little's law). The model is
:class:`pubsim.models.params.overload.OverloadParams`; this module fits it and
compares the simulator with the measurements at given multiples of the limit.

Backlog of one connection in a run whose publishers were held back (their
largest lag behind the schedule at least ``min_lag_s``)::

    backlog (messages) = latency_p50 x (egress / fanout) / publishers
    backlog x (payload + overhead) = socket_buffer_bytes

so ``1 / backlog = payload / B + overhead / B`` is linear in the payload, and
``1/B`` and ``overhead/B`` are fitted by non-negative least squares on
relative errors (rows weighted by the backlog).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ..models.params.overload import OverloadParams
from ..models.params.provenance import Provenance, Source
from ..sim.errors import ConfigError
from .fit import _check
from .validate import simulate_run

__all__ = [
    "SocketBufferCalibrator",
    "FlowControlCostCalibrator",
    "with_overload",
    "past_limit_runs",
    "compare_past_limit",
    "BLOCKED_COLUMNS",
]

BLOCKED_COLUMNS = ("payload_bytes", "publishers", "fanout", "latency_p50_s", "publisher_lag_max_s")


class SocketBufferCalibrator:
    """Fit the per-connection socket buffer (and per-message overhead) from runs past the limit.

    Parameters
    ----------
    min_lag_s : float
        A run counts as flow-controlled when its publishers fell at least this
        far behind their schedule (``publisher_lag_max_s``), s; > 0.
    fit_overhead : bool
        Fit the per-message overhead (needs blocked runs with two payload
        sizes or more); otherwise ``overhead_bytes`` is used as given.
    overhead_bytes : float
        The per-message overhead when it is not fitted, bytes; >= 0.
    egress_column : str
        The column of copies delivered per second within the window (the
        broker's throughput times the fan-out).

    Attributes
    ----------
    params_ : dict
        ``socket_buffer_bytes``, ``message_overhead_bytes`` (bytes), ``n_runs``.
    residuals_ : pandas.Series
        Measured minus fitted backlog per connection of each run used, messages.
    """

    def __init__(self, *, min_lag_s=1.0, fit_overhead=True, overhead_bytes=0.0, egress_column="egress_received_per_s"):
        if not (isinstance(min_lag_s, (int, float)) and math.isfinite(min_lag_s) and min_lag_s > 0):
            raise ConfigError("min_lag_s", min_lag_s, "a lag > 0 s")
        if not (isinstance(overhead_bytes, (int, float)) and math.isfinite(overhead_bytes) and overhead_bytes >= 0):
            raise ConfigError("overhead_bytes", overhead_bytes, "a number of bytes >= 0")
        self.min_lag_s = float(min_lag_s)
        self.fit_overhead = bool(fit_overhead)
        self.overhead_bytes = float(overhead_bytes)
        self.egress_column = egress_column

    def blocked(self, measurements):
        """The runs whose publishers were held back by flow control (and delivered something)."""
        _check(measurements, BLOCKED_COLUMNS + (self.egress_column,))
        m = measurements
        keep = (
            (m["publisher_lag_max_s"] >= self.min_lag_s)
            & (m[self.egress_column] > 0)
            & (m["latency_p50_s"] > 0)
            & np.isfinite(m["latency_p50_s"])
        )
        return m[keep]

    def fit(self, measurements):
        """Fit on ``measurements`` (one row per run; the caller picks the training split)."""
        rows = self.blocked(measurements)
        need = 2 if self.fit_overhead else 1
        _enough(len(rows), need, "flow-controlled runs", f"runs with publisher_lag_max_s >= {self.min_lag_s:g} s")
        payload = rows["payload_bytes"].to_numpy(dtype=float)
        if self.fit_overhead and np.unique(payload).size < 2:
            raise ConfigError(
                "measurements.payload_bytes", float(payload[0]), "two payload sizes or more to fit the overhead"
            )
        backlog = backlog_per_connection(rows, self.egress_column)
        if self.fit_overhead:
            x = np.column_stack([payload, np.ones_like(payload)])
            (inv_b, h_over_b), _ = nnls(x * backlog[:, None], np.ones_like(backlog))
            if not inv_b > 0:
                raise ConfigError(
                    "measurements.latency_p50_s", "no payload dependence", "backlogs that fall with payload"
                )
            buffer_b, overhead = 1.0 / inv_b, h_over_b / inv_b
        else:
            overhead = self.overhead_bytes
            w = (payload + overhead) * backlog
            buffer_b = float(np.sum(w * w) / np.sum(w))
        fitted = buffer_b / (payload + overhead)
        self.params_ = {
            "socket_buffer_bytes": int(round(buffer_b)),
            "message_overhead_bytes": int(round(overhead)),
            "n_runs": int(len(rows)),
        }
        self.residuals_ = pd.Series(backlog - fitted, index=rows.index, name="backlog_residual_messages")
        return self

    def overload_params(self, *, reference, date="", note=""):
        """The fitted :class:`OverloadParams` with measured provenance naming ``reference``."""
        p = self.params_
        return OverloadParams(
            socket_buffer_bytes=p["socket_buffer_bytes"],
            message_overhead_bytes=p["message_overhead_bytes"],
            provenance=Provenance(
                source=Source.MEASURED,
                reference=reference,
                date=date,
                note=note
                or f"SocketBufferCalibrator on {p['n_runs']} flow-controlled runs (min lag {self.min_lag_s:g} s)",
            ),
        )


class FlowControlCostCalibrator:
    """Fit the broker's extra CPU per message its publishers send under TCP flow control.

    Once a connection's receive buffer is full, the publisher's sending is
    clocked by the broker's window updates, and on loopback the publisher's
    transmit and the receive of its segments run in the broker's ``NET_RX``
    softirq, on the broker's CPU (``calibration/README.md``, "Flow control
    moves the publishers' sending onto the broker's core"). Per
    configuration::

        extra = CPU per message of the runs whose publishers were held
              - CPU per message of its most loaded sustainable runs

    (medians of ``demand_s_per_ingress``), and ``extra = fixed + per_byte x
    (payload + overhead)`` is fitted over the configurations by non-negative
    least squares. A held run also reads more packets per pass of the event
    loop, which saves CPU; the difference is net of that saving (about
    2.5 us x the change in passes per message).

    Parameters
    ----------
    min_lag_s : float
        A run is flow-controlled when its publishers fell at least this far
        behind (``publisher_lag_max_s``), s; > 0.
    baseline_runs : int
        The most loaded sustainable runs of a configuration its baseline is
        the median of; >= 1.
    overhead_bytes : float
        Bytes counted per message beyond the payload (as
        ``OverloadParams.message_overhead_bytes``); >= 0.
    fit_fixed : bool
        Fit a fixed part per message as well as the part per byte.

    Attributes
    ----------
    params_ : dict
        ``flow_control_cost_s``, ``flow_control_cost_s_per_byte``, ``n_configs``.
    table_ : pandas.DataFrame
        Per configuration: ``payload_bytes``, ``baseline_s``, ``held_s``,
        ``extra_s``, ``fitted_s`` (s per message), ``n_baseline``, ``n_held``.
    """

    COLUMNS = ("config", "payload_bytes", "demand_s_per_ingress", "publisher_lag_max_s", "sustainable", "rate_per_s")

    def __init__(self, *, min_lag_s=1.0, baseline_runs=3, overhead_bytes=0.0, fit_fixed=True):
        if not (isinstance(min_lag_s, (int, float)) and math.isfinite(min_lag_s) and min_lag_s > 0):
            raise ConfigError("min_lag_s", min_lag_s, "a lag > 0 s")
        if not (isinstance(baseline_runs, int) and baseline_runs >= 1):
            raise ConfigError("baseline_runs", baseline_runs, "a whole number of runs >= 1")
        if not (isinstance(overhead_bytes, (int, float)) and math.isfinite(overhead_bytes) and overhead_bytes >= 0):
            raise ConfigError("overhead_bytes", overhead_bytes, "a number of bytes >= 0")
        self.min_lag_s = float(min_lag_s)
        self.baseline_runs = baseline_runs
        self.overhead_bytes = float(overhead_bytes)
        self.fit_fixed = bool(fit_fixed)

    def states(self, measurements):
        """Per configuration with both: ``(config, baseline runs, held runs)``, the runs the fit
        compares (the ``baseline_runs`` most loaded sustainable ones; those held at least
        ``min_lag_s`` with a measured CPU per message)."""
        for config, g in measurements.groupby("config", sort=True):
            held = g[(g["publisher_lag_max_s"] >= self.min_lag_s) & np.isfinite(g["demand_s_per_ingress"])]
            base = g[g["sustainable"].astype(bool)].nlargest(self.baseline_runs, "rate_per_s")
            if not (held.empty or base.empty):
                yield config, base, held

    def _table(self, m):
        rows = []
        for config, base, held in self.states(m):
            rows.append(
                {
                    "config": config,
                    "payload_bytes": float(base["payload_bytes"].iloc[0]),
                    "baseline_s": float(base["demand_s_per_ingress"].median()),
                    "held_s": float(held["demand_s_per_ingress"].median()),
                    "n_baseline": len(base),
                    "n_held": len(held),
                }
            )
        t = pd.DataFrame(rows)
        if not t.empty:
            t["extra_s"] = t["held_s"] - t["baseline_s"]
        return t

    def fit(self, measurements):
        """Fit on ``measurements`` (one row per run; the caller picks the training split)."""
        _check(measurements, self.COLUMNS)
        t = self._table(measurements)
        need = 2 if self.fit_fixed else 1
        what = f"configurations with runs held >= {self.min_lag_s:g} s and sustainable runs"
        _enough(len(t), need, "configurations with held and sustainable runs", what)
        size = t["payload_bytes"].to_numpy() + self.overhead_bytes
        x = np.column_stack([np.ones_like(size), size]) if self.fit_fixed else size[:, None]
        coef, _ = nnls(x, t["extra_s"].to_numpy())
        fixed, per_byte = (coef[0], coef[1]) if self.fit_fixed else (0.0, coef[0])
        t["fitted_s"] = fixed + per_byte * size
        self.params_ = {
            "flow_control_cost_s": float(fixed),
            "flow_control_cost_s_per_byte": float(per_byte),
            "n_configs": int(len(t)),
        }
        self.table_ = t
        return self


def _enough(found, need, found_what, need_what):
    """One-line error naming ``measurements`` when fewer than ``need`` usable rows were found."""
    if found < need:
        raise ConfigError("measurements", f"{found} {found_what}", f"at least {need} {need_what}")


def backlog_per_connection(rows, egress_column="egress_received_per_s"):
    """Messages one publisher connection held in each run (Little's law), messages."""
    served = rows[egress_column].to_numpy(dtype=float) / rows["fanout"].to_numpy(dtype=float)
    return rows["latency_p50_s"].to_numpy(dtype=float) * served / rows["publishers"].to_numpy(dtype=float)


def with_overload(profile, overload):
    """A copy of a calibrated profile whose broker carries ``overload`` (an OverloadParams or None)."""
    ((name, fields),) = profile["broker"].items()
    fields = {k: v for k, v in fields.items() if k != "overload"}
    if overload is not None:
        fields["overload"] = overload
    return {**profile, "broker": {name: fields}}


def past_limit_runs(runs, saturation, fractions=(1.25, 2.0, 3.0), tolerance=0.02):
    """The ``fraction``-phase runs offered ``fractions`` x each configuration's measured limit.

    Adds ``limit_rate_per_s`` and ``fraction`` (offered over the limit)."""
    _check(runs, ("broker", "config", "phase", "offered_per_s"))
    _check(saturation, ("broker", "config", "limit_rate_per_s"))
    m = runs[runs["phase"] == "fraction"].merge(
        saturation[["broker", "config", "limit_rate_per_s"]], on=["broker", "config"], how="inner"
    )
    m["fraction"] = m["offered_per_s"] / m["limit_rate_per_s"]
    near = np.zeros(len(m), dtype=bool)
    for f in fractions:
        near |= np.abs(m["fraction"].to_numpy() / f - 1.0) <= tolerance
    out = m[near].copy()
    out["fraction"] = [min(fractions, key=lambda f, x=x: abs(x - f)) for x in out["fraction"]]
    return out.reset_index(drop=True)


def _pct(sim, measured):
    return 100.0 * (sim / measured - 1.0) if measured else math.nan


def compare_past_limit(rows, profile, overload, *, seed=0):
    """Measured vs simulated egress, ingress and p50 latency of each run, without and with ``overload``.

    Parameters
    ----------
    rows : pandas.DataFrame
        Measured runs (:func:`past_limit_runs`), one broker kind.
    profile : dict
        The broker's calibrated profile (:func:`pubsim.calibration.validate.fit_profiles`).
    overload : OverloadParams

    Returns
    -------
    pandas.DataFrame
        Per run: ``config``, ``split``, ``fraction``, measured and simulated
        (``_plain``: no flow control; ``_overload``: with it) egress (copies/s
        within the window), ingress (messages sent in the window per s) and
        p50 latency (s), and their errors in % (``*_error_plain_pct``, ``*_error_overload_pct``).
    """
    plain, flow = with_overload(profile, None), with_overload(profile, overload)
    out = []
    for _, r in rows.iterrows():
        row = r.to_dict()
        rec = {k: row.get(k) for k in ("config", "split", "fraction", "offered_per_s")}
        rec.update(
            egress_measured=row["egress_received_per_s"],
            ingress_measured=row["ingress_rate_per_s"],
            p50_measured_s=row["latency_p50_s"],
        )
        for tag, prof in (("plain", plain), ("overload", flow)):
            sim = simulate_run(row, prof, seed=seed, sample=1)[0]
            rec[f"egress_{tag}"] = sim["egress_rate_per_s"]
            rec[f"ingress_{tag}"] = sim["ingress_rate_per_s"]
            rec[f"p50_{tag}_s"] = sim["latency_p50_s"]
            rec[f"egress_error_{tag}_pct"] = _pct(sim["egress_rate_per_s"], row["egress_received_per_s"])
            rec[f"ingress_error_{tag}_pct"] = _pct(sim["ingress_rate_per_s"], row["ingress_rate_per_s"])
            rec[f"p50_error_{tag}_pct"] = _pct(sim["latency_p50_s"], row["latency_p50_s"])
        out.append(rec)
    return pd.DataFrame(out)
