"""Measurement rows from the simulator: the harness's simulated twin.

:class:`VirtualHarness` answers ``measure(RunSpec)`` like the real harness
(:func:`pubsim.calibration.runner.measure_run`), with the same row fields, by
simulating a broker profile. Uses: the calibrated model's side of
validation, a virtual benchmark (SYSTEMS.md §4 search on the simulator), and
tests of the fit-validate pipeline against a known ground truth.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..models import topology as T
from ..models.params.broker import BrokerParams
from ..models.params.client import PublisherParams, SubscriberParams
from ..models.params.link import LinkParams
from ..models.params.mapping import from_mapping
from ..run import simulate
from ..sim import kernels as K
from ..sim.distributions import Sporadic, Uniform
from .harness.cpu import quota_us
from .harness.loadgen import QOS2_WINDOW, max_batch_for, pacing_batch
from .pacing import batch_due_ns
from .workload import IDLE_TOPIC, idle_filter_names, idle_filters_of, qos_of, topic_assignment

__all__ = ["ROW_FIELDS", "result_row", "broker_cpu_s", "paced_publisher", "topology_for", "VirtualHarness"]

# Fields every measurement row carries (real and virtual), SI units.
ROW_FIELDS = (
    "offered_per_s",
    "ingress_rate_per_s",
    "egress_rate_per_s",
    "sustainability",
    "delivery_ratio",
    "loss_rate",
    "latency_p01_s",
    "latency_p50_s",
    "latency_p90_s",
    "latency_p99_s",
    "latency_mean_s",
    "latency_std_s",
    "latency_max_s",
    "demand_s_per_ingress",
    "wakeups_per_ingress",
    "broker_passes_per_ingress",
    "broker_utilization",
    "cap_throttled_period_fraction",
)


def latency_fields(latency_s):
    """Quantiles, mean, std and max of a latency array, s (NaN when empty)."""
    lat = np.asarray(latency_s, dtype=float)
    if lat.size == 0:
        return {f"latency_{k}_s": math.nan for k in ("p01", "p50", "p90", "p99", "mean", "std", "max")}
    q = np.quantile(lat, [0.01, 0.5, 0.9, 0.99])
    return {
        "latency_p01_s": q[0],
        "latency_p50_s": q[1],
        "latency_p90_s": q[2],
        "latency_p99_s": q[3],
        "latency_mean_s": lat.mean(),
        "latency_std_s": lat.std(),
        "latency_max_s": lat.max(),
    }


def window_latencies(result):
    """Latencies of deliveries of messages published in the result's window, s."""
    d = result.deliveries()
    w0, w1 = result.window
    inw = (d["publish_time_s"] >= w0) & (d["publish_time_s"] < w1)
    return d.loc[inw, "latency_s"].to_numpy()


def broker_cpu_s(station, duration_s):
    """CPU s a simulated broker used over a run of ``duration_s`` s, as ``/proc`` counts a real one's.

    Its messages' work (the station's service time, without the stretch by
    which an uncapped broker's messages share its workers with the
    background load) plus that background load, ``background_cpu_fraction x
    duration_s``: the twin runs the background beside the messages (it
    takes its share of a quota first), and the harness's CPU counts both.
    Leaving it out read the twins' CPU 59-89 % low at 200 msg/s
    (calibration/README.md, "The validation's CPU error leaves the
    background out").
    """
    params = getattr(station, "params", None)
    background = params.background_cpu_fraction * duration_s if params is not None else 0.0
    return station.discipline.work_s / getattr(station, "stretch", 1.0) + background


def result_row(result, *, broker_station="broker:broker"):
    """A measurement row (:data:`ROW_FIELDS`) from a simulation result.

    Demand per message is the broker's whole-run CPU over the messages it
    served, as the harness measures it from ``/proc`` (:func:`broker_cpu_s`).
    """
    s = result.summary()
    st = result.stations().set_index("station").loc[broker_station]
    station = next(x for x in result.network.stations if x.name == broker_station)
    disc = station.discipline
    served = disc.served_total
    row = {
        "offered_per_s": s["offered_per_s"],
        "ingress_rate_per_s": s["ingress_per_s"],
        "egress_rate_per_s": s["egress_per_s"],
        "sustainability": s["sustainability"],
        "delivery_ratio": s["delivery_ratio"],
        "loss_rate": s["loss_rate"],
        "demand_s_per_ingress": broker_cpu_s(station, result.duration_s) / served if served else math.nan,
        "wakeups_per_ingress": st["wakeups"] / st["served"] if st["served"] else math.nan,
        "broker_passes_per_ingress": _passes(st),
        "broker_utilization": st["utilization"],
        "cap_throttled_period_fraction": _throttled_fraction(disc),
        "subscriber_sleeps_per_copy": _reader_sleeps(st),
    }
    row.update(latency_fields(window_latencies(result)))
    return row


def _reader_sleeps(st):
    """Copies that woke their reader per copy (:mod:`pubsim.models.mechanisms.readers`), NaN without it."""
    copies = st.get("reader_copies", math.nan)
    return st["reader_wakes"] / copies if copies == copies and copies > 0 else math.nan


def _throttled_fraction(disc):
    """Fraction of the quota periods of the broker's counting window (its station's window,
    :func:`pubsim.sim.kernels.set_throttle_window`) in which it ran out of budget, as the
    cgroup's ``nr_throttled / nr_periods``; NaN without a quota or a FIFO discipline."""
    fs = getattr(disc, "fs", None)
    if fs is None or not fs[K.QUOTA] < math.inf:
        return math.nan
    periods = (fs[K.THR_W1] - fs[K.THR_W0]) / fs[K.PERIOD]
    return float(fs[K.THR_N] / periods) if periods > 0 else math.nan


def _as_asked(out, rate_per_s):
    """The row judged against the rate asked for, as the harness judges a real run.

    The real harness's ``delivery_ratio`` divides by the rate it was asked to
    offer (:mod:`pubsim.calibration.runner`); the simulation's summary by the
    rate its publishers did offer. A twin whose paced publishers share one
    client core (:func:`pubsim.calibration.pacing.shared_core_send_times_ns`)
    offers less than asked once its batches fill that core, and was judged
    sustainable there: the twin's search passed 45.7k msg/s for 32
    publishers that offered 24.9k. ``generator_saturated``: it offered less
    than 99 % of the rate asked for.
    """
    offered = out["offered_per_s"]
    if not rate_per_s > 0 or math.isnan(offered):
        return out
    return {
        **out,
        "delivery_ratio": out["delivery_ratio"] * offered / rate_per_s,
        "generator_saturated": bool(offered < 0.99 * rate_per_s),
    }


def _passes(st):
    """Cycles (event-loop passes) per message served in the window, for a broker served in
    I/O cycles (:mod:`pubsim.models.mechanisms.iothreads`); NaN for the plain worker."""
    cycles = st.get("cycles", math.nan)
    return cycles / st["served"] if st["served"] and not math.isnan(cycles) else math.nan


def paced_publisher(row, index, topics, *, batch_s=None):
    """Publisher ``index`` sending as the load generator paces it.

    The generator sends batches of ``b`` messages (``loadgen.pacing_batch``),
    batch ``n`` due at ``int(n b 1e9 / rate)`` ns after the start, message
    ``seq`` on topic ``(seq + index) mod topics``, and sends no batch at or
    after the run's end: an explicit schedule reproduces that
    (:func:`pubsim.calibration.pacing.batch_due_ns`), so the simulated broker
    sees the same bursts (and wakes up as often). ``batch_s``: the batches'
    send times instead, s (a late generator,
    :meth:`pubsim.calibration.pacing.PacingLag.send_times_s`).
    """
    k = len(topics)
    if batch_s is None:
        rate, b = _batching(row, k)
        batch_s = batch_due_ns(rate, b, float(row["duration_s"])) / 1e9
    else:
        b = _batching(row, k)[1]
    n = np.arange(len(batch_s) * b)
    times = np.asarray(batch_s, dtype=float)[n // b]
    names = np.array(topics, dtype=object)
    return PublisherParams(
        topics=topics,
        arrival="schedule",
        schedule_time_s=times,
        schedule_size_bytes=np.full(n.size, int(row["payload_bytes"])),
        schedule_topic=names[(n + index) % k],
    )


def _batching(row, topics):
    """``(rate per publisher, messages per batch)`` of a run's publishers."""
    rate = float(row["rate_per_s"]) / int(row["publishers"])
    return rate, pacing_batch(rate, int(row["payload_bytes"]), topics, max_batch=max_batch_for(qos_of(row)))


def topology_for(row, profile, *, pacing=None, rng=None, stalls=None):
    """The simulated twin of a measured run: a star with the calibrated broker.

    Every client link is the profile's loopback link, with its ``jitter_on``
    (:func:`pubsim.calibration.profile.build_profile` writes it only when it is
    ``idle_receiver``; without the field: ``every_packet``).

    ``pacing`` and ``rng``: the publishers' measured lateness
    (:class:`pubsim.calibration.pacing.PacingLag`, their loops sharing the
    client core) and the generator drawing it; None: on time. ``stalls``:
    the machine's scheduler-tick stalls on every client link
    (:class:`pubsim.calibration.stalls.TickStalls`; None: none).
    """
    kind = row["broker"]
    ((bname, bfields),) = profile["broker"].items()
    ((lname, lfields),) = profile["link"].items()
    cap = row.get("cpu_cap_fraction")
    cap = 1.0 if cap is None or (isinstance(cap, float) and math.isnan(cap)) else float(cap)
    period_s = quota_us(cap)[1] / 1e6
    broker = from_mapping(BrokerParams, {**bfields, "cpu_fraction": cap, "cpu_period_s": period_s}, f"broker.{bname}")
    link = from_mapping(LinkParams, dict(lfields), f"link.{lname}")
    pub_topics, sub_filters = topic_assignment(
        publishers=int(row["publishers"]),
        subscribers=int(row["subscribers"]),
        topics=int(row["topics"]),
        fanout=int(row["fanout"]),
    )
    batches = [None] * len(pub_topics)
    lag = None if pacing is None else pacing.lag_for(row)
    if lag is not None:
        rate, b = _batching(row, len(pub_topics[0]))
        batches = lag.send_times_s(rate, b, float(row["duration_s"]), rng, publishers=len(pub_topics))
    qos = qos_of(row)
    pubs = {f"pub{i}": paced_publisher(row, i, tuple(t), batch_s=batches[i]) for i, t in enumerate(pub_topics)}
    if qos:  # the load generator's window: none at QoS 1, the broker's at QoS 2 (loadgen.QOS2_WINDOW)
        window = QOS2_WINDOW if qos == 2 else 0
        pubs = {n: replace(p, qos=qos, inflight_messages=window) for n, p in pubs.items()}
    idle = tuple(idle_filter_names(idle_filters_of(row)))  # installed on subscriber 0, as the harness does
    subs = {
        f"sub{j}": SubscriberParams(subscriptions=tuple(f) + (idle if j == 0 else ()), qos=qos)
        for j, f in enumerate(sub_filters)
    }
    if qos and link.jitter_on == "idle_receiver":  # a QoS window's propagation draws jitter for every packet
        link = replace(link, jitter_on="every_packet")
    protocol = {"zmq-proxy": "zmq", "nats": "none"}.get(kind, "mqtt")
    if stalls is not None:
        link = _stalled_links(row, link, stalls, sub_filters)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link, protocol=protocol)


def _stalled_links(row, link, stalls, sub_filters):
    """Each client's link with the machine's tick stalls: its jitter plus, now and then, the
    rest of a tick (:meth:`pubsim.calibration.stalls.TickStalls.hold`, a
    :class:`~pubsim.sim.distributions.Sporadic` jitter)."""
    rate = float(row["rate_per_s"])
    topics = int(row["topics"])
    pubs = int(row["publishers"])
    burst_s = _batching(row, topics)[1] * pubs / rate  # a publisher's batch interval
    per_link = {f"pub{i}": rate / pubs for i in range(pubs)}
    for j, filters in enumerate(sub_filters):
        per_link[f"sub{j}"] = rate / topics * sum(f != IDLE_TOPIC for f in filters)
    out = {}
    for name, r in per_link.items():
        p, low = stalls.hold(r, burst_s)
        jitter = Sporadic(base=link.jitter_s, probability=p, extra=Uniform(low=low, high=stalls.tick_s))
        out[name] = replace(link, jitter_s=jitter)
    return out


class VirtualHarness:
    """``measure(RunSpec) -> (row, latency sample)`` on the simulator.

    The twin has no ZeroMQ high-water marks: a spec's ``zmq_hwm`` and
    ``zmq_client_hwm`` are not simulated (every pipe is unbounded, as with
    marks of 0), so a virtual run of a configuration with marks predicts the
    proxy without them (calibration/README.md, "The ZeroMQ proxy's limit
    under a quota is a loss limit").

    Parameters
    ----------
    profiles : dict
        Broker kind -> profile mapping (:mod:`pubsim.calibration.profile`).
    seed : int
        Base seed; each run gets its own replication number.
    sample : int
        Latencies kept per run (random subsample), as the real harness.
    pacing : PacingLag or None
        The load generator's measured lateness
        (:class:`pubsim.calibration.pacing.PacingLag`); None: publishers on
        time.
    stalls : TickStalls or None
        The machine's scheduler-tick stalls on the client links
        (:class:`pubsim.calibration.stalls.TickStalls`); None: none.
    """

    def __init__(self, profiles, *, seed=0, sample=1000, pacing=None, stalls=None):
        self.profiles = profiles
        self.seed = seed
        self.sample = sample
        self.pacing = pacing
        self.stalls = stalls
        self.runs = 0

    def __call__(self, spec):
        row = spec.as_row() if hasattr(spec, "as_row") else dict(spec)
        lateness = None if self.pacing is None else np.random.default_rng([self.seed, self.runs, 1])
        g = topology_for(row, self.profiles[row["broker"]], pacing=self.pacing, rng=lateness, stalls=self.stalls)
        res = simulate(
            g,
            duration_s=row["duration_s"],
            warmup_s=row["warmup_s"],
            cooldown_s=row["cooldown_s"],
            seed=self.seed,
            replication=self.runs,
        )
        self.runs += 1
        out = _as_asked(result_row(res), row["rate_per_s"])
        lat = window_latencies(res)
        rng = np.random.default_rng([self.seed, self.runs])
        if lat.size > self.sample:
            lat = rng.choice(lat, self.sample, replace=False)
        return out, lat
