"""One measured run on a real broker -> one tidy row and a latency sample.

:class:`RealHarness` is the ``measure`` callable of
:func:`pubsim.calibration.campaign.run_campaign`: for each :class:`RunSpec` it makes
sure the right broker runs (started on a free loopback port under the
campaign's CPU pinning and cap; restarted when the broker or the cap
changes, or when it is still busy with an earlier run's backlog after
:attr:`RealHarness.SETTLE_TIMEOUT_S`: each run waits until the broker is
idle, ``broker_settle_s`` in the row), drives the load with
:func:`pubsim.calibration.harness.loadgen.run_load`, samples the broker's
CPU from ``/proc`` when the clients are ready and after the drain, and
returns the row fields of :data:`pubsim.calibration.virtual.ROW_FIELDS`
plus the broker's wake-ups and the load generator's own health.

Demand per ingress message is the broker's CPU time from the common start
to the end of the drain (warm-up and drain included) divided by every
message the publishers sent in that time (utilization law, U = X D). The
set-up (connections, subscriptions and the generator's probe rounds, which
with 32 publishers on 32 topics are about 9,000 PUBLISHes per run) is left
out and reported as ``broker_setup_cpu_s``: the publishers stop probing,
the broker is left to work off the probes (a capped broker can be seconds
behind: the probes of 32 publishers on 32 topics are 51,200 PUBLISHes per
second), and only then are its counters read and the start time sent.
Before 2026-11-27 it was counted, which added 77-85 ms of CPU to every
32 + 32 run (+76 % CPU per message at 1,000 msg/s, +9-10 % near the limit)
and 3.1-3.7 ms to every 8 + 8 run (calibration/README.md).

Where ``perf stat`` can count the kernel's ``syscalls`` tracepoints
(:func:`~pubsim.calibration.harness.passes.perf_syscalls_available`; the
campaign's ``meta.json`` says so in ``syscall_counting``), the broker's
system calls over the same span are counted too, per message sent:
``broker_passes_per_ingress`` (``epoll_wait`` and ``epoll_pwait``: passes of
its event loop), ``broker_reads_per_ingress`` and
``broker_writes_per_ingress``; NaN elsewhere. The broker's minor page faults
per message sent are ``broker_faults_per_ingress`` (``/proc/PID/stat``
``minflt``). CPU time is the scheduler's run
time from ``/proc/PID/task/*/schedstat`` (nanoseconds); ``utime + stime``
counts 10 ms ticks, too coarse for short runs at low load.

Egress is counted as the campaign's ``rule`` says
(:mod:`pubsim.calibration.campaign`): by default the first copies received
*within* the measurement window, whenever sent (SYSTEMS.md §4; on loopback
TCP socket buffers hold megabytes, so an overloaded broker can owe a growing
backlog that a drain after the run would still deliver; counting by receive
time exposes it). Every row carries all three counts
(``egress_received_per_s``, ``egress_any_time_per_s``: copies of the window's
messages whenever received, ``egress_sent_and_received_per_s``: the rule
before issue 18) and the latency apart. ``delivery_ratio`` compares the
rule's egress with what the publishers were asked to offer (``rate_per_s x
fanout``).
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from ..analysis.interval_search import latency_trend_s_per_s
from .harness import procfs
from .harness.brokers import BrokerSpec, install_signal_cleanup, read_mosquitto_sys, start_broker
from .harness.cpu import CpuCap, detect_cpu_control
from .harness.loadgen import LoadSpec, PublisherBlocked, SetupTimeout, run_load
from .harness.machine import idle_exit_curve, machine_reference, page_fault_cost
from .harness.passes import SyscallCounter, perf_syscalls_available
from .harness.sockets import FIELDS as SOCKET_FIELDS
from .harness.sockets import SocketSampler, ss_available
from .harness.softirqs import FIELDS as SOFTIRQ_FIELDS
from .harness.softirqs import SoftirqTracer, perf_softirqs_available
from .pacing import pacing_fields
from .virtual import latency_fields

__all__ = ["RealHarness"]

#: Per-message columns kept in a run's latency sample (``latency.parquet``): latency from the publisher's write
#: to the kernel's receive, what the applications see, and the publisher's own delay before the write.
_LATENCY_COLUMNS = ("latency_s", "app_latency_s", "send_delay_s")


class RealHarness:
    """``measure(RunSpec) -> (row, latency sample)`` on real brokers.

    Parameters
    ----------
    campaign : calibration.campaign.Campaign
        For the CPU pinning of broker and clients.
    workdir : path or None
        Where broker configs and logs go (a temporary directory if None).
    sample : int
        Latencies kept per run (uniform random subsample), for CDFs.
    seed : int
        Seed of the subsampling.
    broker_options : mapping or None
        Extra lines of the brokers' configuration files, after the harness's
        own (:class:`pubsim.calibration.harness.brokers.BrokerSpec`
        ``options``; e.g. ``{"sys_interval": 0}`` for Mosquitto).
    """

    def __init__(self, campaign, *, workdir=None, sample=1000, seed=0, broker_options=None):
        self.campaign = campaign
        self.broker_options = dict(broker_options or {})
        self.sample = sample
        self.rng = np.random.default_rng(seed)
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="pubsim-measure-")
        self.workdir = Path(workdir or self._tmp.name)
        self.broker = None
        self._key = None
        self.versions = {}
        self.on_run = None  # optional callback(spec, row), e.g. a progress log
        self._sys_dropped = 0
        self._clients = None  # the load generator's top-weight CPU group, while entered
        self._syscalls_ok = None  # (bool, reason) once checked: perf counts system calls here
        self._softirqs_ok = None  # (bool, reason) once checked: perf traces softirqs here

    # -- broker lifecycle -------------------------------------------------
    @staticmethod
    def _broker_key(spec):
        """What a running broker must match to serve ``spec``: the broker, its cap and the configuration."""
        return (spec.broker, spec.cpu_cap_fraction, spec.config)

    def _ensure_broker(self, spec):

        key = self._broker_key(spec)
        if self._key == key and self.broker is not None:
            return self.broker
        self.close_broker()
        bspec = BrokerSpec(
            kind=spec.broker,
            port=0,
            cpus=tuple(self.campaign.broker_cpus) or None,
            cpu_cap_fraction=spec.cpu_cap_fraction,
            options=self._broker_options(spec),
        )
        wd = self.workdir / f"{spec.broker}-{spec.config}"
        wd.mkdir(parents=True, exist_ok=True)
        self.broker = start_broker(bspec, wd)
        self.versions[spec.broker] = self.broker.version
        self._sys_dropped = 0
        self._key = key
        return self.broker

    def _broker_options(self, spec):
        """The broker's options: the runner's, and a configuration's ZeroMQ high-water mark."""
        if spec.zmq_hwm is None:
            return self.broker_options
        return {**self.broker_options, "hwm": spec.zmq_hwm}

    def close_broker(self):
        if self.broker is not None:
            self.broker.stop()
        self.broker, self._key = None, None

    def close(self):
        self.close_broker()
        if self._clients is not None:
            self._clients.remove()
            self._clients = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self):

        install_signal_cleanup()
        self._clients = _client_group()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def metadata(self):
        """Facts for the campaign's ``meta.json``: CPU control, pinning, versions, and the
        machine reference (:func:`~pubsim.calibration.harness.machine.machine_reference`)."""

        control, reason = detect_cpu_control()
        return {
            "cpu_control": control,
            "cpu_control_note": reason,
            "versions": self.versions,
            "broker_cpus": list(self.campaign.broker_cpus),
            "client_cpus": list(self.campaign.client_cpus),
            "socket_options": "TCP_NODELAY on clients; mosquitto set_tcp_nodelay true",
            "cpu_weight": (
                "broker and load generator in cgroups of the largest CPU weight"
                if self._clients is not None
                else "default CPU weight (no cgroup control, or the harness was not entered)"
            ),
            "machine_reference": machine_reference(),
            "idle_exit": self._idle_exit(),
            "page_fault": self._page_fault(),
            "syscall_counting": self._syscalls_note(),
            "softirq_tracing": self._softirqs_note(),
            "socket_sampling": self._sockets_note(),
        }

    def pair_facts(self, broker, config):
        """The machine before a pair's runs (:func:`pubsim.calibration.campaign.run_campaign`): the
        broker core's idle-exit curve, measured with no broker running (it drifts within a
        campaign: on 2026-11-27 the exit after 5 ms of idle went from 40 to 76 us in an hour)."""
        self.close_broker()
        return {"idle_exit": self._idle_exit(), "page_fault": self._page_fault()}

    def _page_fault(self):
        """A page fault's cost on the broker's core (:func:`~pubsim.calibration.harness.machine.page_fault_cost`)."""
        cpu = self.campaign.broker_cpus[0] if self.campaign.broker_cpus else None
        try:
            return {**page_fault_cost(cpu=cpu), "date": datetime.date.today().isoformat()}
        except OSError as err:
            return {"error": f"{type(err).__name__}: {err}"}

    def _idle_exit(self):
        """The broker core's idle-exit curve (:func:`~pubsim.calibration.harness.machine.idle_exit_curve`)
        on the campaign's cores, or ``{"error": ...}`` where it could not be measured."""
        broker = self.campaign.broker_cpus[0] if self.campaign.broker_cpus else None
        client = self.campaign.client_cpus[0] if self.campaign.client_cpus else None
        try:
            curve = idle_exit_curve(broker_cpu=broker, client_cpu=client)
        except OSError as err:
            return {"error": f"{type(err).__name__}: {err}"}
        return {**curve, "date": datetime.date.today().isoformat()}

    # -- one run ----------------------------------------------------------
    def _load_spec(self, spec, broker):

        cpus = tuple(self.campaign.client_cpus) or None
        user, password = getattr(broker, "mqtt_credentials", None) or (None, None)
        return LoadSpec(
            mqtt_username=user,
            mqtt_password=password,
            protocol=broker.protocol,
            pub_port=broker.pub_port,
            sub_port=broker.sub_port,
            publishers=spec.publishers,
            subscribers=spec.subscribers,
            topics=spec.topics,
            fanout=spec.fanout,
            payload_bytes=spec.payload_bytes,
            qos=spec.qos,
            idle_filters=spec.idle_filters,
            rate_per_s=spec.rate_per_s,
            duration_s=spec.duration_s,
            warmup_s=spec.warmup_s,
            cooldown_s=spec.cooldown_s,
            pub_cpus=cpus,
            sub_cpus=cpus,
            **({} if spec.client_hwm is None else {"zmq_hwm": spec.client_hwm}),
        )

    #: The broker counts as idle when its CPU over one window is below this share of its cap (cores).
    SETTLE_SHARE = 0.1
    SETTLE_WINDOW_S = 0.2
    SETTLE_TIMEOUT_S = 20.0

    def _settle(self, spec):
        """Wait until the running broker of ``spec`` is idle; seconds waited, or None if it never was.

        Runs must be independent, but past its limit a broker can still be
        working off the previous run's backlog when the next run starts
        (RabbitMQ kept its queues' messages for minutes on 2026-11-27, and
        every later run of the search failed at rates it sustains). The
        broker is idle when its CPU over a :attr:`SETTLE_WINDOW_S` window is
        below :attr:`SETTLE_SHARE` of its cap (of one core when uncapped); a
        broker that is not idle within :attr:`SETTLE_TIMEOUT_S` is replaced.
        0 when no broker of ``spec``'s key runs (a fresh one is started).
        """
        if self.broker is None or self._key != self._broker_key(spec):
            return 0.0
        limit = self.SETTLE_SHARE * (spec.cpu_cap_fraction or 1.0)
        t0 = time.monotonic()
        while True:
            before = procfs.sample(self.broker.pid)
            time.sleep(self.SETTLE_WINDOW_S)
            after = procfs.sample(self.broker.pid)
            busy = (after.cpu_run_s - before.cpu_run_s) / max(after.t_s - before.t_s, 1e-9)
            waited = time.monotonic() - t0
            if busy < limit:
                return waited
            if waited >= self.SETTLE_TIMEOUT_S:
                return None

    def __call__(self, spec):

        restarted = False
        settle_s = self._settle(spec)
        if settle_s is None:  # still busy with an earlier run's backlog: measure on a fresh broker
            self.close_broker()
            restarted, settle_s = True, math.nan
        try:
            try:
                broker, result, cpu, cap = self._measure(spec)
            except SetupTimeout:
                # The broker did not answer a new client in time: it is still working
                # off the backlog of the previous run (past its limit the publishers'
                # data sits in its socket buffers). Runs are independent, so measure
                # this one on a fresh broker, once, and say so in the row.
                self.close_broker()
                restarted = True
                broker, result, cpu, cap = self._measure(spec)
        except PublisherBlocked as err:
            self.close_broker()  # it stopped reading its sockets: the next run gets a fresh one
            row = self._blocked_row(spec, err, settle_s)
            if self.on_run is not None:
                self.on_run(spec, row)
            return row, {c: np.zeros(0) for c in _LATENCY_COLUMNS}
        row = self._row(spec, result, cpu, rule=self.campaign.egress_rule)
        row.update(cap)
        row["broker_restarted"] = restarted
        row["broker_settle_s"] = settle_s
        row["broker_dropped"] = self._broker_dropped(broker)
        row["host_load_1min"] = os.getloadavg()[0]  # shared machine: how busy the other cores were
        lat = {c: np.asarray(result.latencies_s(c)) for c in _LATENCY_COLUMNS}
        n = lat["latency_s"].size
        if n > self.sample:
            keep = np.sort(self.rng.choice(n, self.sample, replace=False))
            lat = {c: x[keep] for c, x in lat.items()}
        if self.on_run is not None:
            self.on_run(spec, row)
        return row, lat

    @staticmethod
    def _blocked_row(spec, err, settle_s):
        """The row of a run whose publishers the broker blocked past the run's deadline.

        Nothing was counted (the clients were stopped), so rates and latency
        are missing; the run is unsustainable by the rule (NaN fails it) and
        says why in ``run_error``.
        """
        return {
            "offered_per_s": spec.rate_per_s,
            "ingress_rate_per_s": math.nan,
            "egress_rate_per_s": math.nan,
            "sustainability": math.nan,
            "delivery_ratio": math.nan,
            "run_error": f"publishers blocked: {err}",
            "broker_restarted": True,
            "broker_settle_s": settle_s,
            "host_load_1min": os.getloadavg()[0],
        }

    def _count_syscalls(self):
        """Whether ``perf stat`` counts the broker's system calls here (checked once)."""
        if self._syscalls_ok is None:
            self._syscalls_ok = perf_syscalls_available(SYSCALLS)
        return self._syscalls_ok[0]

    def _trace_softirqs(self):
        """Whether runs trace the softirqs of the broker's cores: asked by the campaign
        (``trace_softirqs``), on pinned cores, and ``perf record`` works here (checked once)."""
        if not (self.campaign.trace_softirqs and self.campaign.broker_cpus):
            return False
        if self._softirqs_ok is None:
            self._softirqs_ok = perf_softirqs_available()
        return self._softirqs_ok[0]

    def _softirqs_note(self):
        if not self.campaign.trace_softirqs:
            return "off (campaign trace_softirqs: false)"
        if not self._trace_softirqs():
            reason = self._softirqs_ok[1] if self._softirqs_ok else "the broker is not pinned (broker_cpus)"
            return f"not traced: {reason}"
        return "perf record, irq:softirq_entry/exit on the broker's cores, from the common start"

    def _sample_sockets(self):
        """Whether runs sample the publishers' connections (``sample_sockets``, and ``ss`` is here)."""
        return self.campaign.sample_sockets and ss_available()[0]

    def _sockets_note(self):
        if not self.campaign.sample_sockets:
            return "off (campaign sample_sockets: false)"
        ok, reason = ss_available()
        return "ss -tmi on the broker's port every 0.2 s, windows from the common start" if ok else reason

    def _syscalls_note(self):
        ok, reason = self._count_syscalls(), self._syscalls_ok[1]
        return "perf stat, syscalls:sys_enter_* tracepoints, from the common start" if ok else f"not counted: {reason}"

    def _measure(self, spec):
        """One load run: ``(broker, LoadResult, CPU diff, quota fields)``.

        The broker's counters are read when the clients are ready and the
        broker has worked off the generator's probe rounds (before the
        common start, :func:`run_load`'s ``on_start``, waiting as
        :meth:`_settle`: ``broker_probe_settle_s``) and after the drain, so
        the set-up (connections, subscriptions, probes) is not charged to
        the run's messages; its CPU time is reported apart
        (``broker_setup_cpu_s``).
        """
        broker = self._ensure_broker(spec)
        first = procfs.sample(broker.pid)
        marks = {}
        counter = SyscallCounter(broker.pid, SYSCALLS, enabled=False) if self._count_syscalls() else None
        tracer = SoftirqTracer(self.campaign.broker_cpus, broker.pid, enabled=False) if self._trace_softirqs() else None
        sockets = SocketSampler(broker.pub_port) if self._sample_sockets() else None
        probes = [p for p in (counter, tracer, sockets) if p is not None]  # each starts at its enable()

        def started():  # the probes have stopped: let the broker work them off, then read its counters
            marks["settle_s"] = self._settle(spec)
            marks["cap"], marks["cpu"] = _cap_stat(broker), procfs.sample(broker.pid)
            marks["cores"] = procfs.core_times()
            for probe in probes:
                probe.enable()

        with contextlib.ExitStack() as stack:
            for probe in probes:
                stack.enter_context(probe)
            result = run_load(self._load_spec(spec, broker), on_start=started)
            after = procfs.sample(broker.pid)
        cpu = procfs.diff(marks["cpu"], after)
        cpu["syscalls"] = counter.counts if counter is not None else {}
        cpu["setup_cpu_s"] = _cpu_s(procfs.diff(first, marks["cpu"]))
        cpu["probe_settle_s"] = math.nan if marks["settle_s"] is None else marks["settle_s"]
        fields = _cap_fields(marks["cap"], _cap_stat(broker), cpu["wall_s"])
        fields.update(_core_fields(marks["cores"], procfs.core_times(), self.campaign.broker_cpus, cpu["wall_s"]))
        fields.update(tracer.fields() if tracer is not None else dict.fromkeys(SOFTIRQ_FIELDS, math.nan))
        fields.update(sockets.fields() if sockets is not None else dict.fromkeys(SOCKET_FIELDS, math.nan))
        return broker, result, cpu, fields

    def _broker_dropped(self, broker):
        """Messages the broker itself dropped during the run (Mosquitto ``$SYS``), else NaN.

        Mosquitto drops QoS 0 messages to subscribers whose queue is full
        without telling anyone; its ``$SYS/broker/publish/messages/dropped``
        counter (cumulative, updated every second) tells loss in the broker
        apart from loss elsewhere. Costs up to one ``sys_interval`` per run.
        """
        if broker.kind != "mosquitto":
            return math.nan

        try:
            total = int(
                read_mosquitto_sys(broker.pub_port, timeout_s=3.0).get("$SYS/broker/publish/messages/dropped", 0)
            )
        except (TimeoutError, OSError):
            return math.nan
        dropped, self._sys_dropped = total - self._sys_dropped, total
        return dropped

    @staticmethod
    def _row(spec, result, cpu, *, rule="received"):
        s = result.summary()
        w0, w1 = result.window_s
        window = w1 - w0
        sent = max(int(s["sent_total"]), 1)
        d = result.timed(exact=False)
        in_window = int(((d["t_recv_s"] >= w0) & (d["t_recv_s"] < w1)).sum())
        counts = {
            "received": s["egress_received_in_window_per_s"],
            "sent": s["egress_rate_per_s"],
            "sent_and_received": in_window / window,
        }
        egress = counts[rule]
        ingress = s["ingress_rate_per_s"]
        cpu_s = _cpu_s(cpu)
        row = {
            "offered_per_s": spec.rate_per_s,
            "ingress_rate_per_s": ingress,
            "egress_rate_per_s": egress,
            "egress_rule": rule,
            "egress_received_per_s": counts["received"],
            "egress_any_time_per_s": counts["sent"],
            "egress_sent_and_received_per_s": counts["sent_and_received"],
            "drain_complete": bool(s["drain_complete"]),
            "sustainability": egress / (ingress * spec.fanout) if ingress > 0 else math.nan,
            "delivery_ratio": egress / (spec.rate_per_s * spec.fanout),
            "loss_rate": s["loss_rate"],
            "duplicates": s["duplicates"],
            "generator_saturated": bool(s["generator_saturated"]),
            "subscriber_saturated": bool(s["subscriber_saturated"]),
            "publisher_lag_max_s": s["publisher_lag_max_s"],
            "subscriber_sleeps_per_copy": s["subscriber_sleeps_per_copy"],
            "subscriber_cpu_per_copy_s": s["subscriber_cpu_per_copy_s"],
            "client_cpu_cores": s["client_cpu_cores"],
            "client_core_busy_fraction": s["client_core_busy_fraction"],
            "demand_s_per_ingress": cpu_s / sent,
            "wakeups_per_ingress": cpu["voluntary_switches"] / sent,
            "broker_faults_per_ingress": cpu.get("minor_faults", math.nan) / sent,
            "broker_cpu_s": cpu_s,
            "broker_setup_cpu_s": cpu.get("setup_cpu_s", math.nan),
            "broker_probe_settle_s": cpu.get("probe_settle_s", math.nan),
            **_syscall_fields(cpu.get("syscalls", {}), sent),
            "broker_cpu_ticks_s": cpu["cpu_time_s"],
            "broker_utilization": cpu_s / cpu["wall_s"] if cpu["wall_s"] > 0 else math.nan,
            "sent_total": sent,
            "window_s": window,
            "latency_trend_s_per_s": latency_trend_s_per_s(d["t_send_s"], d["latency_s"]) if len(d) else 0.0,
        }
        row.update(latency_fields(result.latencies_s("latency_s")))
        row.update(
            {
                k: s[k]
                for k in s
                if k in ("latency_clock", "stamp_exact_fraction")
                or k.startswith(("app_latency_", "client_delay_", "send_delay_", "socket_wait_", "latency_any_"))
            }
        )
        row.update(pacing_fields(result.batch_sends))
        return row


#: System calls counted per run (:class:`~pubsim.calibration.harness.passes.SyscallCounter`), by row field:
#: event-loop passes (``epoll_wait``; Go's runtime and others call ``epoll_pwait``), reads and writes.
_SYSCALL_GROUPS = {
    "broker_passes_per_ingress": ("epoll_wait", "epoll_pwait"),
    "broker_reads_per_ingress": ("read", "recvfrom", "readv"),
    "broker_writes_per_ingress": ("write", "sendto", "writev"),
}
SYSCALLS = tuple(call for calls in _SYSCALL_GROUPS.values() for call in calls)


def _cpu_s(diff):
    """CPU seconds of a :func:`~pubsim.calibration.harness.procfs.diff`: the scheduler's run
    time where it counted any, else the coarser ``utime + stime`` ticks."""
    return diff["run_s"] if diff.get("run_s", 0) > 0 else diff["cpu_time_s"]


def _syscall_fields(counts, sent):
    """The broker's event-loop passes, reads and writes per message sent (NaN where not counted)."""
    if not counts:
        return dict.fromkeys(_SYSCALL_GROUPS, math.nan)
    return {k: sum(counts.get(c) or 0.0 for c in calls) / sent for k, calls in _SYSCALL_GROUPS.items()}


def _client_group():
    """Move this process (and so the clients it starts) into a top-weight CPU group.

    On a machine shared with other work, the load generator then keeps its
    core while it needs it, and the broker's capped group has the same
    weight (:class:`~pubsim.calibration.harness.cpu.CpuCap`, ``top_weight``).
    Returns None, changing nothing, without a writable cgroup CPU controller.
    """
    if detect_cpu_control()[0] is None:
        return None
    group = CpuCap(f"clients-{os.getpid()}", None, top_weight=True).create()
    try:
        group.add(os.getpid())
    except OSError:
        group.remove()
        return None
    return group


def _cap_stat(broker):
    cap = getattr(broker, "cpu_cap", None)
    return cap.stat() if cap is not None else {}


def _core_fields(before, after, cpus, wall_s):
    """Interrupt, softirq and stolen time on the broker's cores during a run, s per s of it.

    ``broker_core_irq_s_per_s``, ``broker_core_softirq_s_per_s``,
    ``broker_core_steal_s_per_s``, summed over the broker's cores (all cores
    when it is not pinned), from ``/proc/stat`` (clock ticks). The kernel of
    the campaigns' machine has no ``IRQ_TIME_ACCOUNTING``: interrupt time on
    a core is charged to whichever task runs there, the capped broker
    included, so it can spend the broker's quota; and ``/proc/stat`` then
    samples it by scheduler tick, a whole tick per hit (74-101 ms/s where a
    trace read 47-56: ``harness/softirqs.py`` times it exactly;
    calibration/README, "Latency from wire to wire").
    """
    cores = [c for c in (cpus or sorted(after)) if c in before and c in after]
    out = {}
    for column in procfs.CORE_COLUMNS:
        ticks = sum(after[c][column] - before[c][column] for c in cores)
        out[f"broker_core_{column}_s_per_s"] = ticks / procfs.CLK_TCK / wall_s if cores and wall_s > 0 else math.nan
    return out


def _cap_fields(before, after, wall_s):
    """How hard the CPU quota bound during a run (NaN without a quota).

    ``cap_throttled_period_fraction`` is the share of the cgroup's enforcement
    periods in which the broker ran out of quota; ``cap_throttled_s_per_s``
    the time its tasks were held per second of the run. They tell a broker
    held by its quota from one that waited for its clients, and show stalls
    that the CPU time alone hides (issue 18).
    """
    if not before or not after:
        return {"cap_throttled_period_fraction": math.nan, "cap_throttled_s_per_s": math.nan}
    periods = after["periods"] - before["periods"]
    throttled = after["throttled_periods"] - before["throttled_periods"]
    held_s = after["throttled_s"] - before["throttled_s"]
    return {
        "cap_throttled_period_fraction": throttled / periods if periods > 0 else 0.0,
        "cap_throttled_s_per_s": held_s / wall_s if wall_s > 0 else math.nan,
    }
