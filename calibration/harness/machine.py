"""A reference measurement of the machine, recorded with every campaign.

Calibrated broker costs are a property of the machine on the day they were
measured. On the project's VM, Mosquitto's CPU per message on loopback grew
by about 1.3x between two days (2026-11-23 and 2026-11-25) while a
single-thread CPU benchmark (sysbench ``cpu``) stayed the same: the cost of
the loopback system-call path moved, not the CPU. A campaign therefore
records the round-trip rate of a TCP loopback ping-pong (one byte each way
between two processes, the path a broker's reads and writes take), so that
two campaigns can be compared before their brokers are.
"""

from __future__ import annotations

import math
import mmap
import os
import socket
import statistics
import struct
import time

from .rxstamp import ANCILLARY_BYTES, RealToMonotonic, enable_kernel_stamps, kernel_time_ns

__all__ = [
    "EXIT_GAPS_S",
    "compare_machines",
    "idle_exit_curve",
    "idle_wakeup_latency",
    "loopback_round_trips_per_s",
    "machine_reference",
    "machine_summary",
    "page_fault_cost",
]


def loopback_round_trips_per_s(duration_s: float = 0.3) -> float:
    """Round trips per second of a one-byte TCP ping-pong on 127.0.0.1.

    A forked child echoes each byte back; the parent sends and waits for
    ``duration_s`` seconds of wall time.

    Parameters
    ----------
    duration_s : float
        Wall time to measure for, s.

    Returns
    -------
    float
        Round trips per second of wall time.
    """
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        pid = os.fork()
        if pid == 0:  # the echo child: never returns
            _echo(port)
        conn, _ = server.accept()
    try:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n, start = 0, time.perf_counter()
        end = start + duration_s
        while True:
            conn.sendall(b"x")
            if not conn.recv(1):
                raise OSError("the echo process closed the connection")
            n += 1
            if n % 64 == 0 and time.perf_counter() >= end:
                break
        return n / (time.perf_counter() - start)
    finally:
        conn.close()
        os.waitpid(pid, 0)


def _echo(port: int) -> None:
    code = 0
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                b = s.recv(1)
                if not b:
                    break
                s.sendall(b)
    except OSError:
        code = 1
    os._exit(code)


def machine_reference(repeats: int = 3, duration_s: float = 0.3) -> dict:
    """The machine reference of a campaign's ``meta.json``: the median of ``repeats`` ping-pongs.

    Returns
    -------
    dict
        ``loopback_round_trips_per_s`` (median), ``samples`` and ``method``.
    """
    samples = [loopback_round_trips_per_s(duration_s) for _ in range(repeats)]
    return {
        "loopback_round_trips_per_s": statistics.median(samples),
        "samples": samples,
        "method": f"one-byte TCP ping-pong on 127.0.0.1 between two processes, {duration_s} s x {repeats}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


_WAKE_MSG = struct.Struct("<qq")  # send time (CLOCK_MONOTONIC ns), sequence number


def idle_wakeup_latency(
    gaps_s=(0.0001, 0.0003, 0.001, 0.002, 0.005, 0.02),
    *,
    messages: int = 100,
    sender_cpu: int | None = 0,
    receiver_cpu: int | None = 1,
) -> list[dict]:
    """One-way loopback latency after the receiver has idled for a given time.

    A receiver process, pinned to ``receiver_cpu``, blocks in ``recvmsg`` on
    a TCP loopback socket; the sender, pinned to ``sender_cpu``, sends a
    16-byte message after each pause of ``gap_s``, so that the receiver's
    core has idled for about that long. Per message the receiver records
    the latency to the kernel's receive time (``SO_TIMESTAMPNS``: stamped
    in the sender's softirq, before any wake-up of the receiver's core) and
    to its own read; their difference is the receiver's wake-up: the time
    its core takes to leave its idle state and run it. On a VM whose
    guest halts at once when idle (``haltpoll.guest_halt_poll_ns=0``) a
    longer idle lets the host park the vCPU more deeply, and waking it
    costs more.

    Parameters
    ----------
    gaps_s : sequence of float
        Pauses between messages, s (``time.sleep``: the real pause is
        recorded, a little longer).
    messages : int
        Messages per pause.
    sender_cpu, receiver_cpu : int or None
        Cores to pin the two processes to (None: not pinned).

    Returns
    -------
    list of dict
        One record per message: ``gap_s`` (target pause), ``idle_s`` (time
        since the previous send), ``kernel_latency_s``, ``wakeup_s``
        (receiver's read minus kernel receive time), ``latency_s`` (to the
        receiver's read).
    """
    total = len(gaps_s) * messages
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        results_r, results_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the receiver: never returns
            os.close(results_r)
            _wake_receiver(port, total, receiver_cpu, results_w)
        os.close(results_w)
        conn, _ = server.accept()
    records = []
    affinity = os.sched_getaffinity(0)  # the caller's, restored after: only the probe is pinned
    try:
        if sender_cpu is not None:
            os.sched_setaffinity(0, {sender_cpu})
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _until_stamped(conn)
        sent = []
        last = time.monotonic_ns()
        for gap in gaps_s:
            for _ in range(messages):
                time.sleep(gap)
                now = time.monotonic_ns()
                conn.sendall(_WAKE_MSG.pack(now, len(sent)))
                sent.append((gap, (now - last) / 1e9))
                last = now
        raw = b""
        with os.fdopen(results_r, "rb") as f:
            raw = f.read()
    finally:
        os.sched_setaffinity(0, affinity)
        conn.close()
        os.waitpid(pid, 0)
    got = struct.iter_unpack("<qqq", raw)  # seq, kernel latency ns (-1: none), app latency ns
    for seq, kernel_ns, app_ns in got:
        gap, idle = sent[seq]
        kernel = kernel_ns / 1e9 if kernel_ns >= 0 else float("nan")
        records.append(
            {
                "gap_s": gap,
                "idle_s": idle,
                "kernel_latency_s": kernel,
                "wakeup_s": app_ns / 1e9 - kernel,
                "latency_s": app_ns / 1e9,
            }
        )
    return records


#: Probes the sender may send before the receiver's reads carry a kernel stamp (1 ms apart).
_STAMP_PROBES = 2000


def _until_stamped(conn):
    """Send one-byte probes until the receiver reports a kernel-stamped read (``b"r"``).

    Linux turns receive stamping on through a deferred work item
    (``net_enable_timestamp`` schedules ``netstamp_work`` when no socket had
    it on), so the first packets after ``SO_TIMESTAMPNS`` may carry no
    stamp; on a fresh machine the first measured message did.
    """
    for _ in range(_STAMP_PROBES):
        conn.sendall(b"p")
        if conn.recv(1) != b"n":
            return
        time.sleep(0.001)


def _answer_probes(s, *, stamped=True):
    """The receiver's side of :func:`_until_stamped`: ``b"n"`` per unstamped probe, then ``b"r"``.

    ``stamped`` False (the kernel refused ``SO_TIMESTAMPNS``): ready at the first probe.
    """
    clocks = RealToMonotonic()
    for _ in range(_STAMP_PROBES if stamped else 1):
        data, anc, _, _ = s.recvmsg(1, ANCILLARY_BYTES)
        if not data:
            raise OSError("the sender closed the connection")
        clocks.refresh(time.monotonic_ns())
        if not stamped or kernel_time_ns(anc, clocks.offset_ns) is not None:
            break
        s.sendall(b"n")
    s.sendall(b"r")


def _wake_receiver(port, total, cpu, results_w):
    code = 0
    try:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        out = bytearray()
        clocks = RealToMonotonic()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _answer_probes(s, stamped=enable_kernel_stamps(s))
            buf = b""
            for _ in range(total):
                while len(buf) < _WAKE_MSG.size:
                    data, anc, _, _ = s.recvmsg(4096, ANCILLARY_BYTES)
                    now = time.monotonic_ns()
                    if not data:
                        raise OSError("the sender closed the connection")
                    clocks.refresh(now)
                    t_kernel = kernel_time_ns(anc, clocks.offset_ns)
                    buf += data
                t_send, seq = _WAKE_MSG.unpack_from(buf)
                buf = buf[_WAKE_MSG.size :]
                out += struct.pack("<qqq", seq, t_kernel - t_send if t_kernel is not None else -1, now - t_send)
        with os.fdopen(results_w, "wb") as f:
            f.write(out)
    except OSError:
        code = 1
    os._exit(code)


def page_fault_cost(*, cpu: int | None = 1, pages: int = 64, reps: int = 100, rounds: int = 5) -> dict:
    """What a minor page fault of anonymous memory costs on this machine, s per page.

    Maps ``pages`` pages of anonymous memory, writes one byte to each (the
    first write to a page faults it in: the kernel allocates, zeroes and
    charges a page), unmaps them, ``reps`` times, and subtracts the same
    writes to pages already mapped (the interpreter's own cost): the fault,
    its share of the ``mmap`` / ``munmap`` calls and the release of the page,
    per page. The best of ``rounds`` rounds, pinned to ``cpu``. A machine fact
    recorded with every campaign for comparison, not used by the fit: on
    2026-12-08 it gave 2.8-3.5 us where Mosquitto's fitted cost per page
    faulted in again (:class:`pubsim.models.params.heap.HeapTrimParams`) was
    1.75 us and its allocator A/B implied 2.7 us (calibration/README.md,
    "Large messages: the heap given back and faulted in again").

    Returns
    -------
    dict
        ``cost_s`` (s per page), ``pages``, ``reps``, ``cpu``, ``method``.
    """
    size = pages * mmap.PAGESIZE
    affinity = os.sched_getaffinity(0)

    def faulting():
        t = time.perf_counter()
        for _ in range(reps):
            m = mmap.mmap(-1, size)
            for i in range(0, size, mmap.PAGESIZE):
                m[i] = 1
            m.close()
        return (time.perf_counter() - t) / (reps * pages)

    def warm():
        m = mmap.mmap(-1, size)
        for i in range(0, size, mmap.PAGESIZE):
            m[i] = 1
        t = time.perf_counter()
        for _ in range(reps):
            for i in range(0, size, mmap.PAGESIZE):
                m[i] = 1
        out = (time.perf_counter() - t) / (reps * pages)
        m.close()
        return out

    try:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        cost = min(faulting() for _ in range(rounds)) - min(warm() for _ in range(rounds))
    finally:
        os.sched_setaffinity(0, affinity)
    return {
        "cost_s": max(cost, 0.0),
        "pages": pages,
        "reps": reps,
        "cpu": cpu,
        "method": (
            f"mmap {pages} anonymous pages, write a byte to each, munmap, {reps} times, less the same writes "
            f"to mapped pages; best of {rounds} rounds (calibration.harness.machine.page_fault_cost)"
        ),
    }


#: The idle times the curve of :func:`idle_exit_curve` is measured at, s (:data:`pubsim.sim.kernels.EXIT_MAX_POINTS`).
EXIT_GAPS_S = (0.0001, 0.0003, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)


def idle_exit_curve(
    *, broker_cpu: int | None = 1, client_cpu: int | None = 0, gaps_s=EXIT_GAPS_S, messages: int = 40
) -> dict:
    """The broker core's idle-exit curve (:class:`pubsim.models.params.idle.IdleExitParams`), measured.

    :func:`idle_wakeup_latency` twice, from the client core to the broker
    core: once with the broker core idle between messages, once with it
    kept busy by a spinning process of the lowest priority (``SCHED_IDLE``,
    which the receiver preempts at once), so that its core never enters
    an idle state. The receiver's wake-up with the core busy is the
    scheduler's and the reader's own path; what an idle core adds to it is
    the exit latency: per pause, the median wake-up on the idle core minus
    the median on the busy one, at the median measured idle time, clipped
    at 0 and made non-decreasing (a longer idle never wakes faster; the
    clip and the running maximum absorb noise of a few microseconds).

    Returns
    -------
    dict
        ``idle_s`` and ``exit_s`` (the curve, s), ``wake_idle_s`` and
        ``wake_busy_s`` (the medians it came from, s), ``messages``,
        ``method``, ``broker_cpu``, ``client_cpu``.
    """
    idle = _by_gap(idle_wakeup_latency(gaps_s, messages=messages, sender_cpu=client_cpu, receiver_cpu=broker_cpu))
    with _spinning(broker_cpu):
        busy = _by_gap(idle_wakeup_latency(gaps_s, messages=messages, sender_cpu=client_cpu, receiver_cpu=broker_cpu))
    idle_s, exit_s, level = [], [], 0.0
    for gap in gaps_s:
        if gap not in idle or gap not in busy:  # the receiver failed: no record of this pause
            raise OSError(f"no wake-up measured after the {gap * 1e3:g} ms pauses")
        level = max(level, idle[gap]["wakeup_s"] - busy[gap]["wakeup_s"], 0.0)
        idle_s.append(idle[gap]["idle_s"])
        exit_s.append(level)
    return {
        "idle_s": idle_s,
        "exit_s": exit_s,
        "wake_idle_s": [idle[g]["wakeup_s"] for g in gaps_s],
        "wake_busy_s": [busy[g]["wakeup_s"] for g in gaps_s],
        "messages": messages,
        "broker_cpu": broker_cpu,
        "client_cpu": client_cpu,
        "method": (
            "one-way loopback TCP, client core -> broker core, a 16-byte message after each pause; "
            "median wake-up (read minus the kernel's SO_TIMESTAMPNS receive time) with the broker "
            "core idle minus the same with it kept busy by a SCHED_IDLE spinner, per pause, "
            "clipped at 0 and non-decreasing (calibration.harness.machine.idle_exit_curve)"
        ),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _by_gap(records):
    """Median ``idle_s`` and ``wakeup_s`` per target pause.

    Raises ``OSError`` when a pause has no message with a kernel receive
    time (a caller records the curve as not measured instead of failing).
    """
    out = {}
    for gap in sorted({r["gap_s"] for r in records}):
        rows = [r for r in records if r["gap_s"] == gap and r["wakeup_s"] == r["wakeup_s"]]
        if not rows:
            raise OSError(f"no kernel-stamped wake-up after the {gap * 1e3:g} ms pauses")
        out[gap] = {
            "idle_s": statistics.median(r["idle_s"] for r in rows),
            "wakeup_s": statistics.median(r["wakeup_s"] for r in rows),
        }
    return out


class _spinning:
    """A busy-looping child at ``SCHED_IDLE`` priority pinned to ``cpu`` while the block runs."""

    def __init__(self, cpu):
        self.cpu = cpu
        self.pid = None

    def __enter__(self):
        self.pid = os.fork()
        if self.pid == 0:
            try:
                if self.cpu is not None:
                    os.sched_setaffinity(0, {self.cpu})
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
                while True:
                    pass
            finally:
                os._exit(0)
        time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        return False


#: Pauses (s) at most which an idle-exit curve's busy-core wake-up counts as short, and at least which as long.
SHORT_PAUSE_S, LONG_PAUSE_S = 0.0011, 0.005
#: Ratio between two machines' figures past which :func:`compare_machines` flags them.
MACHINE_TOLERANCE = 1.5


def machine_summary(meta: dict) -> dict:
    """A campaign's machine in four figures, from its ``meta.json`` (``meta``, a dict).

    Returns
    -------
    dict
        ``kernel`` (the kernel's release string: one VM image build is one
        machine), ``loopback_round_trips_per_s`` (:func:`machine_reference`),
        and ``wake_short_s`` / ``wake_long_s``: the median busy-core wake-up
        of the broker core after pauses of at most :data:`SHORT_PAUSE_S` and
        at least :data:`LONG_PAUSE_S` (``wake_busy_s`` of
        :func:`idle_exit_curve`, over the campaign's curve and those measured
        before each pair, ``pair_facts``), s. The wake-up is the scheduler's
        and the reader's path, which a broker's light-load CPU per message
        follows and a ping-pong's throughput does not (calibration/README.md,
        "The machine drifts"). NaN where not recorded.
    """
    curves = [meta.get("idle_exit")] + [f.get("idle_exit") for f in (meta.get("pair_facts") or {}).values()]
    short, long_ = [], []
    for c in curves:
        if not isinstance(c, dict) or "wake_busy_s" not in c:
            continue
        for gap, wake in zip(EXIT_GAPS_S, c["wake_busy_s"]):
            if gap <= SHORT_PAUSE_S:
                short.append(wake)
            elif gap >= LONG_PAUSE_S:
                long_.append(wake)
    ref = meta.get("machine_reference") or {}
    nan = float("nan")
    return {
        "kernel": str(meta.get("kernel", "")),
        "loopback_round_trips_per_s": float(ref.get("loopback_round_trips_per_s") or nan),
        "wake_short_s": statistics.median(short) if short else nan,
        "wake_long_s": statistics.median(long_) if long_ else nan,
    }


def compare_machines(named_metas, tolerance: float = MACHINE_TOLERANCE) -> list[dict]:
    """How the machines of several campaigns differ from the first one's: tidy records.

    Parameters
    ----------
    named_metas : sequence of (str, dict)
        Each campaign's name and ``meta.json``, the reference first.
    tolerance : float
        A figure differs when its ratio to the reference's is above
        ``tolerance`` or below ``1 / tolerance`` (> 1).

    Returns
    -------
    list of dict
        One record per later campaign and figure of :func:`machine_summary`:
        ``campaign``, ``figure``, ``value``, ``reference``, ``ratio`` (NaN for
        the kernel, or where either is not recorded) and ``differs`` (the
        kernel's string differs, or the ratio is out of tolerance).
    """
    if not tolerance > 1:
        raise ValueError(f"tolerance must be > 1, got {tolerance}")
    (_, first), *rest = named_metas
    ref = machine_summary(first)
    out = []
    for name, meta in rest:
        for figure, value in machine_summary(meta).items():
            out.append(_record(name, figure, value, ref[figure], tolerance))
    return out


def _record(campaign, figure, value, reference, tolerance):
    """One figure of :func:`compare_machines` (a kernel string differs or not; a number by its ratio)."""
    if figure == "kernel":
        ratio, differs = float("nan"), value != reference
    else:
        ratio = value / reference if reference > 0 else float("nan")
        differs = math.isfinite(ratio) and not 1 / tolerance <= ratio <= tolerance
    return {
        "campaign": campaign,
        "figure": figure,
        "value": value,
        "reference": reference,
        "ratio": ratio,
        "differs": bool(differs),
    }
