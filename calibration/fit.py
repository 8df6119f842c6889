"""Calibrators in the scikit-learn style: settings in the constructor,
``fit(measurements)`` sets ``params_`` and ``residuals_``, nothing hidden.

Measurements are a tidy table, one row per measured run, with at least:

``broker``, ``payload_bytes``, ``fanout``, ``cpu_cap_fraction`` (NaN or 1 =
one whole core), ``ingress_rate_per_s``, ``egress_rate_per_s``,
``demand_s_per_ingress`` (broker CPU seconds per ingress message, by the
utilization law); for the latency floor ``latency_p01_s``,
``latency_p50_s``, ``latency_p90_s``; for the knee fit ``config``;
optionally ``wakeups_per_ingress`` (voluntary context switches per ingress
message); for a per-connection term ``publishers`` and ``subscribers``.

Broker demand model (see :mod:`pubsim.models.params.broker`)::

    demand per ingress message = ingress + fanout * delivery
                                 + payload * (1 + fanout) * per_byte
                                 [+ extra length bytes * length_byte]
                                 + idle_wakeup * P(worker idle at arrival)
                                 [+ installed subscriptions * filter_scan]

The last term is what makes CPU per message fall with load (issue #3:
Mosquitto ~21 us at 1k msg/s, ~8 us at 40k msg/s): an event-loop broker
pays a wake-up per message when idle. ``P(idle at arrival)`` is estimated per
run either as ``1 - U`` with ``U = ingress_rate * demand / cap`` (PASTA) or,
with ``wake_regressor="wakeups"``, as the measured voluntary context switches
per ingress message (at most 1), or, with ``"wakeup_switches"``, as those
over the switches of one wake-up (:func:`wakeups_of`). An optional fifth
term ``background / rate`` absorbs a constant background CPU load, and an optional sixth term charges each
client connection of the broker (:data:`CONNECTION_FORMS`, issue 18). With
``fit_length_bytes``, the bytes of the MQTT remaining-length field beyond the
first (:func:`pubsim.models.protocol.mqtt_length_bytes`: 0 below 128 B of
remaining length, 1 below 16 KiB, 2 below 2 MiB) are a regressor of their
own: Mosquitto 2.0 reads each with its own ``read`` system call, a step in
cost with the payload that a per-byte term spreads over every byte (on the
2026-11-27 Mosquitto campaigns it charged a 1 KiB message 21 % too little and
a 32 KiB one 50-74 % too much). The fitted step holds whatever changes at
those sizes: it came out at 2.8-2.9 us, seven times a warm 1-byte ``recv``
on the same machine (calibration/README.md, "Message size"). The topic length comes from a
``topic_bytes`` column or, without one, the harness's topic names
(:func:`pubsim.calibration.workload.topic_name`). With ``fit_filters``, the
subscriptions installed at the broker (:func:`filters_of`: the workload's
and a run's ``idle_filters``) are the regressor of ``filter_scan_cost_s``,
fitted only on runs that vary their idle subscriptions. The model is linear in its costs, so they are fitted
by non-negative least squares (Lawson & Hanson 1974, ``scipy.optimize.nnls``)
with rows weighted by 1 / demand (relative errors).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import brentq, nnls
from scipy.stats import gamma

from ..models.mechanisms.qos.rules import handshake_packets
from ..models.params.broker import FILTER_FORMS, filter_load
from ..models.protocol import mqtt_length_bytes
from ..sim.errors import ConfigError
from .workload import installed_filters, topic_name

__all__ = [
    "BrokerDemandCalibrator",
    "LatencyFloorCalibrator",
    "REQUIRED_COLUMNS",
    "CONNECTION_FORMS",
    "CONNECTION_TERMS",
    "connections_of",
    "wakeups_of",
    "reader_wakes_of",
    "READER_SLEEPS",
    "filters_of",
    "acks_of",
    "copy_acks_of",
    "ack_columns",
    "WAKE_REGRESSORS",
    "extra_length_bytes_of",
    "HARNESS_TOPIC_BYTES",
    "KNEE_ANCHORS",
    "with_limit_bracket",
    "bracket_scale",
]

REQUIRED_COLUMNS = ("payload_bytes", "fanout", "ingress_rate_per_s", "demand_s_per_ingress")
COSTS = (
    "ingress_cost_s",
    "delivery_cost_s",
    "per_byte_cost_s",
    "idle_wakeup_cost_s",
    "background_cpu_fraction",
    "connection_cost_s",
    "connection_wakeup_cost_s",
    "length_byte_cost_s",
    "pass_cost_s",
    "filter_scan_cost_s",
    "ack_cost_s",
    "copy_ack_cost_s",
    "reader_wake_cost_s",
    "wake_work_share",
    "heap_fault_cost_s",
)
#: Paid by a busy broker too.
BUSY = (
    "ingress_cost_s",
    "delivery_cost_s",
    "per_byte_cost_s",
    "connection_cost_s",
    "length_byte_cost_s",
    "pass_cost_s",
    "filter_scan_cost_s",
    "ack_cost_s",
    "copy_ack_cost_s",
    "reader_wake_cost_s",
    "heap_fault_cost_s",
)
#: Topic name length of the harness's runs, bytes ("pubsim/t0"; t10 and above are a byte longer).
HARNESS_TOPIC_BYTES = len(topic_name(0))
#: Forms of the per-connection term (issue 18): its regressor per ingress message.
CONNECTION_FORMS = {
    "per_message": "client connections (publishers + subscribers): every message costs each connection",
    "per_wakeup": "client connections x wake-ups per message: a wake-up costs each connection",
    "per_pass": (
        "event-loop passes per message (measured, broker_passes_per_ingress): a pass's fixed work is "
        "shared by the messages read in it, one per ready connection (Mosquitto's src/mux_epoll.c)"
    ),
}
#: The fitted parameter of each form.
CONNECTION_TERMS = {
    "per_message": "connection_cost_s",
    "per_wakeup": "connection_wakeup_cost_s",
    "per_pass": "pass_cost_s",
}
#: Column of the subscribers' sleeps per copy (voluntary switches per message read, :mod:`pubsim.calibration.harness.loadgen`).
READER_SLEEPS = "subscriber_sleeps_per_copy"
#: Column of the broker's event-loop passes per ingress message (:mod:`pubsim.calibration.harness.passes`).
PASSES = "broker_passes_per_ingress"


def passes_of(measurements):
    """Event-loop passes per ingress message of each run: the counted ones
    (``broker_passes_per_ingress``), else 1 for a run with one publisher
    (one packet per connection per pass: counted 1.000 at every rate,
    calibration/README.md, "Loop passes, counted"), else NaN (not known)."""
    m = measurements
    one = m["publishers"].to_numpy(dtype=float) == 1
    counted = m[PASSES].to_numpy(dtype=float) if PASSES in m else np.full(len(m), np.nan)
    return np.where(np.isnan(counted) & one, 1.0, counted)


def connections_of(measurements):
    """Client connections of the broker per run (publishers + subscribers)."""
    m = measurements
    return m["publishers"].to_numpy(dtype=float) + m["subscribers"].to_numpy(dtype=float)


def relative_nnls(x, y, names):
    """Non-negative least squares on relative errors: minimize sum(((x @ c - y) / y)^2), c >= 0.

    Parameters
    ----------
    x : ndarray, shape (runs, terms)
        Regressors per run (per ingress message).
    y : ndarray, shape (runs,)
        Measured CPU demand per ingress message, s.
    names : list of str
        The terms' names, for the error when there are fewer runs than terms.

    Returns
    -------
    ndarray
        The fitted non-negative coefficients (Lawson & Hanson 1974, ``scipy.optimize.nnls``).
    """
    if len(y) < x.shape[1]:
        raise ConfigError("measurements", f"{len(y)} runs", f"at least {x.shape[1]} runs for {names}")
    w = 1.0 / np.maximum(y, 1e-12)
    coef, _ = nnls(x * w[:, None], y * w)
    return coef


def spread_over_rates(measurements, max_runs):
    """At most ``max_runs`` runs of each configuration, spread evenly over its offered rates
    (lightest and heaviest included), configurations in order of appearance."""
    picked = []
    for _, rows in measurements.groupby("config", sort=False):
        rows = rows.sort_values("rate_per_s")
        idx = np.unique(np.linspace(0, len(rows) - 1, min(max_runs, len(rows))).round().astype(int))
        picked.append(rows.iloc[idx])
    return pd.concat(picked) if picked else measurements


def reader_wakes_of(measurements):
    """Copies per ingress message whose reader slept when the broker wrote them (NaN: not counted).

    ``fanout x`` the subscribers' measured sleeps per copy (:data:`READER_SLEEPS`,
    clipped to [0, 1]): a reader that sleeps between copies is woken by each
    write, and on loopback the waking runs in the broker's context
    (:mod:`pubsim.models.params.readers`).
    """
    m = measurements
    if READER_SLEEPS not in m:
        return np.full(len(m), np.nan)
    sleeps = np.clip(m[READER_SLEEPS].to_numpy(dtype=float), 0.0, 1.0)
    return m["fanout"].to_numpy(dtype=float) * sleeps


def wake_idle_of(measurements, wakes):
    """Mean time the broker idled before each wake-up of each run, s.

    The broker's core was idle ``1 - rate x demand`` of each second (its
    measured CPU, in cores), and woke ``rate x wakes`` times a second, so
    each wake-up followed ``(1 - rate x demand) / (rate x wakes)`` seconds
    of idle on average (NaN where no wake-up was counted). For evenly paced
    arrivals that is the gap between messages less a message's work; with
    batches or quota stalls it is longer than that gap.

    Parameters
    ----------
    measurements : pandas.DataFrame
        ``ingress_rate_per_s`` and ``demand_s_per_ingress``.
    wakes : numpy.ndarray
        Wake-ups per ingress message of each run (the fit's wake regressor).
    """
    m = measurements.reset_index(drop=True)
    rate = m["ingress_rate_per_s"].to_numpy(dtype=float)
    busy = rate * m["demand_s_per_ingress"].to_numpy(dtype=float)
    per_s = rate * np.asarray(wakes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(per_s > 0, np.clip(1.0 - busy, 0.0, None) / per_s, np.nan)


def heap_pages_of(measurements, rule):
    """Pages each run's messages fault in again after the allocator trimmed its heap, the regressor
    of ``heap_fault_cost_s``: ``rule.pages`` of the run's payload
    (:class:`pubsim.models.params.heap.HeapTrimParams`, :func:`pubsim.calibration.heapfit.heap_rule`)."""
    payload = measurements["payload_bytes"].to_numpy(dtype=float)
    return np.asarray(rule.pages(payload), dtype=float)


def _check(measurements, columns):
    if not isinstance(measurements, pd.DataFrame):
        raise ConfigError("measurements", type(measurements).__name__, "a pandas DataFrame, one row per run")
    missing = [c for c in columns if c not in measurements.columns]
    if missing:
        raise ConfigError(f"measurements.{missing[0]}", None, f"a column (needed: {list(columns)})")
    if len(measurements) == 0:
        raise ConfigError("measurements", "0 runs", "at least one run")


def extra_length_bytes_of(measurements):
    """Bytes of each run's PUBLISH remaining-length field beyond the first (QoS 0 sizes).

    The topic length is the ``topic_bytes`` column, or :data:`HARNESS_TOPIC_BYTES` without one.
    """
    m = measurements
    topic = m["topic_bytes"].to_numpy(dtype=float) if "topic_bytes" in m else HARNESS_TOPIC_BYTES
    payload = m["payload_bytes"].to_numpy(dtype=float)
    return (mqtt_length_bytes(payload.astype(np.int64), np.asarray(topic).astype(np.int64)) - 1).astype(float)


def cap_of(measurements):
    """CPU available to the broker per run, in cores (NaN cap = one core)."""
    if "cpu_cap_fraction" not in measurements:
        return np.ones(len(measurements))
    return measurements["cpu_cap_fraction"].fillna(1.0).to_numpy(dtype=float)


#: How the fit estimates the probability that a message finds the broker idle (``wake_regressor``).
WAKE_REGRESSORS = ("idle_fraction", "wakeups", "wakeup_switches")


def filters_of(measurements):
    """Subscriptions installed at the broker in each run (:func:`pubsim.calibration.workload.installed_filters`).

    The regressor of ``filter_scan_cost_s``: a broker that matched every
    message against each installed subscription would pay it per
    subscription (``BrokerParams.filter_scan_cost_s``). Mosquitto, whose
    matching is a lookup per topic level, showed none; NATS, whose matching
    is a lookup too, paid more through its garbage collector, concavely
    (calibration/README.md, "Installed subscriptions nobody publishes to").
    """
    m = measurements.reset_index(drop=True)
    return np.array([installed_filters(r) for r in m.to_dict("records")], dtype=float)


def acks_of(measurements):
    """QoS handshake packets the broker handles per ingress message of each run, the regressor of
    ``ack_cost_s``: those of the publication's exchange and of each of its ``fanout`` copies, at the
    run's ``qos`` (:func:`pubsim.models.mechanisms.qos.rules.handshake_packets`: 0, 1 PUBACK, or
    PUBREC + PUBREL + PUBCOMP), as the simulated broker charges them
    (:func:`pubsim.models.mechanisms.qos.build.broker_handshakes`)."""
    m = measurements.reset_index(drop=True)
    return _handshakes(m) * (1.0 + m["fanout"].to_numpy(dtype=float))


def copy_acks_of(measurements):
    """The share of :func:`acks_of` that the exchanges with the ``fanout`` copies' receivers
    handle per ingress message, the regressor of ``copy_ack_cost_s`` (the rest,
    ``handshake_packets(qos)``, is the publisher's exchange)."""
    m = measurements.reset_index(drop=True)
    return _handshakes(m) * m["fanout"].to_numpy(dtype=float)


def ack_columns(measurements, *, apart):
    """The regressors of ``ack_cost_s`` and ``copy_ack_cost_s`` per run: with ``apart``, the
    publisher's exchange (``handshake_packets(qos)``) and the copies' (:func:`copy_acks_of`);
    else every packet (:func:`acks_of`) and zeros."""
    m = measurements.reset_index(drop=True)
    if not apart:
        return acks_of(m), np.zeros(len(m))
    return _handshakes(m), copy_acks_of(m)


def _handshakes(m):
    qos = m["qos"].fillna(0).to_numpy(dtype=int) if "qos" in m else np.zeros(len(m), dtype=int)
    return handshake_packets(qos).astype(float)


def wakeups_of(measurements, *, min_reference=1.0):
    """Wake-ups per ingress message of each run, from its voluntary context switches.

    A broker whose threads hand a message on switches several times per
    wake-up: nats-server's read loop, its flush of the outbound buffers and
    the Go netpoller; libzmq's I/O thread and the proxy's own (the brokers
    with ``wakeup_switches`` in
    :data:`pubsim.calibration.profile.BROKER_MODELS`). At a configuration's
    lightest load every message wakes such a broker, so its switches per
    message there, ``w_ref``, are those of one wake-up, and a run's
    wake-ups per message are ``w / w_ref``, clipped to [0, 1] (``w_ref`` at
    least ``min_reference``; NaN where it was not measured; without a
    ``config`` column, the switches clipped to [0, 1]). Measured
    (calibration/README.md, "A wake-up is three context switches"): NATS
    and the ZeroMQ proxy 2.3-3.3 switches
    per message at 200 msg/s, Mosquitto 1.0; uncapped, NATS spent 39-47 us
    per switch from 1,000 to 16,000 msg/s while its switches per message
    fell from 3.0 to 0.19. Read as a probability capped at 1, three
    switches per wake-up counted every message of a NATS run at 4,000
    msg/s as a wake-up where a quarter were, and the fitted wake-up cost
    came out at 34 us where one wake-up cost 120-140 us.

    Not for a runtime whose own schedulers switch whether or not messages
    come (Erlang's, a JVM's: RabbitMQ switched 1,400 times per second at
    200 msg/s, ejabberd 3,900): there the switches at the lightest load are
    not one message's.
    """
    m = measurements.reset_index(drop=True)
    w = m["wakeups_per_ingress"].to_numpy(dtype=float)
    if "config" not in m:
        return np.clip(w, 0.0, 1.0)
    rate = m["ingress_rate_per_s"].to_numpy(dtype=float)
    lightest = m.groupby("config")["ingress_rate_per_s"].transform("min").to_numpy(dtype=float)
    ref = pd.Series(np.where(rate == lightest, w, np.nan)).groupby(m["config"]).transform("max").to_numpy(dtype=float)
    return np.clip(w / np.maximum(ref, min_reference), 0.0, 1.0)


class BrokerDemandCalibrator:
    """Fit the per-message CPU demand of one broker from measured runs.

    Parameters
    ----------
    wake_regressor : {"idle_fraction", "wakeups", "wakeup_switches"}
        How P(worker idle at arrival) is estimated per run (module
        docstring): ``1 - U``; the switches per message capped at 1; or the
        switches per message over those of one wake-up (:func:`wakeups_of`).
    fit_per_byte : bool
        Fit the per-byte cost (needs runs with different payload sizes).
    fit_delivery : bool
        Fit the per-delivery cost separately (needs different fan-outs);
        otherwise delivery cost is folded into the ingress cost at the
        fan-out of the data.
    fit_background : bool
        Also fit a background CPU load ``B`` (CPU s per s: timers, runtime
        housekeeping, ``$SYS`` updates) that adds ``B / rate`` to the demand
        per message; without it, the inflated demand of the slowest runs is
        wrongly charged to the per-message costs.
    connection_form : str or None
        Also fit a per-connection cost in this form (a key of
        :data:`CONNECTION_FORMS`: ``connection_cost_s`` per message,
        ``connection_wakeup_cost_s`` per wake-up, or ``pass_cost_s`` per
        event-loop pass, :data:`CONNECTION_TERMS`; needs runs with
        different numbers of connections that are not a combination of the
        other terms' columns, or, per pass, runs with different counted
        passes per message, :func:`passes_of`, the runs whose passes are not
        known left out); None (default): not fitted, 0.
    fit_length_bytes : bool
        Also fit ``length_byte_cost_s``, the cost per MQTT remaining-length
        byte beyond the first (module docstring; needs payload sizes on
        both sides of a step, 128 B or 16 KiB, besides those that identify
        the per-byte cost). Default False: 0.

    fit_filters : bool
        Also fit ``filter_scan_cost_s``, the cost per installed subscription
        per ingress message (:func:`filters_of`: the workload's and the
        run's ``idle_filters``; needs training configurations with different
        counts). Default False: 0.
    filter_form : str
        How that cost grows with the installed subscriptions
        (:func:`pubsim.models.params.broker.filter_load`): ``linear``
        (default), ``log`` or ``power``;
        :func:`pubsim.calibration.forms.choose_filter_form` picks one by
        leave-one-configuration-out error.
    filter_exponent : float
        The ``power`` form's exponent, in (0, 1]; 1 (default) otherwise.
    fit_acks : bool
        Also fit ``ack_cost_s``, the cost per MQTT QoS handshake packet
        (:func:`acks_of`: a run's ``qos`` exchanges on the way in and on each
        copy; needs training runs at different QoS). Default False: 0.
    fit_copy_acks : bool
        With ``fit_acks``, fit the copies' packets apart: ``copy_ack_cost_s``
        on :func:`copy_acks_of`, and ``ack_cost_s`` on the publisher's
        exchange only (needs training runs at QoS > 0 with different
        fan-outs). Default False: the copies' packets cost ``ack_cost_s``
        (``copy_ack_cost_s`` is set to it).
    fit_reader_wakes : bool
        Also fit ``reader_wake_cost_s``, the cost of a copy whose reader
        slept when the broker wrote it, on :func:`reader_wakes_of` (needs the
        subscribers' sleeps per copy, counted by the harness since
        2026-12-02, varying between runs apart from the fan-out). Default
        False: 0.
    wake_curve : tuple of (idle times, shares) or None
        The shape of a wake-up's cost by the idle time before it
        (:class:`pubsim.models.params.idle.WakeCurveParams`, points through
        ``(0, 0)``, flat after the last): the wake regressor of each run is
        multiplied by the share at its mean idle per wake-up
        (:func:`wake_idle_of`), so that ``idle_wakeup_cost_s`` is the
        wake-up after a long idle. None (default): the same cost whatever
        the idle.
    heap_rule : HeapTrimParams or None
        Also fit ``heap_fault_cost_s``, the cost per page a message faults in
        again after the broker's allocator trimmed its heap, on the pages
        this rule gives each run's payload (:func:`heap_pages_of`; needs a
        training payload that faults pages). Default None: 0.
    fit_wake_work : bool
        With ``wake_curve``, also fit ``wake_work_share``: the share of a
        message's busy demand that a full wake-up adds (its regressor is the
        scaled wake regressor times the fitted busy demand, so only the
        two-stage :class:`KneeDemandCalibrator` fits it). Default False: 0.

    Attributes
    ----------
    params_ : dict
        ``ingress_cost_s``, ``delivery_cost_s``, ``per_byte_cost_s``,
        ``idle_wakeup_cost_s``, ``background_cpu_fraction``,
        ``connection_cost_s``, ``connection_wakeup_cost_s``,
        ``length_byte_cost_s`` (s, s, s/byte, s, cores, s, s, s) and ``n_runs``.
    residuals_ : pandas.Series
        Measured minus fitted demand per run, s.
    """

    def __init__(
        self,
        *,
        wake_regressor="idle_fraction",
        fit_per_byte=True,
        fit_delivery=True,
        fit_background=False,
        connection_form=None,
        fit_length_bytes=False,
        fit_filters=False,
        filter_form="linear",
        filter_exponent=1.0,
        fit_acks=False,
        fit_copy_acks=False,
        fit_reader_wakes=False,
        wake_curve=None,
        fit_wake_work=False,
        heap_rule=None,
    ):
        if wake_regressor not in WAKE_REGRESSORS:
            raise ConfigError("wake_regressor", wake_regressor, f"one of {', '.join(WAKE_REGRESSORS)}")
        if connection_form is not None and connection_form not in CONNECTION_FORMS:
            raise ConfigError("connection_form", connection_form, f"None or one of {sorted(CONNECTION_FORMS)}")
        if filter_form not in FILTER_FORMS:
            raise ConfigError("filter_form", filter_form, f"one of {', '.join(FILTER_FORMS)}")
        if not 0 < filter_exponent <= 1:
            raise ConfigError("filter_exponent", filter_exponent, "an exponent in (0, 1]")
        self.wake_regressor = wake_regressor
        self.fit_per_byte = fit_per_byte
        self.fit_delivery = fit_delivery
        self.fit_background = fit_background
        self.connection_form = connection_form
        self.fit_length_bytes = fit_length_bytes
        self.fit_filters = fit_filters
        self.filter_form = filter_form
        self.filter_exponent = filter_exponent
        self.fit_acks = fit_acks
        self.fit_copy_acks = fit_acks and fit_copy_acks
        self.fit_reader_wakes = fit_reader_wakes
        if fit_wake_work and wake_curve is None:
            raise ConfigError("fit_wake_work", fit_wake_work, "False without a wake_curve (it scales the curve)")
        if fit_wake_work and not self._two_stage:
            raise ConfigError("fit_wake_work", fit_wake_work, "False outside the knee fit (KneeDemandCalibrator)")
        self.wake_curve = wake_curve
        self.fit_wake_work = fit_wake_work
        self.heap_rule = heap_rule

    #: Fits the busy costs before the wake-ups (:class:`KneeDemandCalibrator`).
    _two_stage = False

    def _wakes(self, m, demand):
        """Wake-ups per ingress message of each run, as the wake regressor estimates them."""
        if self.wake_regressor == "wakeup_switches":
            return wakeups_of(m)
        if self.wake_regressor == "wakeups":
            return np.clip(m["wakeups_per_ingress"].to_numpy(dtype=float), 0.0, 1.0)
        busy = m["ingress_rate_per_s"].to_numpy(dtype=float) * demand / cap_of(m)
        return np.clip(1.0 - busy, 0.0, 1.0)

    def wake_share_of(self, measurements, wakes):
        """Share of the full wake-up each run's ``wakes`` (wake-ups per ingress message,
        :meth:`_wakes`) pay: :attr:`wake_curve` at :func:`wake_idle_of`; 1 without a curve or
        where no wake-up was counted."""
        m = measurements.reset_index(drop=True)
        if self.wake_curve is None:
            return np.ones(len(m))
        idle_s, share = self.wake_curve
        out = np.interp(wake_idle_of(m, wakes), (0.0, *idle_s), (0.0, *share))
        return np.where(np.isnan(out), 1.0, out)

    def _design(self, m):
        fanout = m["fanout"].to_numpy(dtype=float)
        payload = m["payload_bytes"].to_numpy(dtype=float)
        demand = m["demand_s_per_ingress"].to_numpy(dtype=float)
        wakes = self._wakes(m, demand)
        idle = wakes * self.wake_share_of(m, wakes)
        rate = m["ingress_rate_per_s"].to_numpy(dtype=float)
        conn = connections_of(m) if self.connection_form is not None else np.zeros_like(fanout)
        form = self.connection_form
        length = extra_length_bytes_of(m) if self.fit_length_bytes else np.zeros_like(fanout)
        passes = passes_of(m) if form == "per_pass" else np.zeros_like(fanout)
        filters = self._filter_load(filters_of(m)) if self.fit_filters else np.zeros_like(fanout)
        zeros = (np.zeros_like(fanout), np.zeros_like(fanout))
        acks, copy_acks = ack_columns(m, apart=self.fit_copy_acks) if self.fit_acks else zeros
        readers = reader_wakes_of(m) if self.fit_reader_wakes else np.zeros_like(fanout)
        cols = [
            np.ones_like(fanout),
            fanout,
            payload * (1 + fanout),
            idle,
            1.0 / rate,
            conn,
            conn * idle,
            length,
            passes,
            filters,
            acks,
            copy_acks,
            readers,
            idle,  # times the busy demand: _with_wake_work
            heap_pages_of(m, self.heap_rule) if self.heap_rule is not None else np.zeros_like(fanout),
        ]
        keep = [True, self.fit_delivery, self.fit_per_byte, True, self.fit_background]
        keep += [form == "per_message", form == "per_wakeup", self.fit_length_bytes, form == "per_pass"]
        keep += [self.fit_filters, self.fit_acks, self.fit_copy_acks, self.fit_reader_wakes, self.fit_wake_work]
        keep += [self.heap_rule is not None]
        return np.column_stack([c for c, k in zip(cols, keep) if k]), [n for n, k in zip(COSTS, keep) if k]

    @staticmethod
    def _with_wake_work(x, names, coef):
        """``x`` with the ``wake_work_share`` column (holding each run's scaled wake-ups) times
        each run's busy demand under ``coef``; ``x`` itself where that term is not fitted."""
        if "wake_work_share" not in names:
            return x
        j = names.index("wake_work_share")
        busy = [i for i, n in enumerate(names) if n in BUSY]
        out = x.copy()
        out[:, j] = x[:, j] * (x[:, busy] @ np.asarray(coef)[busy])
        return out

    def _params(self, names, coef):
        """Every cost of :data:`COSTS`: the fitted ones, 0 for the rest, and ``copy_ack_cost_s``
        equal to ``ack_cost_s`` where the copies' packets were not fitted apart."""
        params = dict.fromkeys(COSTS, 0.0)
        params.update(zip(names, coef.tolist()))
        if not self.fit_copy_acks:
            params["copy_ack_cost_s"] = params["ack_cost_s"]
        return params

    def _filter_load(self, filters):
        return filter_load(filters, self.filter_form, self.filter_exponent)

    def _columns(self):
        cols = REQUIRED_COLUMNS + (("wakeups_per_ingress",) if self.wake_regressor != "idle_fraction" else ())
        cols += ("publishers", "subscribers") if self.connection_form is not None else ()
        cols += ("qos",) if self.fit_acks else ()
        cols += (READER_SLEEPS,) if self.fit_reader_wakes else ()
        return cols + (("publishers", "subscribers", "topics") if self.fit_filters else ())

    def _known(self, measurements):
        """The runs the fit can use: with ``per_pass``, those whose passes are known (:func:`passes_of`);
        with ``fit_reader_wakes``, those whose readers' sleeps are (:func:`reader_wakes_of`)."""
        m = measurements.reset_index(drop=True)
        if self.connection_form == "per_pass":
            m = m[~np.isnan(passes_of(m))].reset_index(drop=True)
        if self.fit_reader_wakes:
            m = m[~np.isnan(reader_wakes_of(m))].reset_index(drop=True)
        return m

    def fit(self, measurements):
        _check(measurements, self._columns())
        m = self._known(measurements)
        x, names = self._design(m)
        y = m["demand_s_per_ingress"].to_numpy(dtype=float)
        coef = relative_nnls(x, y, names)
        params = self._params(names, coef)
        self.params_ = {**params, "n_runs": len(y)}
        self.residuals_ = pd.Series(y - x @ coef, name="demand_residual_s")
        return self

    def predict(self, measurements):
        """Fitted demand per ingress message of each run, s."""
        x, names = self._design(measurements.reset_index(drop=True))
        coef = np.array([self.params_[n] for n in names])
        return self._with_wake_work(x, names, coef) @ coef

    def path_demand_s(self, measurements):
        """Fitted CPU per ingress message that the message itself waits for, s.

        :meth:`predict` less the background share (``background_cpu_fraction``
        / rate): the background load is the broker's timed work (Mosquitto's
        ``$SYS`` tree, keep-alive checks), simulated as a constant load that
        takes its share of the CPU first, not a step on a message's way.
        :class:`LatencyFloorCalibrator` subtracts this from the measured
        latency; with :meth:`predict` it charged a 200 msg/s run 48 us of
        background per message (0.0096 core / 200) that no message waits for.
        """
        m = measurements.reset_index(drop=True)
        rate = m["ingress_rate_per_s"].to_numpy(dtype=float)
        return self.predict(m) - self.params_["background_cpu_fraction"] / rate

    def capacity_per_s(
        self,
        *,
        payload_bytes,
        fanout,
        cap=1.0,
        workers=1,
        connections=0,
        topic_bytes=None,
        publishers=1,
        filters=0,
        qos=0,
        reader_sleeps=0.0,
    ):
        """Ingress rate at which the workers are always busy (no wake-ups), msg/s
        (``topic_bytes`` None: the harness's, :data:`HARNESS_TOPIC_BYTES`; a
        pass is shared by one message of each of ``publishers``, all backed up;
        ``filters``: subscriptions installed at the broker; ``qos``: the MQTT QoS of
        publications and subscriptions; ``reader_sleeps``: the share of copies whose reader sleeps)."""
        p = self.params_
        busy = p["ingress_cost_s"] + fanout * p["delivery_cost_s"] + payload_bytes * (1 + fanout) * p["per_byte_cost_s"]
        busy += connections * p["connection_cost_s"] + p.get("pass_cost_s", 0.0) / max(int(publishers), 1)
        busy += float(self._filter_load(filters)) * p.get("filter_scan_cost_s", 0.0)
        busy += fanout * float(reader_sleeps) * p.get("reader_wake_cost_s", 0.0)
        acks = int(handshake_packets(int(qos)))
        busy += acks * (p.get("ack_cost_s", 0.0) + fanout * p.get("copy_ack_cost_s", p.get("ack_cost_s", 0.0)))
        topic = HARNESS_TOPIC_BYTES if topic_bytes is None else topic_bytes
        busy += p.get("length_byte_cost_s", 0.0) * (int(mqtt_length_bytes(int(payload_bytes), int(topic))) - 1)
        return math.inf if busy <= 0 else max(cap * workers - p["background_cpu_fraction"], 0.0) / busy


def gamma_from_quantiles(median, p90):
    """Gamma ``(shape, scale)`` with the given median and 90th percentile.

    The ratio ``p90 / median`` of a gamma falls from infinity to 1 as the
    shape grows; the shape is found by root finding on that ratio, then the
    scale matches the median. Returns ``(0, 0)`` when there is no spread.
    """

    if not (median > 0 and p90 > median):
        return 0.0, 0.0
    ratio = p90 / median

    def gap(log_k):
        k = math.exp(log_k)
        return gamma.ppf(0.9, k) / gamma.ppf(0.5, k) - ratio

    lo, hi = math.log(1e-3), math.log(1e4)
    if gap(lo) < 0:
        log_k = lo
    elif gap(hi) > 0:
        log_k = hi
    else:
        log_k = brentq(gap, lo, hi)
    k = math.exp(log_k)
    return k, median / gamma.ppf(0.5, k)


def _gamma_excess(mean_s, cv):
    """Median and 90th percentile over the 1st of gamma costs (mean ``mean_s``, ``cv``), s."""

    k = 1.0 / cv**2
    q01, q50, q90 = gamma.ppf([0.01, 0.5, 0.9], k)
    scale = np.asarray(mean_s, dtype=float) / k
    return (q50 - q01) * scale, (q90 - q01) * scale


class LatencyFloorCalibrator:
    """Loopback link model from the latency of lightly loaded runs.

    At low load queueing is negligible, so a message's latency is the
    broker's demand plus two loopback "links" (publisher to broker, broker to
    subscriber) that also carry the client stacks. Per run, with ``d`` the
    broker demand per message (CPU s)::

        floor  = latency_p01 - d           (both links, fixed part)
        excess = latency - latency_p01     (both links, variable part)

    (a CPU quota does not slow a lightly loaded broker: it runs at full speed
    until its budget for the period is spent, see :mod:`pubsim.sim.kernels`)

    Each link gets ``latency_s = floor / 2`` and a gamma jitter. The sum of
    two independent gamma(k, theta) is gamma(2k, theta): the gamma(2k, theta)
    whose median and 90th percentile are those of the measured excess
    (:func:`gamma_from_quantiles`) gives each link's gamma(k, theta).
    Quantiles rather than mean and variance: loopback latency has rare
    millisecond outliers (scheduler, timer interrupts) that would inflate a
    moment fit for every message.

    With ``path`` (the simulated broker path of each run: the twin with
    zero-latency links, :func:`pubsim.calibration.validate.fit_profiles`),
    the links are what the measured latency adds to the path's median: with
    ``r = latency - path_p50`` per run (medians over runs), both links'
    fixed part is ``max(r_p01, 0)`` and their jitter a gamma whose median
    and 90th percentile are ``r_p50`` and ``r_p50 + upper`` less that, where
    ``upper`` is the measured spread from p50 to p90 less the path's own, in
    quadrature. So the twin's p50 and p90 are the measured ones by
    construction on these runs. Anchored at the path's median, not its 1st
    percentile: a real path varies more than the simulated one (an idle
    core wakes sooner or later than the curve's median), and its 1st
    percentile lies below the simulated one, so a floor from the 1st
    percentiles came out negative (clipped to 0 on the 2026-11-27
    campaign). That is what a broker whose latency is
    not its demand alone needs: one whose idle core takes time to wake
    (``BrokerParams.idle_exit``, longer at lower rates), or copies of a
    fan-out that leave one after another.

    Parameters
    ----------
    max_utilization : float
        Runs whose broker utilization exceeds this are ignored (the least
        loaded run is used when none qualifies).

    Attributes
    ----------
    params_ : dict
        ``link_latency_s`` (s), ``jitter_mean_s`` (s), ``jitter_cv``,
        ``n_runs``.
    residuals_ : pandas.Series
        One-way floor of each run used minus the fitted one, s.
    """

    COLUMNS = REQUIRED_COLUMNS + ("latency_p01_s", "latency_p50_s", "latency_p90_s")

    def __init__(self, *, max_utilization=0.1):
        self.max_utilization = max_utilization

    def fit(self, measurements, demand_s=None, service_cv=0.0, path=None):
        """Fit from runs; ``demand_s`` overrides the measured demand per run (s).

        With ``service_cv`` > 0 the broker's own spread (gamma costs of that
        coefficient of variation) is taken out of the measured excess first,
        in quadrature (independent parts; exact for variances, an
        approximation for quantiles), so that it is not charged to the links.
        ``path``: a callable ``path(runs) -> DataFrame`` of the simulated
        path's ``latency_p01_s``, ``latency_p50_s``, ``latency_p90_s`` per
        run (class docstring), called with the lightly loaded runs only;
        None: the demand stands for the path.
        """
        _check(measurements, self.COLUMNS)
        m = measurements.reset_index(drop=True)
        demand = m["demand_s_per_ingress"].to_numpy(dtype=float) if demand_s is None else np.asarray(demand_s)
        util = m["ingress_rate_per_s"].to_numpy(dtype=float) * demand / cap_of(m)
        low = util <= self.max_utilization
        if not low.any():
            low = util <= util.min()
        q = {k: m[f"latency_{k}_s"].to_numpy(dtype=float)[low] for k in ("p01", "p50", "p90")}
        if path is not None:
            return self._fit_on_path(m, low, q, path(m[low]))
        ex50, ex90 = q["p50"] - q["p01"], q["p90"] - q["p01"]
        floor = q["p01"] - demand[low]
        if service_cv > 0:
            s50, s90 = _gamma_excess(demand[low], service_cv)
            ex50 = np.sqrt(np.clip(ex50**2 - s50**2, 0.0, None))
            ex90 = np.sqrt(np.clip(ex90**2 - s90**2, 0.0, None))
        one_way = max(float(np.median(floor)) / 2.0, 0.0)
        shape2, scale = gamma_from_quantiles(float(np.median(ex50)), float(np.median(ex90)))
        return self._set(shape2, scale, one_way, low, floor)

    def _fit_on_path(self, m, low, q, sim):
        """The links from the measured latency over the simulated path's (class docstring)."""
        p = {k: sim[f"latency_{k}_s"].to_numpy(dtype=float) for k in ("p01", "p50", "p90")}
        r01 = q["p01"] - p["p50"]
        r50 = q["p50"] - p["p50"]
        upper = np.sqrt(np.clip((q["p90"] - q["p50"]) ** 2 - (p["p90"] - p["p50"]) ** 2, 0.0, None))
        fixed = max(float(np.median(r01)), 0.0)  # both links' fixed part
        mid = float(np.median(r50))
        shape2, scale = gamma_from_quantiles(mid - fixed, mid + float(np.median(upper)) - fixed)
        return self._set(shape2, scale, fixed / 2.0, low, r01)

    def _set(self, shape2, scale, one_way, low, floor):
        """Record the fit: each link's jitter is gamma(shape2 / 2, scale) (two links sum to ``shape2``)."""
        k = shape2 / 2.0
        self.params_ = {
            "link_latency_s": one_way,
            "jitter_mean_s": k * scale,
            "jitter_cv": 1.0 / math.sqrt(k) if k > 0 else 0.0,
            "n_runs": int(low.sum()),
        }
        self.residuals_ = pd.Series(floor / 2.0 - one_way, name="one_way_residual_s")
        return self


class KneeDemandCalibrator(BrokerDemandCalibrator):
    """Two-stage fit: busy costs from runs near each limit, wake-ups from the rest.

    Stage 1 fits ``ingress``, ``delivery`` and ``per_byte`` on the
    ``knee_runs`` highest sustainable loads of each configuration (column
    ``config``), where the broker is busy and its wake-ups are rare, so its
    capacity is anchored to what was measured there. Stage 2 fits the
    wake-up cost (and, with ``fit_background``, a background CPU load) to
    what stage 1 leaves unexplained in all runs. Both stages are NNLS on
    relative errors. Used where the one-equation fit charges high-load CPU
    to wake-ups: multi-threaded brokers (NATS, ZeroMQ's I/O threads) switch
    threads even when busy.

    Parameters
    ----------
    knee_runs : int
        Sustainable runs per configuration taken as "near the limit".
    rounds : int
        With ``fit_background``, alternations of the two stages: stage 1 is
        refitted on what the background load leaves of the runs near the
        limit, so that the background (simulated apart, see
        :class:`pubsim.models.params.broker.BrokerParams`) is not also charged to the busy
        costs.
    knee_anchor : {"runs", "bracket"}
        What stage 1 takes from a knee run whose broker spent its whole CPU
        quota (at least ``quota_share`` of its cap). ``"runs"`` (default):
        its measured CPU per message, as for any run. ``"bracket"``: that
        CPU is the quota, and CPU per message is then the quota over the
        rate, whatever a message costs, so the run bounds the busy cost
        from above and says nothing more; the limit search brackets the
        capacity between the configuration's highest sustainable rate and
        the lowest unsustainable one above it (column
        ``limit_upper_per_s``, offered rates: :func:`with_limit_bracket`),
        and stage 1 takes the quota spent over the bracket's middle
        (geometric: the search steps by ratios) as such a run's CPU per
        message. Under ``"runs"`` the capacity so fitted lies below the
        highest rate the broker sustained (the two knee runs' bounds are
        averaged), and the twin's own search falls a step below that.
        Configurations without a bracket (no unsustainable run above) and
        runs below ``quota_share`` keep their measured CPU.
    quota_share : float
        Share of its CPU cap above which a knee run counts as having spent
        its quota (``"bracket"`` only).
    knee_wakeups : bool
        False (default): wake-ups are not taken out of stage 1, so the CPU
        of the runs near the limit is all busy cost (multi-threaded brokers
        switch threads even when busy). True: the measured wake-ups of those
        runs, at the cost stage 2 fits, are taken out too (alternating as
        for the background), so the busy costs are what a message costs
        without a wake-up: for a broker that still sleeps between its
        publishers' bursts at its limit (the ZeroMQ proxy under a quota,
        calibration/README.md, "Wake-ups at the limit").
    wake_regressor, fit_per_byte, fit_delivery, fit_background
        As :class:`BrokerDemandCalibrator`.
    """

    _two_stage = True

    def __init__(self, *, knee_runs=2, rounds=20, knee_wakeups=False, knee_anchor="runs", quota_share=0.98, **settings):
        super().__init__(**settings)
        if knee_anchor not in KNEE_ANCHORS:
            raise ConfigError("knee_anchor", knee_anchor, f"one of {', '.join(KNEE_ANCHORS)}")
        self.knee_runs = knee_runs
        self.rounds = rounds
        self.knee_wakeups = knee_wakeups
        self.knee_anchor = knee_anchor
        self.quota_share = quota_share

    def fit(self, measurements):
        _check(measurements, self._columns() + ("config",))
        m = self._known(measurements)
        x, names = self._design(m)
        y = m["demand_s_per_ingress"].to_numpy(dtype=float)
        w = 1.0 / np.maximum(y, 1e-12)
        busy = [i for i, n in enumerate(names) if n in BUSY]
        rest = [i for i, n in enumerate(names) if n not in BUSY]
        knee = m.groupby("config")["ingress_rate_per_s"].rank(ascending=False, method="first") <= self.knee_runs
        knee = knee.to_numpy()
        if knee.sum() < len(busy):
            raise ConfigError(
                "measurements",
                f"{int(knee.sum())} runs near a limit",
                f"at least {len(busy)} for {[names[i] for i in busy]}",
            )
        coef = np.zeros(len(names))
        xk, yk = x[knee], y[knee]
        anchored = np.zeros(int(knee.sum()), dtype=bool)
        if self.knee_anchor == "bracket":
            scale = bracket_scale(m[knee], self.quota_share)  # rate / the bracket's middle; 1: as measured
            anchored = scale != 1.0
            xk, yk = xk.copy(), yk * scale  # the quota spent, over the middle rate
            if "background_cpu_fraction" in names:  # its regressor is 1 / rate
                xk[:, names.index("background_cpu_fraction")] *= scale
        wk = 1.0 / np.maximum(yk, 1e-12)
        xb = xk[:, busy]
        taken = [i for i in rest if self.knee_wakeups or names[i] == "background_cpu_fraction"]
        for _ in range(self.rounds if taken else 1):
            near = yk - self._with_wake_work(xk, names, coef)[:, taken] @ coef[taken]
            coef[busy], _ = nnls(xb * wk[:, None], near * wk)
            left = y - x[:, busy] @ coef[busy]
            xr = self._with_wake_work(x, names, coef)[:, rest]  # wake work on the busy costs just fitted
            coef[rest], _ = nnls(xr * w[:, None], left * w)
        x = self._with_wake_work(x, names, coef)
        params = self._params(names, coef)
        self.params_ = {
            **params,
            "n_runs": len(y),
            "n_knee_runs": int(knee.sum()),
            "n_bracketed_knee_runs": int(anchored.sum()),
        }
        self.residuals_ = pd.Series(y - x @ coef, name="demand_residual_s")
        return self


#: What the knee fit takes from a knee run that spent its whole quota (:class:`KneeDemandCalibrator`).
KNEE_ANCHORS = ("runs", "bracket")


def with_limit_bracket(runs):
    """``runs`` with ``limit_upper_per_s``: per (broker, configuration), the lowest offered rate
    of an unsustainable run above its highest sustainable one (NaN: none above).

    The limit search brackets the capacity between the two
    (:class:`KneeDemandCalibrator`, ``knee_anchor="bracket"``); a run of any
    phase counts, so a configuration whose search was not monotone is
    bracketed above its highest sustainable run.
    """
    ok = runs["sustainable"].astype(bool) & (runs["ingress_rate_per_s"] > 0)
    keys = ["broker", "config"]
    top = runs[ok].groupby(keys)["rate_per_s"].max().rename("_top")
    m = runs.join(top, on=keys)
    above = m[~ok & (m["rate_per_s"] > m["_top"])].groupby(keys)["rate_per_s"].min().rename("limit_upper_per_s")
    return runs.drop(columns="limit_upper_per_s", errors="ignore").join(above, on=keys)


def bracket_scale(knee, quota_share):
    """Per knee run: its offered rate over the middle of its configuration's limit bracket where
    it spent at least ``quota_share`` of its CPU cap and a bracket is known, else 1.

    The middle is geometric, ``sqrt(top x upper)``, between the configuration's
    highest sustainable rate among these runs and ``limit_upper_per_s``.
    """
    if "limit_upper_per_s" not in knee or "rate_per_s" not in knee:
        return np.ones(len(knee))
    rate = knee["rate_per_s"].to_numpy(dtype=float)
    top = knee.groupby("config")["rate_per_s"].transform("max").to_numpy(dtype=float)
    upper = knee["limit_upper_per_s"].to_numpy(dtype=float)
    spent = knee["ingress_rate_per_s"].to_numpy(dtype=float) * knee["demand_s_per_ingress"].to_numpy(dtype=float)
    saturated = spent >= quota_share * cap_of(knee)
    middle = np.sqrt(top * upper)
    return np.where(saturated & np.isfinite(upper) & (upper > top), rate / middle, 1.0)
