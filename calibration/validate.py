"""Fit profiles from a campaign and compare the simulator with the measurements.

:func:`fit_profiles` fits one broker profile per broker kind on the
``train`` runs of a campaign. :func:`validate` simulates every measured
configuration with those profiles (the same star of publishers, broker and
subscribers, the same offered loads, the broker at the same CPU cap) and
reports, per broker and configuration:

- saturation: the interval search of SYSTEMS.md §4 run on the simulator
  against the measured limit (error %);
- below saturation, per run: latency p50 / p90 / p99 error (%) (p50 and
  p99 also against the interval of the run's two stamp estimates,
  :func:`bracket_error_pct`), the
  two-sample Kolmogorov-Smirnov distance of the latency distributions and
  the error of the CPU per ingress message (%, ``demand_error_pct``);
- above saturation, per run: the shortfall ``1 - delivery_ratio`` (deliveries
  missing against what was offered, whether lost or held back by flow
  control) and the loss rate, errors in percentage points.

Rows carry the configuration's ``split`` so that held-out results are read
apart from the fitted ones.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import ks_2samp

from .. import progress as P
from ..analysis.interval_search import interval_search, is_sustainable
from ..models.params.link import JITTER_ON
from ..sim.errors import ConfigError
from .drift import SpeedDriftCalibrator
from .errors import bracket_error_pct
from .errors import pct_error as _pct
from .fit import (
    CONNECTION_FORMS,
    CONNECTION_TERMS,
    READER_SLEEPS,
    BrokerDemandCalibrator,
    KneeDemandCalibrator,
    LatencyFloorCalibrator,
    wakeups_of,
    with_limit_bracket,
)
from .forms import choose_filter_form
from .heapfit import heap_rule, heap_rule_reason, heap_trim_mapping
from .jitter import JitterModeCalibrator
from .profile import (
    build_profile,
    length_reads_reason,
    matching_lookup_reason,
    pass_reads_reason,
    several_switches_per_wakeup,
    sleeps_in_kernel,
    tick_demand,
)
from .sleep import SleepEntryCalibrator
from .terms import busy_identified, passes_identified, reader_wakes_identified, terms_record
from .variability import ServiceVariabilityCalibrator
from .virtual import VirtualHarness
from .wakecurve import machine_wake_shape, wake_curve_mapping
from .zmqmarks import check_one_marks

__all__ = [
    "bracket_error_pct",
    "fit_profiles",
    "idle_exit_preset",
    "pair_machine",
    "simulate_run",
    "validate",
    "Validation",
    "TARGETS",
]

# Accuracy targets on held-out configurations (issue #3).
TARGETS = {"saturation_error_pct": 10.0, "p50_error_pct": 25.0, "p99_error_pct": 25.0}


_WAKE_TEXT = {
    "wakeups": "measured voluntary context switches per message",
    "wakeup_switches": "measured voluntary context switches per message over those of one wake-up "
    "(per message at the configuration's lightest load)",
    "idle_fraction": "1 - utilization (PASTA)",
}


def _metadata(rows, meta, kind, split, demand, wake):
    caps = sorted({c for c in rows.cpu_cap_fraction.fillna(1.0)})
    clocks = set(rows["latency_clock"].dropna()) if "latency_clock" in rows else set()
    return {
        "latency_clock": clocks.pop() if len(clocks) == 1 else "app",
        "data": f"calibration/data/{meta.get('campaign', 'campaign')}/runs.csv (split={split})",
        "date": meta.get("date", ""),
        "host": meta.get("host", "?"),
        "cpu": meta.get("cpu", "?"),
        "kernel": meta.get("kernel", "?"),
        "broker_version": meta.get("versions", {}).get(kind, "?"),
        "cpu_cap_fraction": ", ".join(f"{c:g}" for c in caps),
        "n_runs": demand.params_["n_runs"],
        "rms_residual_s": float(np.sqrt(np.mean(demand.residuals_**2))),
        "wake_regressor": _WAKE_TEXT[wake]
        + (
            "; busy costs from the 2 sustainable runs nearest each measured limit"
            + (", their measured wake-ups taken out" if demand.knee_wakeups else "")
            + (
                f" ({demand.params_['n_bracketed_knee_runs']} of them spent the CPU quota: taken as the quota"
                " over the middle of the limit's bracket, the highest sustainable and lowest unsustainable rates)"
                if demand.params_.get("n_bracketed_knee_runs")
                else ""
            )
            if "n_knee_runs" in demand.params_
            else ""
        ),
    }


def fit_profiles(
    runs,
    meta,
    *,
    split="train",
    background=True,
    method="knee",
    variability=False,
    cv_grid=(0.0, 0.5, 1.0, 1.5, 2.0),
    seed=0,
    pacing=None,
    connection_form="auto",
    n_boot=200,
    stalls=None,
    jitter_on="every_packet",
    idle_exit_on=True,
    length_bytes=True,
    speed_drift=True,
    reader_wakes=False,
    knee_wakeups=False,
    knee_anchor="runs",
    cpu_tick_s=0.0,
    copies_in_turn=True,
    wake_curve=False,
    wake_work=False,
    heap_trim=True,
):
    """One calibrated profile per broker kind, fitted on ``runs[split]``.

    ``method="knee"`` fits the busy costs on the runs nearest each measured
    limit and the wake-up cost on the rest (:class:`KneeDemandCalibrator`);
    ``"joint"`` fits all costs at once (:class:`BrokerDemandCalibrator`).
    The wake-up cost is regressed on the measured voluntary context
    switches per message (or ``1 - utilization`` where they were not
    measured). Only sustainable runs are fitted (see the comment below).
    A broker's runs measured with different ZeroMQ high-water marks are
    refused (:func:`pubsim.calibration.zmqmarks.check_one_marks`).
    With ``background``, a background CPU load is fitted (see
    :class:`pubsim.calibration.fit.BrokerDemandCalibrator`) and the simulated broker
    carries it (``background_cpu_fraction``). With ``variability``, the
    coefficient of variation of the per-message costs is chosen from
    ``cv_grid`` by simulating the moderately loaded training runs
    (:class:`pubsim.calibration.variability.ServiceVariabilityCalibrator`; slower),
    the simulated twin paced with ``pacing`` (the load generator's measured
    lateness, :class:`pubsim.calibration.pacing.PacingLag`; None: on time)
    and its client links stalled by ``stalls``
    (:class:`pubsim.calibration.stalls.TickStalls`; None: no stalls).
    A broker whose threads sleep in the kernel when out of work (``sleeps``
    in :data:`pubsim.calibration.profile.BROKER_MODELS`: Mosquitto, NATS,
    the ZeroMQ proxy) and whose runs counted their context switches gets
    its sleep entry fitted on them
    (:class:`pubsim.calibration.sleep.SleepEntryCalibrator`, with the
    constant-cost profile; ``BrokerParams.sleep_entry_s``) before the cost
    variability is chosen.
    ``jitter_on`` is the fitted loopback link's jitter mode
    (:func:`pubsim.calibration.profile.build_profile`), or ``"auto"``: the
    mode whose simulated training runs have the smaller latency errors
    (:class:`pubsim.calibration.jitter.JitterModeCalibrator`, after the
    cost variability was chosen with ``every_packet``; a link without
    jitter keeps ``every_packet``), recorded in the link's note.
    ``connection_form`` (a form of :data:`pubsim.calibration.fit.CONNECTION_FORMS`,
    ``"auto"`` or None) fits the per-connection cost where the training configurations
    identify it (:func:`pubsim.calibration.terms.busy_identified`); elsewhere
    it is 0, recorded as not identified. ``"auto"`` (default) takes
    ``per_pass`` for a broker that reads one packet per connection per pass
    (``pass_reads`` in :data:`pubsim.calibration.profile.BROKER_MODELS`:
    Mosquitto) and ``per_message`` for the others. Every profile records each term with
    a bootstrap interval over runs (``n_boot`` resamples; 0: none) or the
    reason it is not identified, as its top-level ``fit_terms`` mapping
    (:func:`pubsim.calibration.terms.terms_record`). With ``idle_exit_on``
    and an idle-exit curve measured on the campaign's machine (``meta``'s
    ``idle_exit``, :func:`idle_exit_preset`), every broker carries it and
    the loopback link is fitted on the simulated broker path
    (:class:`pubsim.calibration.fit.LatencyFloorCalibrator`'s ``path``).
    With ``length_bytes``, a broker that reads MQTT remaining lengths byte
    by byte (Mosquitto 2.0) gets ``length_byte_cost_s`` where the training
    payloads identify it (:func:`_identified`). With ``speed_drift``
    (default), each broker's speed drift is fitted to the throttled-period
    fractions of its sustainable capped training runs, loaded at their
    measured CPU (:class:`pubsim.calibration.drift.SpeedDriftCalibrator`, with at most 30
    bootstrap resamples) and carried by its profile (``speed_drift_log_sd``,
    ``speed_drift_time_s``) where the runs identify it. With ``reader_wakes``
    (default False: on mosquitto-readers it made three of five limits worse,
    calibration/README.md, "Readers asleep and the client core"), a copy whose reader slept costs ``reader_wake_cost_s`` more
    where the training runs counted their readers' sleeps and those vary
    (:func:`pubsim.calibration.terms.reader_wakes_identified`); the profile
    then carries ``reader_wake`` (:mod:`pubsim.models.mechanisms.readers`). With
    ``knee_wakeups`` (``method="knee"`` only), the measured wake-ups of the
    runs nearest each limit are taken out of their busy costs
    (:class:`pubsim.calibration.fit.KneeDemandCalibrator`). ``knee_anchor``
    (``method="knee"`` only): ``"runs"`` (default) fits the busy costs on
    those runs' measured CPU; ``"bracket"`` takes a run that spent its whole
    CPU quota as the quota over the middle of its configuration's limit
    bracket (:func:`pubsim.calibration.fit.with_limit_bracket`). ``cpu_tick_s``
    (> 0): every broker's quota is checked at scheduler ticks of that length
    (``BrokerParams.cpu_tick_s``, a fact of the measuring machine's kernel:
    ``CONFIG_HZ``), in every simulation of the fit and in the profile.
    ``copies_in_turn`` (default True): a broker that writes each copy as it
    routes it (:data:`pubsim.calibration.profile.BROKER_MODELS`: Mosquitto)
    sends its copies one after the other in every simulation of the fit and
    in the profile (:mod:`pubsim.models.mechanisms.turns`); False: all at the
    end of the message's service. With ``wake_curve`` (default False) and a
    reader's wake-up measured on the campaign's machine after pauses of
    several lengths (``meta``'s ``idle_exit`` ``wake_idle_s``,
    :func:`pubsim.calibration.wakecurve.machine_wake_shape`), a wake-up costs
    more the longer the broker idled: its cost is regressed on each run's
    wake-ups times that shape at the run's mean idle per wake-up; the profile
    carries ``wake_curve`` (:class:`pubsim.models.params.idle.WakeCurveParams`).
    With ``wake_work`` too (and ``method="knee"``), a full wake-up also adds
    a share of the message's busy demand (``wake_work_share``, fitted), on
    the message's path. Both are off by default: on the committed campaigns
    they help some and hurt others (calibration/README.md, "A wake-up costs
    more the longer the broker idled").
    With ``heap_trim`` (default) a broker whose allocator gives large
    messages' memory back after each one (``heap_trim`` in
    :data:`pubsim.calibration.profile.BROKER_MODELS`: Mosquitto) gets a cost
    per page it faults in again, ``heap_fault_cost_s``, fitted with its
    busy costs where a training payload faults pages (the pages follow from
    its design, :mod:`pubsim.calibration.heapfit`), and the profile carries
    ``heap_trim`` (:class:`pubsim.models.params.heap.HeapTrimParams`).

    Returns
    -------
    dict
        broker kind -> profile mapping (:func:`pubsim.calibration.profile.build_profile`).
    """
    if jitter_on not in (*JITTER_ON, "auto"):
        raise ConfigError("jitter_on", jitter_on, f"one of {', '.join(JITTER_ON)} or auto")
    if knee_wakeups and method != "knee":
        raise ConfigError("knee_wakeups", knee_wakeups, f'False with method="{method}" (it sets the knee fit)')
    if knee_anchor != "runs" and method != "knee":
        raise ConfigError("knee_anchor", knee_anchor, f'"runs" with method="{method}" (it sets the knee fit)')
    profiles = {}
    # The utilization law D = CPU / messages holds where every message sent was
    # served: an overloaded broker drops (ZeroMQ's high-water mark) or still
    # owes part of what it was sent, so only sustainable runs are fitted.
    if knee_anchor == "bracket":
        runs = with_limit_bracket(runs)
    train = runs[(runs["split"] == split) & (runs["ingress_rate_per_s"] > 0) & runs["sustainable"].astype(bool)]
    calibrator = (
        functools.partial(KneeDemandCalibrator, knee_wakeups=knee_wakeups, knee_anchor=knee_anchor)
        if method == "knee"
        else BrokerDemandCalibrator
    )
    fixed_mode = "every_packet" if jitter_on == "auto" else jitter_on
    idle_exit = idle_exit_preset(meta) if idle_exit_on else None
    machine = pair_machine(meta) if idle_exit is not None else None
    shape = machine_wake_shape(meta) if wake_curve else None
    for kind, rows in train.groupby("broker"):
        check_one_marks(runs[runs["broker"] == kind], what=f"{kind} runs")
        form = _form(connection_form, kind)
        wake = _wake_regressor(rows, kind)
        status = _identified(rows, form, kind, length_bytes=length_bytes, reader_wakes=reader_wakes, heap=heap_trim)
        status["wake_work_share"] = _wake_work_reason(wake_curve, wake_work, shape, method)
        settings = {
            "wake_regressor": wake,
            "fit_per_byte": rows.payload_bytes.nunique() > 1,
            "fit_delivery": rows.fanout.nunique() > 1,
            "fit_background": background,
            "connection_form": form if form and status[CONNECTION_TERMS[form]] is None else None,
            "fit_length_bytes": status["length_byte_cost_s"] is None,
            "fit_filters": status["filter_scan_cost_s"] is None,
            "fit_acks": status["ack_cost_s"] is None,
            "fit_copy_acks": status["copy_ack_cost_s"] is None,
            "fit_reader_wakes": status["reader_wake_cost_s"] is None,
            "wake_curve": None if shape is None else (shape["idle_s"], shape["share"]),
            "fit_wake_work": status["wake_work_share"] is None,
            "heap_rule": heap_rule(kind) if status["heap_fault_cost_s"] is None else None,
        }
        filter_form, exponent, filter_why = _filter_form(calibrator, settings, rows)
        demand = calibrator(**settings, filter_form=filter_form, filter_exponent=exponent).fit(rows)
        facts = _metadata(rows, meta, kind, split, demand, wake)
        base = {
            "name": kind,
            "broker_kind": kind,
            "demand_params": {
                **_within_cap(demand.params_, rows),
                **tick_demand(cpu_tick_s),
                **_reader_copy(rows, demand.params_),
                **({"filter_cost_form": filter_form} if filter_form != "linear" else {}),
                **({"filter_cost_exponent": exponent} if filter_form == "power" else {}),
            },
            "metadata": {
                **facts,
                "connections": _connection_text(demand.params_, status, form),
                **({"filter_form": filter_why} if filter_why else {}),
            },
            "terms": terms_record(demand, rows, status, n_boot=n_boot, seed=seed) if n_boot else None,
            "speed_drift": SpeedDriftCalibrator(seed=seed, n_boot=min(n_boot, 30)).fit(rows) if speed_drift else None,
            "copies_in_turn": copies_in_turn,
            "wake_curve": _wake_curve(shape, demand.params_, meta, f"fitted on {facts['data']}, {len(rows)} runs"),
            "heap_trim": heap_trim_mapping(kind, demand.params_["heap_fault_cost_s"], data=facts["data"])
            if settings["heap_rule"] is not None
            else None,
        }

        def link(cv, rows=rows, demand=demand, base=base):
            path = None
            if idle_exit is not None:  # the broker's path is no longer its demand: simulate it
                bare = build_profile(**base, link_params=_NO_LINK, service_cv=cv, idle_exit=idle_exit)
                path = _simulated_path(bare, seed=seed, pacing=pacing, machine=machine)
            floor = LatencyFloorCalibrator(max_utilization=_LINK_RUNS_UTILIZATION[path is not None]).fit(
                rows, demand_s=demand.path_demand_s(rows), service_cv=cv, path=path
            )
            return floor.params_

        def profile(cv, mode=fixed_mode, link_params=None, base=base, link=link):
            link_params = link(cv) if link_params is None else link_params
            return build_profile(**base, link_params=link_params, service_cv=cv, jitter_on=mode, idle_exit=idle_exit)

        if sleeps_in_kernel(kind) and wake != "idle_fraction" and _simulable(rows):
            first = profile(0.0)  # constant costs, link fitted without a sleep entry
            sleep_s, base["metadata"]["sleep_entry"] = _sleep_entry(
                rows,
                wake,
                lambda row, s, first=first, kind=kind: simulate_run(
                    row,
                    _on_machine(machine, _with_sleep_entry(first, s), kind, row["config"]),
                    seed=seed,
                    pacing=pacing,
                    stalls=stalls,
                )[0],
            )
            base["demand_params"] = {**base["demand_params"], "sleep_entry_s": sleep_s}

        def choose_cv(mode, rows=rows, profile=profile):
            """``(cv, sentence)``: the cost variability chosen with the link's jitter paid as ``mode``."""
            if not variability:
                return 0.0, None
            var = ServiceVariabilityCalibrator(
                simulate=lambda row, cv: simulate_run(row, profile(cv, mode), seed=seed, pacing=pacing, stalls=stalls)[
                    0
                ],
                cv_grid=cv_grid,
            )
            if var.select(rows).empty:  # nothing to choose it on: constant, and the profile says why
                return 0.0, (
                    f"per-message costs constant (cv 0): variability not identified, no training run at "
                    f"{var.min_utilization:.0%}-{var.max_utilization:.0%} utilization that the quota did not throttle"
                )
            var.fit(rows)
            cv = var.params_["service_cv"]
            return cv, (
                f"per-message costs {f'gamma with cv {cv:g}' if cv else 'constant (cv 0)'}, chosen from "
                f"{list(cv_grid)} by simulating {var.params_['n_runs']} training runs at 30-90 % "
                f"utilization (latency quantiles p50/p90/p99, mean |log ratio| "
                f"{var.params_['objective'][cv]:.3g})"
            )

        modes = (fixed_mode,)
        if jitter_on == "auto":
            if link(0.0)["jitter_mean_s"] > 0:
                modes = JITTER_ON
            else:
                base["metadata"]["jitter_choice"] = (
                    "no jitter fitted, so who pays it does not matter (every_packet kept)"
                )
        fits = {}
        for mode in modes:  # each mode with its own cost variability: the two interact under load
            cv, text = choose_cv(mode)
            fits[mode] = (cv, text, link(cv))
        mode = modes[0]
        if len(modes) > 1:
            mode, base["metadata"]["jitter_choice"] = _jitter_mode(
                rows,
                {m: f[0] for m, f in fits.items()},
                lambda row, m, fits=fits, profile=profile, kind=kind: simulate_run(
                    row,
                    _on_machine(machine, profile(fits[m][0], m, fits[m][2]), kind, row["config"]),
                    seed=seed,
                    pacing=pacing,
                    stalls=stalls,
                )[0],
            )
        cv, text, link_params = fits[mode]
        if text:
            base["metadata"]["variability"] = text
        profiles[kind] = profile(cv, mode, link_params)
    return profiles


def _simulable(rows):
    """Do the runs carry what their simulated twin needs (a campaign's run settings)?"""
    return all(c in rows for c in ("duration_s", "warmup_s", "cooldown_s"))


def _with_sleep_entry(profile, sleep_entry_s):
    """``profile`` with its broker's ``sleep_entry_s`` set, s."""
    ((name, fields),) = profile["broker"].items()
    return {**profile, "broker": {name: {**fields, "sleep_entry_s": float(sleep_entry_s)}}}


def _sleep_entry(rows, wake, simulate):
    """``(sleep_entry_s, sentence)``: the event loop's sleep entry fitted on the training runs'
    counted wake-ups (:class:`pubsim.calibration.sleep.SleepEntryCalibrator`)."""
    measured = _measured_wakeups(rows, wake)
    try:
        cal = SleepEntryCalibrator(simulate=simulate).fit(rows, measured)
    except ConfigError as err:
        return 0.0, f"sleep entry not identified ({err.expected}), 0"
    p = cal.params_
    scores = ", ".join(f"{k * 1e6:g} us {v:.3g}" for k, v in p["objective"].items())
    edge = " (the largest candidate: the best may lie beyond)" if p["sleep_entry_s"] == max(p["objective"]) else ""
    what = (
        f"sleep entry {p['sleep_entry_s'] * 1e6:g} us{edge}"
        if p["identified"]
        else "sleep entry not identified (no window improves on none by 0.05), 0"
    )
    return p["sleep_entry_s"], (
        f"{what}: simulated wake-ups per message against the measured voluntary context switches of "
        f"the {p['n_sensitive']} of {p['n_runs']} training runs whose wake-ups a window changes "
        f"(mean |log ratio| by sleep entry: {scores})"
    )


def _measured_wakeups(rows, wake):
    """Each run's wake-ups per ingress message as the fit reads them (``wake``: its regressor),
    a Series on ``rows``' index."""
    if wake == "wakeup_switches":
        return pd.Series(wakeups_of(rows), index=rows.index)
    return rows["wakeups_per_ingress"].clip(0.0, 1.0)


def _on_machine(machine, profile, kind, config):
    return profile if machine is None else machine(profile, kind, config)


def _jitter_mode(rows, cvs, simulate):
    """``(jitter_on, sentence)``: the link's jitter mode chosen on the training runs (:mod:`.jitter`),
    each mode simulated with its own cost variability (``cvs``: mode -> cv)."""
    cal = JitterModeCalibrator(simulate=simulate).fit(rows)
    p = cal.params_
    scores = ", ".join(f"{m} {v:.4g} % (cv {cvs[m]:g})" for m, v in p["objective"].items())
    n = p["n_configs"]
    return p["jitter_on"], (
        f"jitter_on={p['jitter_on']} chosen by simulating {p['n_runs']} sustainable training runs of "
        f"{n} configuration{'s' if n != 1 else ''} with each mode and the cost variability chosen with it "
        f"(sum over p50 and p99 of the mean over configurations of the absolute median latency error: {scores})"
    )


_NO_LINK = {"link_latency_s": 0.0, "jitter_mean_s": 0.0, "jitter_cv": 0.0, "n_runs": 0}

# Runs the link is fitted on: broker utilization up to 0.1 of the cap with the demand standing for the
# path (queueing must be negligible), up to 0.3 over the simulated path (which queues and stalls as the
# twin does). Chosen on the training split of the 2026-11-27 Mosquitto campaign: 0.1 / 0.3 / 0.5 gave
# mean absolute p50 errors of 30 / 6 / 5 % and p99 of 43 / 7 / 7 % over its five one-publisher
# configurations (medians over each one's sustainable runs), and 0.1 left only the 200 msg/s runs,
# whose idle core is the slowest to wake; 0.3, the lighter of the two that fit, is kept.
_LINK_RUNS_UTILIZATION = {False: 0.1, True: 0.3}


def _valid_curve(curve):
    return (
        isinstance(curve, dict) and bool(curve.get("idle_s")) and len(curve["idle_s"]) == len(curve.get("exit_s", ()))
    )


def _pair_curves(meta):
    """``{"broker/config": curve}`` measured before each pair's runs (``meta.json`` ``pair_facts``)."""
    facts = meta.get("pair_facts") or {}
    return {k: f["idle_exit"] for k, f in facts.items() if _valid_curve(f.get("idle_exit"))}


def _exit_mapping(curve, meta, where):
    med = ", ".join(
        f"{i * 1e3:.3g} ms: {e * 1e6:.3g} us" for i, e in zip(curve["idle_s"], curve["exit_s"], strict=True)
    )
    return {
        "idle_s": [float(f"{x:.6g}") for x in curve["idle_s"]],
        "exit_s": [float(f"{x:.6g}") for x in curve["exit_s"]],
        "provenance": {
            "source": "measured",
            "reference": f"calibration/data/{meta.get('campaign', 'campaign')}/meta.json ({where})",
            "date": str(curve.get("date", meta.get("date", ""))),
            "note": f"{curve.get('method', 'measured')}; {curve.get('messages', '?')} messages per pause; "
            f"exit by idle time {med}",
        },
    }


def idle_exit_preset(meta):
    """The broker's ``idle_exit`` mapping from a campaign's ``meta.json``, or None when it was not measured.

    The pointwise median of the curves measured before each pair's runs
    (``pair_facts``: the machine's idle behaviour drifts within a campaign),
    else the one measured when the campaign started (``idle_exit``); by
    :func:`pubsim.calibration.harness.machine.idle_exit_curve`.
    """
    curves = list(_pair_curves(meta).values())
    n = max((len(c["idle_s"]) for c in curves), default=0)
    curves = [c for c in curves if len(c["idle_s"]) == n]
    if curves:
        med = {
            "idle_s": np.median([c["idle_s"] for c in curves], axis=0).tolist(),
            "exit_s": np.median([c["exit_s"] for c in curves], axis=0).tolist(),
            "method": curves[0].get("method", "measured"),
            "messages": curves[0].get("messages", "?"),
            "date": curves[0].get("date", meta.get("date", "")),
        }
        return _exit_mapping(med, meta, f"pair_facts: median of {len(curves)} curves, one before each pair")
    curve = meta.get("idle_exit")
    return _exit_mapping(curve, meta, "idle_exit") if _valid_curve(curve) else None


def pair_machine(meta):
    """``machine(profile, kind, config)`` for :func:`validate`: the profile with the idle-exit curve
    measured just before that pair's runs, where the profile has one and the pair was measured so."""
    curves = _pair_curves(meta)

    def machine(profile, kind, config):
        curve = curves.get(f"{kind}/{config}")
        return profile if curve is None else _with_exit(profile, _exit_mapping(curve, meta, f"pair_facts {config}"))

    return machine


def _with_exit(profile, mapping):
    """``profile`` with its broker's ``idle_exit`` replaced (unchanged if it has none)."""
    ((name, fields),) = profile["broker"].items()
    if "idle_exit" not in fields:
        return profile
    return {**profile, "broker": {name: {**fields, "idle_exit": mapping}}}


def _simulated_path(profile, *, seed, pacing, machine):
    """``path(runs)`` for :class:`LatencyFloorCalibrator`: each run on the twin with zero-latency links
    (and the machine as it was when the run's pair was measured: ``machine``, see :func:`pair_machine`)."""

    def path(runs):
        rows = [
            simulate_run(r, machine(profile, r["broker"], r["config"]), seed=seed, sample=1, pacing=pacing)[0]
            for r in runs.to_dict("records")
        ]
        return pd.DataFrame(rows)

    return path


def _wake_regressor(rows, kind):
    """How the fit reads a run's wake-ups: from its measured switches when every run has them, over
    those of one wake-up for a broker that switches several times per wake-up (``wakeup_switches``
    in :data:`pubsim.calibration.profile.BROKER_MODELS`), else ``1 - U``."""
    if "wakeups_per_ingress" not in rows or not rows.wakeups_per_ingress.notna().all():
        return "idle_fraction"
    return "wakeup_switches" if several_switches_per_wakeup(kind) else "wakeups"


def _form(asked, kind):
    """The connection form fitted for broker ``kind``: ``asked``, or for ``"auto"`` ``per_pass``
    where the broker reads one packet per connection per pass, else ``per_message``."""
    if asked != "auto":
        return asked
    return "per_pass" if pass_reads_reason(kind) is None else "per_message"


def _identified(rows, connection_form, kind, *, length_bytes=True, reader_wakes=False, heap=True):
    """``{term: None or reason}`` for the terms a fit leaves out (see :mod:`pubsim.calibration.terms`).

    ``length_byte_cost_s`` is fitted only for brokers that read the MQTT
    remaining length byte by byte (``length_reads`` in
    :data:`pubsim.calibration.profile.BROKER_MODELS`) and where the training
    configurations identify it (not at all without ``length_bytes``).
    ``pass_cost_s`` (form ``per_pass``) only for a broker that reads one
    packet per connection per pass (``pass_reads``) and where the training
    runs' counted passes vary. ``heap_fault_cost_s`` only with ``heap``, for a
    broker whose allocator gives large buffers back after each message
    (:func:`pubsim.calibration.heapfit.heap_rule`) and where a training
    payload faults pages."""
    not_read = length_reads_reason(kind) if length_bytes else "not fitted: length bytes not asked for"
    no_heap = heap_rule_reason(kind) if heap else "not fitted: heap trimming not asked for"
    counted = {"publishers", "subscribers"} <= set(rows.columns)
    uncounted = "not identified: the runs do not say how many publishers and subscribers"
    unvaried = _filters_reason(rows) or matching_lookup_reason(kind)
    one_qos = _qos_reason(rows)
    terms = {"length_bytes": not_read is None, "filters": unvaried is None, "acks": one_qos is None}
    ids = _busy_ids(rows, **terms, heap=heap_rule(kind) if no_heap is None else None) if counted else {}
    status = {"length_byte_cost_s": not_read or (ids["length_byte_cost_s"] if counted else uncounted)}
    status["filter_scan_cost_s"] = unvaried or (ids["filter_scan_cost_s"] if counted else uncounted)
    status["ack_cost_s"] = one_qos or (ids["ack_cost_s"] if counted else uncounted)
    status["copy_ack_cost_s"] = one_qos or (ids["copy_ack_cost_s"] if counted else uncounted)
    status["heap_fault_cost_s"] = no_heap or (ids["heap_fault_cost_s"] if counted else uncounted)
    status["reader_wake_cost_s"] = (
        reader_wakes_identified(rows) if reader_wakes else "not fitted: reader wakes not asked for"
    )
    if rows.payload_bytes.nunique() < 2:
        status["per_byte_cost_s"] = f"not identified: one payload size ({rows.payload_bytes.iloc[0]} B)"
    if rows.fanout.nunique() < 2:
        status["delivery_cost_s"] = f"not identified: one fan-out ({rows.fanout.iloc[0]}), folded into ingress"
    if connection_form is None:
        reason = "not fitted (connection_form None)"
    elif not counted:
        reason = uncounted
    elif connection_form == "per_pass":
        reason = pass_reads_reason(kind) or passes_identified(rows)
    else:
        reason = ids["connection_cost_s"]
    for form, term in CONNECTION_TERMS.items():
        chosen = connection_form is None or form == connection_form
        status[term] = reason if chosen else f"not fitted (form {connection_form} chosen)"
    return status


def _busy_ids(rows, **terms):
    """:func:`pubsim.calibration.terms.busy_identified` with the copies' handshake packets
    apart where the training runs identify them, else with one cost per packet
    (``copy_ack_cost_s`` then says why and follows ``ack_cost_s``)."""
    split = busy_identified(rows, **terms, copy_acks=True)
    if "copy_ack_cost_s" in split and split["copy_ack_cost_s"] is None and split["ack_cost_s"] is None:
        return split
    joint = busy_identified(rows, **terms)
    why = split.get("copy_ack_cost_s") or split.get("ack_cost_s") or "not fitted"
    return {**joint, "copy_ack_cost_s": f"{why}; the copies' packets cost ack_cost_s"}


def _filter_form(calibrator, settings, rows):
    """``(form, exponent, why)`` of the installed-subscription term
    (:func:`pubsim.calibration.forms.choose_filter_form`); ``("linear", 1.0, None)`` where it is not fitted."""
    if not settings["fit_filters"]:
        return "linear", 1.0, None
    return choose_filter_form(lambda f, e: calibrator(**settings, filter_form=f, filter_exponent=e), rows)


def _qos_reason(rows):
    """None if the training runs differ in MQTT QoS, so that ``ack_cost_s`` may be fitted; else why not."""
    levels = sorted(set(rows["qos"].fillna(0).astype(int))) if "qos" in rows else [0]
    if len(levels) < 2:
        return f"not identified: every training run has QoS {levels[0]} (no handshake packets to tell apart)"
    return None


def _filters_reason(rows):
    """None if the training runs vary their idle subscriptions (``idle_filters``), so that
    ``filter_scan_cost_s`` may be fitted; else why not. Without them, the installed subscriptions of
    the harness's workloads follow its subscribers, and the term would stand in for connections."""
    if "idle_filters" not in rows or rows["idle_filters"].fillna(0).nunique() < 2:
        return "not fitted: the training runs do not vary idle_filters (installed subscriptions follow the subscribers)"
    if not {"topics", "publishers", "subscribers"} <= set(rows.columns):
        return "not identified: the runs do not say their topics, publishers and subscribers"
    return None


def _connection_text(params, status, form):
    term = CONNECTION_TERMS.get(form, "connection_cost_s")
    if status[term]:
        return f"{term} (per-connection cost) {status[term]}: 0"
    if form == "per_pass":
        return f"{term} {params[term] * 1e6:.3g} us per event-loop pass ({CONNECTION_FORMS[form]})"
    per = "message" if form == "per_message" else "wake-up"
    return f"{term} {params[term] * 1e6:.3g} us per client connection per {per} ({CONNECTION_FORMS[form]})"


def client_cores_above_limit(rows, limit_per_s):
    """Cores the load generator's clients used at the lowest failing rate above a measured limit
    (the most over its runs), NaN where not counted.

    ``client_cpu_cores`` where the runs have it (publishers and subscribers), else the subscribers'
    alone (``egress x subscriber_cpu_per_copy_s``, a lower bound). Near the client cores' count
    the limit is the harness's, not the broker's: on mosquitto-readers the 100 subscribers of
    fan-out 100 kept client core 0 0.93-0.96 busy where the broker used 0.76-0.78 of its quota.
    """
    above = rows[(~rows["sustainable"].astype(bool)) & (rows["rate_per_s"] > limit_per_s)]
    if above.empty:
        return math.nan
    above = above[above["rate_per_s"] == above["rate_per_s"].min()]
    if "client_cpu_cores" in above and above["client_cpu_cores"].notna().all():
        cores = above["client_cpu_cores"]
    elif "subscriber_cpu_per_copy_s" in above:
        cores = above["egress_rate_per_s"] * above["subscriber_cpu_per_copy_s"]
    else:
        return math.nan
    return float(cores.max()) if cores.notna().any() else math.nan


def _wake_work_reason(curve, work, shape, method):
    """None if ``wake_work_share`` is fitted (a wake-up curve and its work share asked for, the curve
    measured, and the knee fit); else why not."""
    if not curve:
        return "not fitted: no wake-up curve asked for (the same wake-up whatever the idle)"
    if not work:
        return "not fitted: the wake-up's share of the message's work not asked for (wake_work)"
    if shape is None:
        return (
            "not fitted: the campaign's machine has no measured wake-ups by idle time (meta.json idle_exit wake_idle_s)"
        )
    if method != "knee":
        return f'not fitted: its regressor needs the busy costs first (method="knee", not "{method}")'
    return None


def _wake_curve(shape, params, meta, fitted_on):
    """The broker's ``wake_curve`` mapping (:func:`pubsim.calibration.wakecurve.wake_curve_mapping`), or None."""
    if shape is None:
        return None
    return wake_curve_mapping(shape, params.get("wake_work_share", 0.0), meta, fitted_on=fitted_on)


def _reader_copy(rows, params):
    """``reader_copy_s``: the median of the training runs' measured CPU per copy of their
    subscribers (``subscriber_cpu_per_copy_s``), where a cost per woken copy was fitted; else nothing."""
    if not params.get("reader_wake_cost_s") or "subscriber_cpu_per_copy_s" not in rows:
        return {}
    cpu = rows["subscriber_cpu_per_copy_s"].dropna()
    return {"reader_copy_s": float(cpu.median()), "reader_copy_runs": int(len(cpu))} if len(cpu) else {}


def _within_cap(params, rows):
    """Demand parameters with the background load capped at half the smallest CPU cap:
    a fit that charges more than that to the background is a nuisance term gone wild."""
    limit = 0.5 * float(rows.cpu_cap_fraction.fillna(1.0).min())
    return {**params, "background_cpu_fraction": min(params.get("background_cpu_fraction", 0.0), limit)}


def simulate_run(row, profile, *, seed=0, sample=2000, pacing=None, stalls=None):
    """Simulate one measured run; ``(measurement-style row, latency sample)``.

    ``pacing``: the load generator's measured lateness
    (:class:`pubsim.calibration.pacing.PacingLag`; None: publishers on time);
    ``stalls``: the machine's scheduler-tick stalls on the client links
    (:class:`pubsim.calibration.stalls.TickStalls`; None: none).
    """
    return VirtualHarness({row["broker"]: profile}, seed=seed, sample=sample, pacing=pacing, stalls=stalls)(row)


def _simulated_limit(rows, profile, seed, steps, pacing=None, stalls=None):
    row = rows.iloc[0].to_dict()
    pubs = int(row["publishers"])
    start = rows["rate_per_s"].max()

    def measure(interval_s):
        return simulate_run(
            {**row, "rate_per_s": pubs / interval_s}, profile, seed=seed, sample=1, pacing=pacing, stalls=stalls
        )[0]

    return interval_search(
        measure,
        start_interval_s=pubs / start,
        publishers=pubs,
        steps=steps,
        stop_at_first_failure=True,
        max_doublings=10,
    )


@dataclass(frozen=True)
class Validation:
    """Result of :func:`validate`.

    Attributes
    ----------
    per_pair : DataFrame
        Measured and simulated saturation limit per (broker, config).
    per_run : DataFrame
        Latency or shortfall comparison per measured run.
    simulated_latency : dict
        (broker, config) -> {run: simulated latency sample, s}.
    """

    per_pair: pd.DataFrame
    per_run: pd.DataFrame
    simulated_latency: dict


def validate(
    runs, saturation, latency, profiles, *, seed=0, steps=10, progress=None, pacing=None, stalls=None, machine=None
):
    """Compare simulation with measurement (see the module docstring).

    ``pacing``: the load generator's measured lateness for the simulated
    twin (:class:`pubsim.calibration.pacing.PacingLag`; None: on time);
    ``stalls``: the machine's scheduler-tick stalls on its client links
    (:class:`pubsim.calibration.stalls.TickStalls`; None: none);
    ``machine``: ``machine(profile, kind, config) -> profile``, the machine
    as it was when a pair was measured (:func:`pair_machine`: the idle-exit
    curve measured before its runs); None: every pair with its profile.

    ``progress``: True (or a label) shows a bar of the (broker, config)
    pairs done (tqdm: a widget in Jupyter, text on stderr elsewhere;
    :mod:`pubsim.progress`); a callable gets ``progress(done, total, label)``
    after each pair; None shows nothing.
    """
    with P.steps(progress, desc="validating", unit="config") as notify:
        return _compare(runs, saturation, latency, profiles, seed, steps, notify, pacing, stalls, machine)


def _compare(runs, saturation, latency, profiles, seed, steps, progress, pacing=None, stalls=None, machine=None):
    pairs, per_run, samples = [], [], {}
    groups = [(k, g) for k, g in runs.groupby(["broker", "config"], sort=False) if k[0] in profiles]
    sat = saturation.set_index(["broker", "config"])
    for done, ((kind, config), rows) in enumerate(groups):
        profile = profiles[kind] if machine is None else machine(profiles[kind], kind, config)
        samples[(kind, config)] = {}
        meas_limit = sat.loc[(kind, config), "limit_rate_per_s"]
        sim = _simulated_limit(rows, profile, seed, steps, pacing, stalls)
        split = rows["split"].iloc[0]
        pairs.append(
            {
                "broker": kind,
                "config": config,
                "split": split,
                "measured_limit_per_s": meas_limit,
                "simulated_limit_per_s": sim.rate_per_s,
                "saturation_error_pct": _pct(sim.rate_per_s, meas_limit),
                "client_cores_above_limit": client_cores_above_limit(rows, meas_limit),
            }
        )
        wake = _wake_regressor(rows, kind)
        woke = _measured_wakeups(rows, wake) if wake != "idle_fraction" else pd.Series(math.nan, index=rows.index)
        for i, r in rows.iterrows():
            summ, lat_sim = simulate_run(r.to_dict(), profile, seed=seed, pacing=pacing, stalls=stalls)
            samples[(kind, config)][r["run"]] = lat_sim
            lat_meas = latency[(latency.broker == kind) & (latency.config == config) & (latency.run == r["run"])][
                "latency_s"
            ].to_numpy(dtype=float)
            rec = {
                "broker": kind,
                "config": config,
                "split": split,
                "run": r["run"],
                "phase": r["phase"],
                "rate_per_s": r["rate_per_s"],
                "below_saturation": bool(r["sustainable"]),
                "measured_egress_per_s": r["egress_rate_per_s"],
                "simulated_egress_per_s": summ["egress_rate_per_s"],
            }
            if rec["below_saturation"]:  # CPU per ingress message (utilization law), simulated vs measured
                rec["demand_error_pct"] = _pct(summ["demand_s_per_ingress"], r["demand_s_per_ingress"])
            passes = r.get("broker_passes_per_ingress", math.nan)
            if not (math.isnan(passes) or math.isnan(summ["broker_passes_per_ingress"])):
                rec["measured_passes_per_ingress"] = passes  # counted by perf, simulated as I/O cycles
                rec["simulated_passes_per_ingress"] = summ["broker_passes_per_ingress"]
            if not math.isnan(woke[i]):  # as the fit reads the counted switches, and the twin's charged ones
                rec["measured_wakeups_per_ingress"] = woke[i]
                rec["simulated_wakeups_per_ingress"] = summ["wakeups_per_ingress"]
            sleeps = r.get(READER_SLEEPS, math.nan), summ[READER_SLEEPS]
            if not any(math.isnan(x) for x in sleeps):  # the readers' counted sleeps, and the twin's woken copies
                rec["measured_sleeps_per_copy"], rec["simulated_sleeps_per_copy"] = sleeps
            thr = r.get("cap_throttled_period_fraction", math.nan), summ["cap_throttled_period_fraction"]
            if not any(math.isnan(x) for x in thr):  # cgroup nr_throttled / nr_periods, and the twin's
                rec["measured_throttled_fraction"], rec["simulated_throttled_fraction"] = thr
            if rec["below_saturation"] and lat_meas.size and lat_sim.size:
                for q in ("p50", "p90", "p99"):
                    m, s = r[f"latency_{q}_s"], summ[f"latency_{q}_s"]
                    rec.update({f"measured_{q}_s": m, f"simulated_{q}_s": s, f"{q}_error_pct": _pct(s, m)})
                for q in ("p50", "p99"):  # the same against the interval of the two stamp estimates
                    a = r.get(f"latency_any_{q}_s", math.nan)
                    rec[f"measured_any_{q}_s"] = a
                    rec[f"{q}_bracket_error_pct"] = bracket_error_pct(summ[f"latency_{q}_s"], r[f"latency_{q}_s"], a)
                rec["ks_distance"] = float(ks_2samp(lat_meas, lat_sim).statistic)
            else:
                rec.update(
                    {
                        "measured_shortfall": 1 - r["delivery_ratio"],
                        "simulated_shortfall": 1 - summ["delivery_ratio"],
                        "shortfall_error_pp": 100 * ((1 - summ["delivery_ratio"]) - (1 - r["delivery_ratio"])),
                        "loss_error_pp": 100 * (summ["loss_rate"] - r.get("loss_rate", 0.0)),
                        "simulated_sustainable": is_sustainable(summ),
                    }
                )
            per_run.append(rec)
        if progress is not None:
            progress(done + 1, len(groups), f"{kind}__{config}")
    return Validation(pd.DataFrame(pairs), pd.DataFrame(per_run), samples)
