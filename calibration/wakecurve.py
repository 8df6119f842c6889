"""The shape of a wake-up's cost by idle time, from the campaign's machine (issue 18, latency).

A broker that sleeps between messages pays a wake-up when one comes, and
that wake-up costs more CPU the longer it slept: on the calibration VM
Mosquitto 2.0.11 at fan-out 16 spent 264 us per wake-up beyond its busy
costs after 40 ms of idle and 41-51 us after 1.3-1.5 ms
(calibration/README.md, "A wake-up costs more the longer the broker
idled"). The simulated broker prices it with
:class:`pubsim.models.params.idle.WakeCurveParams`; this module gives that
curve its shape from what every campaign measures about its machine.

Every campaign since 2026-11-27 measures, before each pair of runs, how long
a reader on the broker's core takes to wake after pauses of 0.2 to 50 ms
(:func:`pubsim.calibration.harness.machine.idle_exit_curve`, its
``wake_idle_s``: read time minus the kernel's receive stamp, the core idle
between messages). That wake-up grows with the pause for the same reasons a
broker's does (a deeper idle state, colder caches and TLB). The shape used
here is that curve made non-decreasing and divided by its value at the
longest pause, so that ``idle_wakeup_cost_s`` is the wake-up after a long
idle and the fit (:class:`pubsim.calibration.fit.BrokerDemandCalibrator`,
``wake_curve``) scales it. That the broker's CPU follows the reader's
latency in shape is an assumption; the fitted campaigns' runs test it
(calibration/README.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["machine_wake_shape", "wake_curve_mapping"]


def _curves(meta):
    """The ``idle_exit`` records with a ``wake_idle_s`` curve: one per pair (``pair_facts``), else
    the campaign's own; ``(curves, where)``."""
    facts = meta.get("pair_facts") or {}
    pairs = [f["idle_exit"] for f in facts.values() if _has_wakes(f.get("idle_exit"))]
    if pairs:
        n = max(len(c["idle_s"]) for c in pairs)
        pairs = [c for c in pairs if len(c["idle_s"]) == n]
        return pairs, f"pair_facts: median of {len(pairs)} curves, one before each pair"
    own = meta.get("idle_exit")
    return ([own], "idle_exit") if _has_wakes(own) else ([], "")


def _has_wakes(curve):
    return (
        isinstance(curve, dict)
        and bool(curve.get("idle_s"))
        and len(curve.get("wake_idle_s") or ()) == len(curve["idle_s"])
        and all(np.isfinite(curve["wake_idle_s"]))
    )


def machine_wake_shape(meta):
    """The wake-up curve's shape measured on a campaign's machine, or None where it was not.

    Parameters
    ----------
    meta : dict
        The campaign's ``meta.json``.

    Returns
    -------
    dict or None
        ``idle_s`` (s) and ``share`` (dimensionless, 1 at the last point): the
        pointwise median of the pairs' ``wake_idle_s`` curves (else the
        campaign's one), made non-decreasing and divided by its last value;
        ``wake_s`` (the median curve itself, s), ``where`` and ``date``.
    """
    curves, where = _curves(meta)
    if not curves:
        return None
    idle = np.median([c["idle_s"] for c in curves], axis=0)
    wake = np.maximum.accumulate(np.median([c["wake_idle_s"] for c in curves], axis=0))
    if not wake[-1] > 0:
        return None
    return {
        "idle_s": tuple(float(f"{x:.6g}") for x in idle),
        "share": tuple(float(f"{x:.4g}") for x in wake / wake[-1]),
        "wake_s": tuple(float(x) for x in wake),
        "where": where,
        "date": str(curves[0].get("date", meta.get("date", ""))),
    }


def wake_curve_mapping(shape, work_share, meta, *, fitted_on):
    """The broker's ``wake_curve`` mapping (:class:`pubsim.models.params.idle.WakeCurveParams`) with
    its provenance: the shape measured on the machine, the work share fitted.

    Parameters
    ----------
    shape : dict
        :func:`machine_wake_shape`.
    work_share : float
        The fitted ``wake_work_share`` (dimensionless).
    meta : dict
        The campaign's ``meta.json``.
    fitted_on : str
        Where the scale and work share were fitted (the runs' reference).
    """
    points = ", ".join(f"{i * 1e3:.3g} ms: {w * 1e6:.3g} us" for i, w in zip(shape["idle_s"], shape["wake_s"]))
    return {
        "idle_s": list(shape["idle_s"]),
        "share": list(shape["share"]),
        "work_share": float(f"{work_share:.4g}"),
        "provenance": {
            "source": "measured",
            "reference": f"calibration/data/{meta.get('campaign', 'campaign')}/meta.json ({shape['where']}); "
            f"{fitted_on}",
            "date": shape["date"],
            "note": (
                "shape: a reader's wake-up on the broker's core after each pause, the core idle between "
                f"messages (idle_exit wake_idle_s, {points}), made non-decreasing and divided by its last "
                "value; assumption: the broker's CPU per wake-up grows with its idle time in that shape "
                "(colder caches, TLB and idle state the longer it slept). idle_wakeup_cost_s is the full "
                "wake-up (share 1) and work_share the share of the message's own demand a full wake-up "
                "adds, both fitted on the training runs' CPU per message with each run's mean idle per "
                "wake-up (pubsim.calibration.fit.wake_idle_of)"
            ),
        },
    }
