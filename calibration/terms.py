"""Which demand terms a campaign identifies, and bootstrap intervals of the fitted ones (issues 15, 18).

:func:`pubsim.calibration.validate.fit_profiles` fits the CPU demand per
ingress message of each broker (:mod:`pubsim.calibration.fit`) on the
campaign's training runs. A term whose column the training configurations
do not vary, or vary only together with the other terms (collinear), is not
identified: it is left at 0 and recorded with the reason, never silently.
The per-connection term is the case in point: with one publisher in every
configuration and one subscriber per delivered copy, the connections
(``1 + subscribers``) move with the fan-out, and the delivery cost holds
their share.

The fitted terms get percentile intervals from a bootstrap over runs,
resampled within each configuration (every configuration keeps its runs'
number, so the runs nearest each limit still exist in every resample).
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from .fit import (
    PASSES,
    READER_SLEEPS,
    ack_columns,
    connections_of,
    extra_length_bytes_of,
    filters_of,
    heap_pages_of,
    passes_of,
    reader_wakes_of,
)

__all__ = [
    "TERM_UNITS",
    "busy_identified",
    "full_column_rank",
    "passes_identified",
    "reader_wakes_identified",
    "bootstrap_intervals",
    "terms_record",
]

#: Unit of each term of the campaign fit.
TERM_UNITS = {
    "ingress_cost_s": "s",
    "delivery_cost_s": "s",
    "per_byte_cost_s": "s/B",
    "idle_wakeup_cost_s": "s",
    "background_cpu_fraction": "cores",
    "connection_cost_s": "s",
    "connection_wakeup_cost_s": "s",
    "length_byte_cost_s": "s",
    "pass_cost_s": "s",
    "filter_scan_cost_s": "s",
    "ack_cost_s": "s",
    "copy_ack_cost_s": "s",
    "reader_wake_cost_s": "s",
    "wake_work_share": "share",
    "heap_fault_cost_s": "s",
}

_RANK_TOL = 1e-8


def full_column_rank(x):
    """True if the columns of ``x`` (rows by terms) are independent: scaled to unit norm, its
    smallest singular value is above ``1e-8`` of the largest, and it has as many rows as columns.
    A zero column is dependent."""
    norms = np.linalg.norm(x, axis=0)
    if x.shape[0] < x.shape[1] or not np.all(norms > 0):
        return False
    sv = np.linalg.svd(x / norms, compute_uv=False)
    return bool(sv[-1] > _RANK_TOL * sv[0])


def _configurations(rows):
    """One row per training configuration: fan-out, payload, connections (and topic length)."""
    cols = ["fanout", "payload_bytes", "publishers", "subscribers"]
    cols += [c for c in ("topic_bytes", "topics", "idle_filters", "qos") if c in rows]
    return rows.drop_duplicates(cols)[cols].reset_index(drop=True)


def busy_identified(rows, *, length_bytes=False, filters=False, acks=False, copy_acks=False, heap=None):
    """Which busy terms the training configurations identify, in order.

    Terms are added in the order ingress, delivery, per byte, remaining-length
    bytes (only with ``length_bytes``: a broker that reads them one by one,
    ``BrokerParams.length_byte_cost_s``), connections, installed subscriptions
    (only with ``filters``: :func:`pubsim.calibration.fit.filters_of`,
    ``filter_scan_cost_s``), QoS handshake packets (only with ``acks``:
    :func:`pubsim.calibration.fit.acks_of`, ``ack_cost_s``; with ``copy_acks`` the publisher's
    exchange alone, and the copies' packets, ``copy_ack_cost_s``, after it:
    :func:`pubsim.calibration.fit.ack_columns`), pages faulted in again (only with ``heap``, a
    :class:`pubsim.models.params.heap.HeapTrimParams` rule: :func:`pubsim.calibration.fit.heap_pages_of`,
    ``heap_fault_cost_s``) while the rank of their columns over the configurations grows
    (columns scaled to unit norm, singular values below ``1e-8`` of the
    largest count as zero; a term beyond the number of configurations is
    not identified either).

    Returns
    -------
    dict
        ``{term: None (identified) or the reason it is not}``.
    """
    c = _configurations(rows)
    fan = c.fanout.to_numpy(dtype=float)
    ack, copy_ack = ack_columns(c, apart=copy_acks)
    cols = {
        "ingress_cost_s": np.ones(len(c)),
        "delivery_cost_s": fan,
        "per_byte_cost_s": c.payload_bytes.to_numpy(dtype=float) * (1 + fan),
        "length_byte_cost_s": extra_length_bytes_of(c),
        "connection_cost_s": connections_of(c),
        "filter_scan_cost_s": filters_of(c) if filters else np.zeros(len(c)),
        "ack_cost_s": ack,
        "copy_ack_cost_s": copy_ack,
        "heap_fault_cost_s": heap_pages_of(c, heap) if heap is not None else np.zeros(len(c)),
    }
    what = {
        "delivery_cost_s": "fan-out",
        "per_byte_cost_s": "payload size",
        "length_byte_cost_s": "MQTT remaining-length bytes beyond the first",
        "connection_cost_s": "connections (publishers + subscribers)",
        "filter_scan_cost_s": "installed subscriptions",
        "ack_cost_s": "QoS handshake packets",
        "copy_ack_cost_s": "QoS handshake packets of the copies",
        "heap_fault_cost_s": "pages faulted in again per message (payloads up to the allocator's top pad fault none)",
    }
    if not length_bytes:
        del cols["length_byte_cost_s"]
    if not filters:
        del cols["filter_scan_cost_s"]
    if not acks:
        del cols["ack_cost_s"]
    if not (acks and copy_acks):
        del cols["copy_ack_cost_s"]
    if heap is None:
        del cols["heap_fault_cost_s"]
    kept, status = [], {}
    for name, x in cols.items():
        if name != "ingress_cost_s" and np.ptp(x) == 0:
            status[name] = f"not identified: every training configuration has the same {what[name]} ({x[0]:g})"
            continue
        if not full_column_rank(np.column_stack([cols[k] for k in kept] + [x])):
            status[name] = (
                f"not identified: its column is a combination of {', '.join(kept)} over the "
                f"{len(c)} training configurations (they hold its share)" + _why_collinear(name, c)
            )
            continue
        kept.append(name)
        status[name] = None
    return status


def passes_identified(rows, *, min_spread=0.1):
    """None if the training runs' event-loop passes per message (:func:`pubsim.calibration.fit.passes_of`)
    identify a cost per pass, else the reason: not counted, or (nearly) the same in every run."""
    passes = passes_of(rows)
    known = passes[~np.isnan(passes)]
    if known.size == 0:
        return f"not identified: no training run counted its passes ({PASSES}: perf not available)"
    if np.ptp(known) < min_spread:
        return (
            f"not identified: every training run read about one message per pass ({known.min():.3g}-"
            f"{known.max():.3g} passes per message; one publisher each)"
        )
    return None


def reader_wakes_identified(rows, *, min_spread=0.1):
    """None if the training runs' readers' sleeps per copy identify a cost per woken copy, else why not.

    The sleeps are counted per run (:data:`pubsim.calibration.fit.READER_SLEEPS`); they must be
    known in every run, spread by at least ``min_spread``, and their column (fan-out x sleeps)
    independent of the ingress and fan-out columns over the runs.
    """
    if READER_SLEEPS not in rows or rows[READER_SLEEPS].isna().any():
        return f"not identified: the runs did not count their readers' sleeps ({READER_SLEEPS})"
    sleeps = rows[READER_SLEEPS].to_numpy(dtype=float)
    if np.ptp(sleeps) < min_spread:
        return f"not identified: the readers slept {sleeps.min():.3g}-{sleeps.max():.3g} times a copy in every run"
    fan = rows["fanout"].to_numpy(dtype=float)
    if not full_column_rank(np.column_stack([np.ones(len(fan)), fan, reader_wakes_of(rows)])):
        return "not identified: the woken copies move with the fan-out over the training runs"
    return None


def _why_collinear(name, c):
    """The campaign's shape behind a collinear connection column, if it is the usual one."""
    pubs = c.publishers.to_numpy()
    if name == "connection_cost_s" and np.ptp(pubs) == 0 and (c.subscribers == c.fanout).all():
        return f"; every one has {pubs[0]} publisher(s) and one subscriber per copy (connections = {pubs[0]} + fan-out)"
    return ""


def _resample(rows, rng):
    """Runs drawn with replacement within each configuration."""
    parts = []
    for _, g in rows.groupby("config", sort=True):
        parts.append(g.iloc[rng.integers(0, len(g), len(g))])
    return pd.concat(parts).reset_index(drop=True)


def bootstrap_intervals(calibrator, rows, *, n_boot=200, level=0.95, seed=0):
    """Percentile intervals of the fitted terms from a bootstrap over runs.

    Parameters
    ----------
    calibrator : BrokerDemandCalibrator
        Its settings are reused (a fresh copy is fitted per resample).
    rows : pandas.DataFrame
        The runs it was fitted on (with ``config``).
    n_boot : int
        Resamples.
    level : float
        Confidence level.
    seed : int
        Seed of the resampling (``numpy.random.default_rng``).

    Returns
    -------
    dict
        ``{term: (low, high)}`` in the term's unit (:data:`TERM_UNITS`).
    """
    rng = np.random.default_rng(seed)
    draws = {name: [] for name in TERM_UNITS}
    for _ in range(n_boot):
        cal = copy.copy(calibrator).fit(_resample(rows, rng))
        for name in TERM_UNITS:
            draws[name].append(cal.params_.get(name, 0.0))
    q = [50 * (1 - level), 50 * (1 + level)]
    return {name: tuple(float(v) for v in np.percentile(d, q)) for name, d in draws.items()}


def terms_record(calibrator, rows, status, *, n_boot=200, level=0.95, seed=0):
    """The profile's ``fit_terms`` mapping: each term's value and interval, or why it is not identified.

    Parameters
    ----------
    calibrator : BrokerDemandCalibrator
        Fitted on ``rows``.
    rows : pandas.DataFrame
        The training runs.
    status : dict
        ``{term: None or reason}`` for the terms that were not fitted
        (missing terms count as fitted).
    n_boot, level, seed
        As :func:`bootstrap_intervals`.
    """
    ci = bootstrap_intervals(calibrator, rows, n_boot=n_boot, level=level, seed=seed)
    terms = {}
    for name, unit in TERM_UNITS.items():
        reason = status.get(name)
        if reason:
            terms[name] = {"identifiable": False, "reason": reason, "value": 0.0}
            continue
        lo, hi = ci[name]
        terms[name] = {
            "value": float(f"{calibrator.params_[name]:.6g}"),
            "ci": [float(f"{lo:.6g}"), float(f"{hi:.6g}")],
            "unit": unit,
        }
    return {
        "confidence_level": level,
        "method": (
            f"bootstrap over runs within each configuration ({n_boot} resamples, seed {seed}), "
            f"percentile intervals; not identified terms are left at 0"
        ),
        "terms": terms,
    }
