"""Fit the I/O-cycle structure (:mod:`pubsim.models.mechanisms.iothreads`) from a campaign.

Per ingress message a broker served in I/O cycles spends (CPU s of one core)::

    ingress + fanout x delivery + payload x (1 + fanout) x per_byte
            + x x (cycle + fanout x flush) + background / rate

where ``x`` is the number of I/O cycles per ingress message. ``x`` is not
measured directly; the voluntary context switches per message ``w`` are. At
the lightest load of a configuration every message is its own cycle, so the
switches of one cycle are ``w_ref`` = ``w`` there, and ``x = min(1, w /
w_ref)`` in every run of that configuration. The model is linear in its
costs: non-negative least squares on relative errors, sustainable runs only
(the utilization law), as :class:`pubsim.calibration.fit.BrokerDemandCalibrator`.

The most messages per cycle is ``1 / x`` at the highest sustainable load of
each configuration (the median over configurations): near its limit a
broker reads a buffer's worth per cycle, and the simulated broker must not
share a cycle's cost among more messages than the measured one did there.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .fit import LatencyFloorCalibrator, _check, relative_nnls, wakeups_of
from .profile import build_profile, read_buffer, tick_demand
from .zmqmarks import check_one_marks

__all__ = ["IoCycleCalibrator", "IO_TERMS", "fit_io_profiles", "cycles_per_ingress"]

IO_TERMS = (
    "ingress_cost_s",
    "delivery_cost_s",
    "per_byte_cost_s",
    "cycle_cost_s",
    "flush_cost_s",
    "background_cpu_fraction",
)
_COLUMNS = ("config", "payload_bytes", "fanout", "ingress_rate_per_s", "demand_s_per_ingress", "wakeups_per_ingress")


def cycles_per_ingress(measurements):
    """I/O cycles per ingress message of each run, ``min(1, w / w_ref)`` (module docstring;
    :func:`pubsim.calibration.fit.wakeups_of` with no floor on ``w_ref``)."""
    return wakeups_of(measurements, min_reference=1e-12)


def _most_per_cycle(m):
    """Median over configurations of the messages per cycle at the highest sustainable load."""
    x = cycles_per_ingress(m)
    top = m.groupby("config")["ingress_rate_per_s"].transform("max").to_numpy(dtype=float)
    knee = x[m["ingress_rate_per_s"].to_numpy(dtype=float) == top]
    knee = knee[knee > 0]
    return int(max(1, round(float(np.median(1.0 / knee))))) if knee.size else None


class IoCycleCalibrator:
    """Per-message and per-cycle CPU costs of one broker from measured runs.

    Parameters
    ----------
    fit_per_byte, fit_delivery, fit_flush, fit_background : bool
        Which terms to fit (a term whose data do not vary, e.g. one payload
        size, cannot be identified: leave it out, it is reported as 0).
    read_buffer : mapping or None
        The broker's read limit (``cycle_max_bytes``, ``message_overhead_bytes``:
        :func:`pubsim.calibration.profile.read_buffer`). None (default): a
        cycle is a wake-up, ``x = min(1, w / w_ref)`` (module docstring).
        Given: a cycle is a ``read`` that returned data, counted from the
        measured reads per message ``r`` (column ``broker_reads_per_ingress``):
        each wake-up ends with one read that finds nothing (``EAGAIN``; 2.0-2.1
        reads per message at a configuration's lightest load, where every
        message wakes the broker), so ``x = max(r - x_wake, (payload +
        overhead) / cycle_max_bytes)`` (no read carries more than the
        buffer), and the wake-ups ``x_wake = min(1, w / w_ref)`` get a cost
        of their own, ``idle_wakeup_cost_s``, which the twin charges to a
        message that finds the broker asleep.

    Attributes
    ----------
    params_ : dict
        :data:`IO_TERMS` (s, s, s/byte, s, s, cores), ``idle_wakeup_cost_s``
        (s; 0 without ``read_buffer``), ``cycle_max_messages`` (messages, None
        when no run shows cycles) and ``n_runs``.
    residuals_ : pandas.Series
        Measured minus fitted demand per run, s.
    """

    def __init__(self, *, fit_per_byte=True, fit_delivery=True, fit_flush=True, fit_background=True, read_buffer=None):
        self.read_buffer = read_buffer
        self.fit_per_byte = fit_per_byte
        self.fit_delivery = fit_delivery
        self.fit_flush = fit_flush
        self.fit_background = fit_background

    def _design(self, m):
        fanout = m["fanout"].to_numpy(dtype=float)
        payload = m["payload_bytes"].to_numpy(dtype=float)
        rate = m["ingress_rate_per_s"].to_numpy(dtype=float)
        x = cycles_per_ingress(m)
        cols = [np.ones_like(fanout), fanout, payload * (1 + fanout), x, x * fanout, 1.0 / rate]
        keep = [True, self.fit_delivery, self.fit_per_byte, True, self.fit_flush, self.fit_background]
        names = [n for n, k in zip(IO_TERMS, keep) if k]
        if self.read_buffer is not None:
            reads = self._data_reads(m, x)
            cols[3:5] = [reads, reads * fanout]
            cols.append(x)
            keep.append(True)
            names.append("idle_wakeup_cost_s")
        return np.column_stack([c for c, k in zip(cols, keep) if k]), names

    def reads_per_ingress(self, measurements):
        """Reads that returned data per ingress message of each run (``read_buffer`` given)."""
        m = measurements.reset_index(drop=True)
        return self._data_reads(m, cycles_per_ingress(m))

    def _data_reads(self, m, wakeups):
        """:meth:`reads_per_ingress` of ``m`` (index reset) with its wake-ups per message given."""
        buf = self.read_buffer
        floor = (m["payload_bytes"].to_numpy(dtype=float) + buf["message_overhead_bytes"]) / buf["cycle_max_bytes"]
        reads = m["broker_reads_per_ingress"].to_numpy(dtype=float)
        return np.maximum(reads - wakeups, floor)

    def fit(self, measurements):
        """Fit on ``measurements`` (one row per sustainable run); sets ``params_``."""
        _check(measurements, _COLUMNS + (() if self.read_buffer is None else ("broker_reads_per_ingress",)))
        m = measurements.reset_index(drop=True)
        x, names = self._design(m)
        y = m["demand_s_per_ingress"].to_numpy(dtype=float)
        coef = relative_nnls(x, y, names)
        params = dict.fromkeys((*IO_TERMS, "idle_wakeup_cost_s"), 0.0)
        params.update(zip(names, coef.tolist()))
        self.params_ = {**params, "cycle_max_messages": _most_per_cycle(m), "n_runs": len(y)}
        self.residuals_ = pd.Series(y - x @ coef, name="demand_residual_s")
        return self

    def own_demand_s(self, measurements):
        """Fitted per-message (on-path) demand of each run, cycles left out, s."""
        p = self.params_
        f = measurements["fanout"].to_numpy(dtype=float)
        size = measurements["payload_bytes"].to_numpy(dtype=float)
        return p["ingress_cost_s"] + f * p["delivery_cost_s"] + size * (1 + f) * p["per_byte_cost_s"]

    def predict(self, measurements):
        """Fitted demand per ingress message of each run (cycles included), s."""
        x, names = self._design(measurements.reset_index(drop=True))
        return x @ np.array([self.params_[n] for n in names])


def _io_note(kind, rows, cal, meta):
    p = cal.params_
    rms = float(np.sqrt(np.mean(cal.residuals_**2)))
    return (
        f"I/O cycles fitted by NNLS on relative errors over {p['n_runs']} sustainable training runs of "
        f"calibration/data/{meta.get('campaign', 'campaign')}/runs.csv (rms residual {rms * 1e6:.1f} us): "
        + (
            "cycles per message = measured voluntary context switches per message over those at the "
            "configuration's lightest load"
            if cal.read_buffer is None
            else "wake-ups per message = measured voluntary context switches per message over those at the "
            "configuration's lightest load; cycles = the reads that returned data"
        )
        + " (pubsim.calibration.iofit); nats-server 2.9.10 readLoop/flushClients, "
        f"libzmq 4.3.5 out_event batching; {kind} {meta.get('versions', {}).get(kind, '?')}."
    )


def reads_buffer(kind, rows):
    """The read limit the fit of broker ``kind`` uses: its source's
    (:func:`pubsim.calibration.profile.read_buffer`) where every run of ``rows`` counted its
    reads (``broker_reads_per_ingress``), else None (cycles are wake-ups)."""
    buf = read_buffer(kind)
    if buf is None or "broker_reads_per_ingress" not in rows or rows["broker_reads_per_ingress"].isna().any():
        return None
    return buf


def _read_limit(buf, p):
    """What ends a cycle: the read buffer in bytes (``buf``), else the fitted most messages per cycle."""
    if buf is None:
        return {"cycle_max_messages": p["cycle_max_messages"]}
    return {"cycle_max_bytes": buf["cycle_max_bytes"], "message_overhead_bytes": buf["message_overhead_bytes"]}


def _read_limit_note(buf, p):
    if buf is None:
        return f" Cycles are wake-ups, at most {p['cycle_max_messages']} messages each (fitted at the limits)."
    return (
        f" Cycles are the reads that returned data (measured reads per message less one per wake-up, "
        f"at least a buffer's worth each), wake-ups apart ({p['idle_wakeup_cost_s'] * 1e6:.1f} us); a cycle "
        f"reads at most {buf['cycle_max_bytes']} B (payload + {buf['message_overhead_bytes']} B per message): "
        f"{buf['source']}."
    )


def fit_io_profiles(runs, meta, *, split="train", kinds=None, cpu_tick_s=0.0):
    """One profile with I/O cycles per broker kind, fitted on ``runs[split]`` (sustainable runs).

    Returns broker kind -> profile mapping (:func:`pubsim.calibration.profile.build_profile`),
    whose broker carries ``io`` (cycle and flush costs) and, where the reads were not counted,
    no per-message wake-up; ``cpu_tick_s`` as :func:`pubsim.calibration.validate.fit_profiles`.
    """
    train = runs[(runs["split"] == split) & (runs["ingress_rate_per_s"] > 0) & runs["sustainable"].astype(bool)]
    profiles = {}
    for kind, rows in train.groupby("broker"):
        if kinds is not None and kind not in kinds:
            continue
        check_one_marks(runs[runs["broker"] == kind], what=f"{kind} runs")
        buf = reads_buffer(kind, rows)
        cal = IoCycleCalibrator(
            fit_per_byte=rows.payload_bytes.nunique() > 1,
            fit_delivery=rows.fanout.nunique() > 1,
            fit_flush=rows.fanout.nunique() > 1,
            read_buffer=buf,
        ).fit(rows)
        p = cal.params_
        limit = 0.5 * float(rows.cpu_cap_fraction.fillna(1.0).min())
        demand = {
            "ingress_cost_s": p["ingress_cost_s"],
            "delivery_cost_s": p["delivery_cost_s"],
            "per_byte_cost_s": p["per_byte_cost_s"],
            "idle_wakeup_cost_s": p["idle_wakeup_cost_s"],
            "background_cpu_fraction": min(p["background_cpu_fraction"], limit),
            **tick_demand(cpu_tick_s),
        }
        floor = LatencyFloorCalibrator().fit(rows, demand_s=cal.own_demand_s(rows))
        note = _io_note(kind, rows, cal, meta)
        prof = build_profile(
            name=kind,
            broker_kind=kind,
            demand_params=demand,
            link_params=floor.params_,
            metadata={
                "data": f"calibration/data/{meta.get('campaign', 'campaign')}/runs.csv (split={split})",
                "date": meta.get("date", ""),
                "host": meta.get("host", "?"),
                "cpu": meta.get("cpu", "?"),
                "kernel": meta.get("kernel", "?"),
                "broker_version": meta.get("versions", {}).get(kind, "?"),
                "cpu_cap_fraction": ", ".join(f"{c:g}" for c in sorted(set(rows.cpu_cap_fraction.fillna(1.0)))),
                "n_runs": p["n_runs"],
                "rms_residual_s": float(np.sqrt(np.mean(cal.residuals_**2))),
                "wake_regressor": "I/O cycles per message (pubsim.calibration.iofit)",
            },
        )
        ((bname, bfields),) = prof["broker"].items()
        bfields["io"] = {
            "cycle_cost_s": p["cycle_cost_s"],
            "flush_cost_s": p["flush_cost_s"],
            **_read_limit(buf, p),
            "provenance": {
                "source": "measured",
                "reference": f"calibration/data/{meta.get('campaign')}/runs.csv (split={split})",
                "note": note + _read_limit_note(buf, p),
            },
        }
        profiles[kind] = prof
    return profiles
