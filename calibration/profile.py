"""Calibrated profiles: fitted broker and loopback-link presets with provenance.

The broker's provenance may carry ``accuracy`` (validation errors per split
and the fitted range: :mod:`pubsim.calibration.accuracy`), written with its
error summaries one per line.

A profile is a mapping ``{"broker": {name: fields}, "link": {name: fields}}``
in the preset format of :mod:`pubsim.models.presets`; saved as
``models/presets/calibrated/<name>.yaml`` it is loaded by name like any
preset (``preset: mosquitto``). This module builds the mapping and its YAML
text; writing the file is the caller's choice (``pubsim calibrate`` does it).
"""

from __future__ import annotations

import yaml

from ..models.params.broker import BrokerParams
from ..models.params.link import LinkParams
from ..models.params.mapping import from_mapping
from ..sim.units import parse_duration_s

__all__ = [
    "BROKER_MODELS",
    "build_profile",
    "profile_yaml",
    "check_profile",
    "length_reads_reason",
    "pass_reads_reason",
    "sleeps_in_kernel",
    "read_buffer",
    "tick_demand",
    "several_switches_per_wakeup",
]

# What the harness cannot fit: the broker's architecture (from its documentation).
BROKER_MODELS = {
    "mosquitto": {
        "workers": 1,
        "topic_syntax": "mqtt",
        "overflow": "backpressure",
        "why": "single-threaded event loop (mosquitto.conf(5)); TCP flow control slows publishers when it falls behind",
        "length_reads": "Mosquitto 2.0.11 lib/packet_mosq.c packet__read: one read(2) per byte of a "
        "packet's remaining length, then one for the rest",
        "pass_reads": "Mosquitto 2.0.11 src/mux_epoll.c mux_epoll__handle: one epoll_wait per pass of the "
        "main loop, then one packet__read per ready connection",
        "sleeps": "one thread that sleeps in epoll_wait when it runs out of work (src/mux_epoll.c)",
        "matching_lookup": "Mosquitto src/subs.c sub__search: per topic level one hash lookup (uthash "
        "HASH_FIND) of the literal child, the '+' child and the '#' child, so a message meets only the "
        "subscriptions on its own path, however many others are installed",
        "copies_in_turn": "Mosquitto 2.0.11 src/subs.c subs__send -> src/database.c db__message_insert(update) "
        "-> lib/packet_mosq.c packet__queue -> packet__write: each subscriber's copy is written as it is "
        "routed, one after the other",
        "heap_trim": {
            "live_buffers": 2,
            "top_pad_bytes": 131072,
            "source": "glibc malloc trims its heap's top past M_TRIM_THRESHOLD and keeps M_TOP_PAD (both "
            "128 KiB by default, mallopt(3)); Mosquitto 2.0.11 holds two payload-sized buffers per QoS 0 "
            "message (the incoming packet, lib/packet_mosq.c packet__read, and the stored payload, "
            "src/handle_publish.c; each outgoing packet is allocated after the incoming one is freed), so "
            "it faults 2 x payload - 128 KiB back in per message: counted 0 at 64 KiB, 16 at 96 KiB, 32 "
            "at 128 KiB, 96 at 256 KiB and 224 at 512 KiB, the same at fan-out 2 (2026-12-08, "
            "calibration/README.md)",
        },
    },
    "nats": {
        "workers": 1,
        "topic_syntax": "mqtt",
        "overflow": "backpressure",
        "why": "one core under the harness's CPU cap; subjects matched as tokens "
        "(NATS '.' and '*' mapped onto MQTT-style filters by the harness)",
        "wakeup_switches": "nats-server 2.9 server/client.go: a connection's readLoop goroutine parses a "
        "message and signals the subscriber's writeLoop (flushSignal), which flushes it; with the Go "
        "netpoller, a wake-up is about three voluntary context switches (measured: 2.4-3.3 per message "
        "at 200 msg/s, calibration/README.md)",
        "sleeps": "goroutines park in the Go netpoller (epoll_wait); an idle Go scheduler thread spins "
        "looking for work before it sleeps (runtime/proc.go findrunnable, stopm)",
        "read_buffer": {
            "cycle_max_bytes": 65536,
            "message_overhead_bytes": 21,
            "source": "nats-server 2.9.10 server/client.go readLoop: a connection is read into a buffer of "
            "at most maxBufSize = 64 KiB, every read ending in flushClients; a PUB is 'PUB <subject> "
            "<size>' CRLF, payload, CRLF: 20-22 B beyond the payload for the harness's subjects "
            "(pubsim.tK). Measured past the limit (data/brokers-wire): 15.5, 61.4, 223 and 661-719 "
            "messages per read(2) for 4 KiB, 1 KiB, 256 B and 64 B, 64 KiB over their wire size "
            "within 2-8 %",
        },
    },
    "rabbitmq-mqtt": {
        "workers": 1,
        "topic_syntax": "mqtt",
        "overflow": "backpressure",
        "why": "Erlang schedulers share the capped core; credit flow throttles publishers",
    },
    "zmq-proxy": {
        "workers": 1,
        "topic_syntax": "prefix",
        "overflow": "drop_newest",
        "why": "zmq.proxy is one thread; PUB sockets drop at the high-water mark",
        "wakeup_switches": "libzmq: an I/O thread reads the socket and wakes the proxy's thread through "
        "its mailbox (an eventfd signaler), which passes the message on to the I/O thread that writes "
        "it: a wake-up is two to three voluntary context switches (measured: 2.3-3.5 per message at "
        "200 msg/s, calibration/README.md)",
        "sleeps": "the I/O thread sleeps in epoll_wait and the proxy's thread in poll on its mailbox "
        "(libzmq 4.3.5 src/epoll.cpp, src/proxy.cpp)",
    },
    "activemq-mqtt": {
        "workers": 1,
        "topic_syntax": "mqtt",
        "overflow": "backpressure",
        "why": "a JVM: one transport thread per MQTT connection plus the dispatch "
        "thread pool (ActiveMQ 'Configuring Transports', 'MQTT'), all sharing the "
        "capped core, so the broker is CPU-bound and modelled as one worker "
        "at the cap; producer flow control blocks publishers when a topic's "
        "memory limit is reached (ActiveMQ 'Producer Flow Control'); MQTT "
        "'/' topic levels map onto ActiveMQ '.' destinations. Caveat (measured): "
        "with one publisher and fan-out 1 its limit was not its CPU (0.5-0.6 of "
        "the cap used), so the model overestimates that capacity; use it for CPU "
        "demand (calibration/README.md)",
    },
    "ejabberd-mqtt": {
        "workers": 1,
        "topic_syntax": "mqtt",
        "overflow": "backpressure",
        "why": "an Erlang VM: one process per MQTT session (mod_mqtt_session) on BEAM "
        "schedulers that share the capped core, so it is CPU-bound and modelled "
        "as one worker at the cap; the harness sets mod_mqtt max_queue "
        "unlimited (ejabberd docs, mod_mqtt), so nothing is dropped and TCP "
        "flow control slows publishers",
    },
}


#: What a profile's link latency was measured between, by the campaign's ``latency_clock``.
_CLOCK_NOTES = {
    "kernel_rx": "to the kernel's receive time at the subscriber's socket (the subscriber's own delay left out), ",
    "wire": (
        "from the kernel's transmit time at the publisher's socket to its receive time at the subscriber's, "
        "over messages whose receive stamp is their own (both clients' own delays left out), "
    ),
    "write_rx": (
        "from the publisher's write of the message to the kernel's receive time at the subscriber's socket, "
        "over messages whose receive stamp is their own (both clients' own delays left out), "
    ),
}


def length_reads_reason(kind):
    """None if broker ``kind`` reads MQTT remaining lengths byte by byte (``length_reads`` in
    :data:`BROKER_MODELS`: ``length_byte_cost_s`` may be fitted), else why that term is not fitted."""
    if BROKER_MODELS.get(kind, {}).get("length_reads") is not None:
        return None
    return f"not fitted: {kind} does not read MQTT lengths byte by byte"


def matching_lookup_reason(kind):
    """Why broker ``kind``'s cost does not grow with its installed subscriptions (``matching_lookup``
    in :data:`BROKER_MODELS`: it matches a message by lookups along its topic, so
    ``filter_scan_cost_s`` is not fitted), or None for a broker whose matching is not known to."""
    how = BROKER_MODELS.get(kind, {}).get("matching_lookup")
    return None if how is None else f"not fitted: matching is a lookup, not a scan ({how}): 0"


def several_switches_per_wakeup(kind):
    """True if broker ``kind`` switches several times per wake-up (``wakeup_switches`` in
    :data:`BROKER_MODELS`: its wake-ups are its switches over those of one,
    :func:`pubsim.calibration.fit.wakeups_of`); False if it switches once per wake-up or its
    runtime switches on its own (its switches are read as they are)."""
    return BROKER_MODELS.get(kind, {}).get("wakeup_switches") is not None


def sleeps_in_kernel(kind):
    """True if broker ``kind``'s threads sleep in the kernel when out of work, so that its counted
    voluntary switches are its wake-ups (``sleeps`` in :data:`BROKER_MODELS`: ``sleep_entry_s`` may
    be fitted); False for a runtime whose schedulers switch whether or not messages come."""
    return BROKER_MODELS.get(kind, {}).get("sleeps") is not None


def tick_demand(cpu_tick_s):
    """The demand parameter of a CPU quota checked at scheduler ticks of ``cpu_tick_s`` (s;
    ``BrokerParams.cpu_tick_s``, read as that field is), for :func:`build_profile`; none for 0."""
    tick = parse_duration_s(cpu_tick_s, "cpu_tick_s")
    return {"cpu_tick_s": tick} if tick else {}


def read_buffer(kind):
    """Most bytes one read of broker ``kind`` takes, and the framing bytes a message adds to its
    payload there (``read_buffer`` in :data:`BROKER_MODELS`: ``{"cycle_max_bytes": ...,
    "message_overhead_bytes": ..., "source": ...}``), or None where not modelled."""
    return BROKER_MODELS.get(kind, {}).get("read_buffer")


def pass_reads_reason(kind):
    """None if broker ``kind`` reads one packet per ready connection per pass of its loop
    (``pass_reads`` in :data:`BROKER_MODELS`: ``pass_cost_s`` may be fitted), else why that term is not fitted."""
    if BROKER_MODELS.get(kind, {}).get("pass_reads") is not None:
        return None
    return f"not fitted: {kind} is not modelled as reading one packet per connection per pass"


def _ack_text(demand_params):
    """The profile note's sentence on the QoS handshake packets ('' where they cost nothing)."""
    ack, copy = demand_params.get("ack_cost_s", 0.0), demand_params.get("copy_ack_cost_s")
    if not ack and not copy:
        return ""
    what = "(a PUBACK at QoS 1; PUBREC, PUBREL and PUBCOMP at QoS 2"
    if copy is None or copy == ack:
        return f"ack_cost_s {ack * 1e6:.3g} us per MQTT QoS handshake packet handled {what}; on the way in and on each copy), fitted on runs at several QoS; "
    return (
        f"ack_cost_s {ack * 1e6:.3g} us per MQTT QoS handshake packet of the publisher's exchange and copy_ack_cost_s "
        f"{copy * 1e6:.3g} us per packet of a copy's exchange {what}), fitted on runs at several QoS and fan-outs; "
    )


def _filter_text(demand_params, metadata):
    """The note's sentence on the installed-subscription term, with its form and how it was chosen."""
    cost = demand_params.get("filter_scan_cost_s")
    if not cost:
        return ""
    form = demand_params.get("filter_cost_form", "linear")
    unit = {
        "linear": "per installed subscription",
        "log": "per unit of ln(1 + installed subscriptions)",
        "power": f"per unit of installed subscriptions ** {demand_params.get('filter_cost_exponent', 1.0):g}",
    }[form]
    why = f", {form} form: {metadata['filter_form']}" if metadata.get("filter_form") else ""
    return f"filter_scan_cost_s {cost * 1e9:.3g} ns {unit} per message (fitted on runs with idle subscriptions, idle_filters{why}); "


def _passes(demand_params, metadata):
    """``{"io": ...}``: the broker's event-loop passes (I/O cycles of one message per
    connection, :class:`pubsim.models.params.io.IoParams`) when a pass cost was fitted, else ``{}``."""
    cost = demand_params.get("pass_cost_s", 0.0)
    if not cost:
        return {}
    note = (
        f"fitted per event-loop pass on the passes counted per message (perf, broker_passes_per_ingress) "
        f"of {metadata['data']}; a pass reads one packet per ready connection (Mosquitto 2.0 src/mux_epoll.c)"
    )
    return {
        "io": {
            "cycle_cost_s": _us(cost),
            "cycle_max_per_connection": 1,
            "provenance": {"source": metadata.get("source", "measured"), "reference": metadata["data"], "note": note},
        }
    }


def _us(x):
    return f"{x * 1e6:.4g}us"


def _cost(mean_s, cv):
    """A per-message cost: constant, or gamma with coefficient of variation ``cv``."""
    if cv > 0 and mean_s > 0:
        return f"gamma({mean_s:.6g}, cv={cv:.3g})"
    return _us(mean_s)


_IDLE_RECEIVER_NOTE = (
    "Jitter on idle receivers only (jitter_on=idle_receiver, assumption about loopback TCP "
    "with blocking readers): the jitter is mostly the receiving process's wake-up, and "
    "messages that arrive while it wakes up are read with the one that woke it, not "
    "each after a wake-up of its own. "
)


def build_profile(
    *,
    name,
    broker_kind,
    demand_params,
    link_params,
    metadata,
    service_cv=0.0,
    evidence=None,
    accuracy=None,
    terms=None,
    jitter_on="every_packet",
    idle_exit=None,
    speed_drift=None,
    copies_in_turn=True,
    wake_curve=None,
    heap_trim=None,
):
    """The preset mapping of one calibrated broker and its loopback link.

    Parameters
    ----------
    name : str
        Preset name (the broker preset; the link is ``loopback-<name>``).
    broker_kind : str
        A key of :data:`BROKER_MODELS`.
    demand_params : dict
        ``params_`` of :class:`pubsim.calibration.fit.BrokerDemandCalibrator` (s, s/byte).
    link_params : dict
        ``params_`` of :class:`pubsim.calibration.fit.LatencyFloorCalibrator` (s).
    metadata : dict
        ``data`` (campaign files), ``date``, ``host``, ``cpu``, ``kernel``,
        ``broker_version``, ``cpu_cap_fraction``, ``n_runs``, ``rms_residual_s``;
        optionally ``variability`` (how ``service_cv`` was found) and
        ``jitter_choice`` (how ``jitter_on`` was chosen, a sentence for the
        link's note).
    service_cv : float
        Coefficient of variation of the ingress and delivery costs (gamma
        distributed; 0 = constant), see :mod:`pubsim.calibration.variability`.
    evidence : dict or None
        A calibration from an evidence table
        (:mod:`pubsim.calibration.evidence_fit`): written as the profile's
        top-level ``evidence`` mapping (sources, fitted ranges, terms with
        their intervals, residual errors; preset loading ignores it).
        ``metadata`` may then carry ``source`` (a provenance source) and
        ``note`` (replacing the measured-run note), ``demand_params`` also
        ``filter_scan_cost_s`` and ``ack_cost_s``, and ``link_params`` may be
        None (no link preset).
    accuracy : dict or None
        The broker's ``provenance.accuracy`` (:mod:`pubsim.calibration.accuracy`:
        validation errors per split and the fitted range, or an evidence
        fit's intervals); None: not recorded.
    terms : dict or None
        Each demand term's value with its bootstrap interval, or why it is
        not identified (:func:`pubsim.calibration.terms.terms_record`):
        written as the profile's top-level ``fit_terms`` mapping (preset
        loading ignores it). ``metadata`` may carry ``connections`` (a
        sentence on the per-connection term, added to the note).
    jitter_on : str
        The link's ``jitter_on`` (:class:`pubsim.models.params.link.LinkParams`).
        ``every_packet`` (default) or ``idle_receiver``: only a message that
        finds the receiver idle pays a jitter draw. ``pubsim calibrate``
        chooses it per broker on the training runs
        (:class:`pubsim.calibration.jitter.JitterModeCalibrator`).
    idle_exit : dict or None
        The broker's ``idle_exit`` mapping (``idle_s``, ``exit_s``,
        ``provenance``; :class:`pubsim.models.params.idle.IdleExitParams`),
        measured on the campaign's machine
        (:func:`pubsim.calibration.harness.machine.idle_exit_curve`); None: none.
    speed_drift : pubsim.calibration.drift.SpeedDriftCalibrator or None
        A fitted drift: its values become ``speed_drift_log_sd`` and
        ``speed_drift_time_s`` (when identified) and the note says how they
        were found; None: no drift.
    copies_in_turn : bool
        True (default): a broker whose design writes each copy as it routes it
        (``copies_in_turn`` in :data:`BROKER_MODELS`: Mosquitto) gets
        ``copies_in_turn`` (:mod:`pubsim.models.mechanisms.turns`); False:
        every copy leaves at the end of the message's service.
    wake_curve : dict or None
        The broker's ``wake_curve`` mapping (``idle_s``, ``share``,
        ``work_share``, ``provenance``;
        :class:`pubsim.models.params.idle.WakeCurveParams`,
        :func:`pubsim.calibration.wakecurve.wake_curve_mapping`): a wake-up
        costs more the longer the broker idled; None: the same whatever the idle.
    heap_trim : dict or None
        The broker's ``heap_trim`` mapping (:class:`pubsim.models.params.heap.HeapTrimParams`,
        :func:`pubsim.calibration.heapfit.heap_trim_mapping`): pages a large
        message faults in again and what each costs; None: none.
    """
    model = BROKER_MODELS[broker_kind]
    where = (
        f"{metadata.get('host', '?')} ({metadata.get('cpu', '?')}, kernel {metadata.get('kernel', '?')}), "
        f"{broker_kind} {metadata.get('broker_version', '?')}, broker capped at "
        f"{metadata.get('cpu_cap_fraction', '?')} core"
    )
    note = metadata.get("note") or (
        f"CPU s per message by the utilization law from /proc, fitted by NNLS over "
        f"{metadata['n_runs']} training runs (rms residual "
        f"{metadata['rms_residual_s'] * 1e6:.3g} us; wake-up regressor: "
        f"{metadata.get('wake_regressor', 'measured')}; background CPU "
        f"{demand_params.get('background_cpu_fraction', 0.0):.3g} core, simulated as a constant "
        f"load that takes its share of the CPU first); "
        f"{metadata.get('variability', 'constant per-message costs (variability not fitted)')}; "
        + (f"{metadata['connections']}; " if metadata.get("connections") else "")
        + (
            f"length_byte_cost_s {demand_params['length_byte_cost_s'] * 1e6:.3g} us per MQTT remaining-length "
            f"byte beyond the first ({model['length_reads']}); "
            if demand_params.get("length_byte_cost_s")
            else ""
        )
        + _filter_text(demand_params, metadata)
        + _ack_text(demand_params)
        + _drift_text(speed_drift)
        + (f"{metadata['sleep_entry']}; " if metadata.get("sleep_entry") else "")
        + (
            f"CPU quota checked at {demand_params['cpu_tick_s'] * 1e3:g} ms scheduler ticks (the measuring "
            "machine's CONFIG_HZ; Linux kernel/sched/fair.c update_curr, distribute_cfs_runtime): a broker "
            "busy without a break runs past its quota and repays it from the next periods; "
            if demand_params.get("cpu_tick_s")
            else ""
        )
        + (
            f"copies leave one after the other as they are written ({model['copies_in_turn']}); "
            if copies_in_turn and model.get("copies_in_turn")
            else ""
        )
        + "costs are CPU seconds of a whole "
        f"core: set cpu_fraction for a capped broker. {where}. Workers, topic syntax "
        f"and overflow from the broker's design: {model['why']}."
    )
    extra = {
        k: float(f"{demand_params[k]:.6g}")
        for k in (
            "filter_scan_cost_s",
            "ack_cost_s",
            "copy_ack_cost_s",
            "connection_cost_s",
            "connection_wakeup_cost_s",
            "length_byte_cost_s",
        )
        if k in demand_params and (demand_params[k] or k == "connection_cost_s")  # 0 per wake-up: left out
    }
    if extra.get("copy_ack_cost_s") == extra.get("ack_cost_s"):  # not fitted apart: the broker's default
        extra.pop("copy_ack_cost_s", None)
    broker = {
        "workers": model["workers"],
        "ingress_cost_s": _cost(demand_params["ingress_cost_s"], service_cv),
        "delivery_cost_s": _cost(demand_params["delivery_cost_s"], service_cv),
        "per_byte_cost_s": float(demand_params["per_byte_cost_s"]),
        "idle_wakeup_cost_s": _us(demand_params["idle_wakeup_cost_s"]),
        **({"sleep_entry_s": _us(demand_params["sleep_entry_s"])} if demand_params.get("sleep_entry_s") else {}),
        **({"cpu_tick_s": demand_params["cpu_tick_s"]} if demand_params.get("cpu_tick_s") else {}),
        **extra,
        **{k: demand_params[k] for k in ("filter_cost_form", "filter_cost_exponent") if k in demand_params},
        "background_cpu_fraction": float(f"{demand_params.get('background_cpu_fraction', 0.0):.4g}"),
        "topic_syntax": model["topic_syntax"],
        "overflow": model["overflow"],
        **({"idle_exit": idle_exit} if idle_exit is not None else {}),
        **({"wake_curve": wake_curve} if wake_curve is not None else {}),
        **({"heap_trim": heap_trim} if heap_trim is not None else {}),
        **_drift_fields(speed_drift),
        **_passes(demand_params, metadata),
        **_reader_wake(demand_params, metadata),
        **({"copies_in_turn": True} if copies_in_turn and model.get("copies_in_turn") else {}),
        "provenance": {
            "source": metadata.get("source", "measured"),
            "reference": metadata["data"],
            "date": metadata["date"],
            "note": note,
            **({"accuracy": accuracy} if accuracy is not None else {}),
        },
    }
    tail = {**({"evidence": evidence} if evidence else {}), **({"fit_terms": terms} if terms else {})}
    if link_params is None:
        return {"broker": {name: broker}, **tail}
    jitter = (
        f"gamma({link_params['jitter_mean_s']:.6g}, cv={max(link_params['jitter_cv'], 1e-3):.4g})"
        if link_params["jitter_mean_s"] > 0
        else "const(0)"
    )
    link = {
        "latency_s": _us(link_params["link_latency_s"]),
        "jitter_s": jitter,
        "bandwidth_Bps": "inf",
        "overhead_bytes": 40,
        **({"jitter_on": jitter_on} if jitter_on != "every_packet" else {}),
        "provenance": {
            "source": "measured",
            "reference": metadata["data"],
            "date": metadata["date"],
            "note": (
                "one-way loopback "
                + _CLOCK_NOTES.get(metadata.get("latency_clock"), "including the harness's client stack, ")
                + f"from the latency of {link_params['n_runs']} lightly loaded runs "
                + (
                    "over the broker path's median (the twin with zero-latency links, its idle exit "
                    "and the generator's pacing, simulated per run): fixed part from the 1st "
                    "percentile, gamma jitter so that two links give the measured p50 and p90. "
                    if idle_exit is not None
                    else "minus the broker demand; jitter gamma so two links reproduce the measured "
                    "excess over the 1st percentile. "
                )
                + "Bandwidth not limiting on loopback (assumption); overhead = IPv4 + TCP headers. "
                + (_IDLE_RECEIVER_NOTE if jitter_on == "idle_receiver" else "")
                + (f"Jitter mode: {metadata['jitter_choice']}. " if metadata.get("jitter_choice") else "")
                + f"{where}."
            ),
        },
    }
    return {"broker": {name: broker}, "link": {f"loopback-{name}": link}, **tail}


def _reader_wake(demand_params, metadata):
    """The broker's ``reader_wake`` mapping where a cost per woken copy was fitted
    (:mod:`pubsim.models.params.readers`): the harness runs every client on one core."""
    cost, copy_s = demand_params.get("reader_wake_cost_s"), demand_params.get("reader_copy_s")
    if not cost or not copy_s:
        return {}
    note = (
        f"{cost * 1e6:.3g} us more per copy written to a sleeping reader, fitted with the other costs on "
        "fan-out x the subscribers' measured sleeps per copy (voluntary context switches per message read); "
        f"a reader stays awake (rank + 1) x {copy_s * 1e6:.3g} us after a write, its measured CPU per copy "
        f"(median of {demand_params.get('reader_copy_runs', '?')} training runs), the readers sharing the "
        "harness's client core"
    )
    return {
        "reader_wake": {
            "wake_cost_s": _us(cost),
            "copy_s": _us(copy_s),
            "shared_core": True,
            "provenance": {"source": "measured", "reference": metadata["data"], "date": metadata["date"], "note": note},
        }
    }


def _drift_fields(drift):
    """The broker's speed-drift fields from a fitted :class:`pubsim.calibration.drift.SpeedDriftCalibrator`."""
    if drift is None or not drift.params_["identified"]:
        return {}
    p = drift.params_
    return {
        "speed_drift_log_sd": float(f"{p['speed_drift_log_sd']:.4g}"),
        "speed_drift_time_s": float(f"{p['speed_drift_time_s']:.4g}"),
    }


def _drift_text(drift):
    """The note's sentence on the speed drift (empty when not asked for)."""
    if drift is None:
        return ""
    p = drift.params_
    if not p["identified"]:
        return f"speed drift not identified: {p['reason']}; "
    ci = drift.intervals_
    band = {k: f" [{lo:.3g}, {hi:.3g}]" for k, (lo, hi) in ci.items()}
    return (
        f"speed drift per quota period: log-sd {p['speed_drift_log_sd']:.3g}"
        f"{band.get('speed_drift_log_sd', '')}, correlation time {p['speed_drift_time_s']:.3g} s"
        f"{band.get('speed_drift_time_s', '')} (bootstrap 95 % over runs), fitted by the method of "
        f"moments to the throttled-period fractions of {p['n_runs']} sustainable capped training runs "
        "(pubsim.calibration.drift); "
    )


def check_profile(profile):
    """Build every parameter object of a profile (raises ConfigError on a bad field)."""
    for name, fields in profile.get("broker", {}).items():
        from_mapping(BrokerParams, fields, f"broker.{name}")
    for name, fields in profile.get("link", {}).items():
        from_mapping(LinkParams, fields, f"link.{name}")
    return profile


class _Flow(dict):
    """A small mapping written on one line (an error summary)."""


class _FlowList(list):
    """A ``[low, high]`` pair written on one line."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))
_Dumper.add_representer(_FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def _compact(accuracy):
    """An accuracy mapping whose error summaries, intervals and ranges are written one per line."""
    out = {}
    for key, value in accuracy.items():
        if key in ("fitted_range", "intervals"):
            value = {k: _FlowList(v) for k, v in value.items()}
        elif isinstance(value, dict):
            value = {k: _Flow(v) if isinstance(v, dict) else v for k, v in value.items()}
            if "intervals" in value:
                value["intervals"] = {k: _FlowList(v) for k, v in accuracy[key]["intervals"].items()}
        out[key] = value
    return out


def _readable(profile):
    brokers = {}
    for name, fields in profile.get("broker", {}).items():
        prov = fields.get("provenance")
        if isinstance(prov, dict) and isinstance(prov.get("accuracy"), dict):
            fields = {**fields, "provenance": {**prov, "accuracy": _compact(prov["accuracy"])}}
        brokers[name] = fields
    out = {**profile, "broker": brokers} if "broker" in profile else profile
    if isinstance(profile.get("fit_terms"), dict) and isinstance(profile["fit_terms"].get("terms"), dict):
        terms = {k: _Flow(v) if isinstance(v, dict) else v for k, v in profile["fit_terms"]["terms"].items()}
        out = {**out, "fit_terms": {**profile["fit_terms"], "terms": terms}}
    return out


def profile_yaml(profile):
    """YAML text of a profile, with a header saying how it was made."""
    head = (
        "# Calibrated by `pubsim calibrate` from pubsim's own measurements (see provenance).\n"
        "# Re-run the campaign and the fit: see calibration/README.md.\n"
    )
    if any(isinstance((f.get("provenance") or {}).get("accuracy"), dict) for f in profile.get("broker", {}).values()):
        head += "# provenance.accuracy: validation errors per split and the fitted range (`pubsim accuracy`).\n"
    if "fit_terms" in profile:
        head += "# fit_terms: each demand term with its bootstrap interval, or why it is not identified.\n"
    if "evidence" in profile:
        head = (
            "# Calibrated by `pubsim calibrate TABLE` from an evidence table (see provenance and evidence:\n"
            "# sources, fitted ranges, terms with confidence intervals). See docs/evidence.md.\n"
        )
    check_profile(profile)
    return head + yaml.dump(_readable(profile), Dumper=_Dumper, sort_keys=False, width=100)
