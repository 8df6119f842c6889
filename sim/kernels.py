"""Per-message station arithmetic, compiled with numba.

A FIFO station whose service time is known on arrival needs no event per
message: with ``c`` servers the next message starts at
``max(admission, earliest server free time)`` and departs ``service`` later
(Lindley's recursion generalised to c servers, Kiefer & Wolfowitz 1955). A
finite buffer keeps a min-heap of the departure times (and sizes) of the
messages in the station to decide admission.

:func:`fifo_offer` is the one-message step. :func:`fifo_run` applies it to an
arrival-ordered batch; both drivers call :func:`fifo_run` (the reference one
message at a time). No fast-math: IEEE arithmetic keeps the two bit-identical.

Speed. The helpers are inlined into their callers (``inline="always"``): a
numba call that passes arrays pays reference counting per array per call.
The two commonest stations run as one loop with the state in local
variables, the same operations in the same order as :func:`fifo_offer`
(``tests/kernel/test_fast_path_kernels.py`` checks it): one server with no
buffer limit (:func:`_open_run`: links), and one server, drop-newest and a
message limit only (:func:`_ring_run`: the usual broker). One server departs
messages in admission order, so there the departures in the station are a
ring, not a heap (:func:`_ring_offer`). About 3 and 15 ns per message
against 36 and 200 ns for a :func:`fifo_offer` call per message.

State layout (arrays so that numba can mutate them in place)

* ``fs`` float64[FS_LEN] (61): admission floor (FIFO admission under back-pressure),
  bytes in station, byte capacity (inf = none), extra service when a message
  finds its server idle (wake-up cost, s); CPU quota per period (s, inf =
  none), quota period (s), index of the current period, CPU used in it (s);
  total work served (s) and messages served, over the whole run; then the
  idle-exit curve (:func:`idle_exit_s`): its number of points (0 = none),
  up to :data:`EXIT_MAX_POINTS` idle times (s, increasing) and as many exit
  latencies (s); then flow control (:func:`set_flow_control`): the bytes in
  the station above which an admitted message costs more, that extra cost's
  fixed part (s) and its part per byte of the message (s/B); zeros: none;
  then the speed drift (:func:`set_speed_drift`): its log-sd (0 = none), its
  correlation time (s), the key of its counter-based stream, and the quota
  period, log factor and factor last drawn; then the window in which
  throttled periods are counted (:func:`set_throttle_window`) and the count;
  then the sleep entry (s, :func:`wakes`; 0 = none) and the wake-ups charged
  in that window (:func:`count_woke`); then the scheduler tick at which a
  busy server's quota is checked (:func:`set_quota_tick`; 0 = at every
  instant) and when its last service ended; then the wake-up curve
  (:func:`set_wake_curve`): its number of points (0 = none), up to
  :data:`EXIT_MAX_POINTS` idle times (s) and as many shares, and the share
  of the message's own work a full wake-up adds.

Quota checked at ticks (:func:`set_quota_tick`). Linux charges a task's
CFS runtime in ``update_curr`` (kernel/sched/fair.c), which runs at the
scheduler tick (``CONFIG_HZ``) and when the task itself sleeps, wakes or is
switched; ``account_cfs_rq_runtime`` throttles only then. So a server that
works without a break runs past its quota until the next tick, and the
deficit is repaid from the next periods' quotas (``distribute_cfs_runtime``
gives a throttled queue ``-runtime_remaining + 1`` first): it is throttled
for whole periods while the deficit lasts. Here a busy server is checked at
the ticks (multiples of the tick) and when its service starts after a gap
(a wake-up); CPU used past the quota is carried into the next periods. With
one server only (the state holds one last end).

Sleep entry. A server that ran out of work less than ``sleep_entry`` ago
is still on its way to sleep: a message that comes then is served at once,
without the wake-up's extra work (``IDLE_EXTRA``) and without an exit
latency (``BrokerParams.sleep_entry_s``).

Idle exit. A server that has idled for ``t`` seconds needs ``exit(t)`` to
leave its idle state before it serves a message (a core's cpuidle exit
latency; on a VM, the halted vCPU's wake-up through the host). The message
starts that much later; it is latency, not work: it is neither charged to
the CPU quota nor counted as work. ``exit`` is piecewise linear through
``(0, 0)`` and the curve's points, constant after the last one.

Wake-up by idle time (:func:`set_wake_curve`, :func:`wake_extra_s`). A
message that wakes its server pays ``IDLE_EXTRA`` more work. With a wake-up
curve it pays ``share(t) x (IDLE_EXTRA + WAKE_WORK x own work)`` instead,
``t`` the time the server idled and ``share`` piecewise linear through
``(0, 0)`` and the curve's points, constant after the last one: the longer
a core idled, the colder the caches and TLB the broker finds (on a VM the
host ran other work on the core meanwhile), so the wake-up's own path and
the first message's work take longer. Unlike the exit latency this is work:
charged to the quota and counted as work.

CPU quota (Linux CFS bandwidth control, ``cpu.cfs_quota_us`` /
``cpu.cfs_period_us``): the servers together may work ``quota`` seconds per
``period``; a message is served at full speed while budget remains, and
when the budget is spent its server stalls until the next period starts.
So a lightly loaded capped broker is as fast as an uncapped one, its
capacity is ``quota / period`` cores, and near the limit messages wait out
whole periods (Turner et al., "CPU bandwidth control for CFS", Linux
Symposium 2010). Budget is charged in service-start order; with several
servers whose services overlap a period boundary this is an approximation.
* ``ist`` int64[3] or int64[4]: messages in the heap, message capacity (-1 = none), policy
  and (if present) the head slot of the departure ring (:func:`_ring_offer`: one
  server, drop-newest, message capacity only; ``hdep`` then holds at least the capacity).
* ``free`` float64[c]: time each server becomes free.
* ``hdep``/``hsize`` float64[h]: heap of departure times and sizes.

Speed drift (:func:`set_speed_drift`; with or without a quota, whose
period it follows). In quota period
``p`` every second of work takes ``S_p`` seconds of CPU (and of quota), with
``log S`` a stationary Gaussian AR(1) over the periods (an Ornstein-Uhlenbeck
process sampled at them: correlation ``exp(-gap / time)``), ``E[S] = 1``.
The normal draws come from a counter-based generator keyed by the station's
stream and the period index (splitmix64, Steele et al. 2014; Salmon et al.
2011, "Parallel random numbers: as easy as 1, 2, 3"), so a period's factor
depends only on the key and the periods visited before, not on how the
arrivals are split into calls: both drivers agree. ``WORK`` counts nominal
work (at speed 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

# state indices
ADMIT_FLOOR, BYTES_IN, CAP_BYTES, IDLE_EXTRA = 0, 1, 2, 3
QUOTA, PERIOD, PERIOD_IDX, USED, WORK, SERVED = 4, 5, 6, 7, 8, 9
EXIT_N, EXIT_MAX_POINTS = 10, 8  # idle-exit curve: number of points, most points
EXIT_IDLE = 11  # idle times of the curve's points, s (EXIT_MAX_POINTS slots)
EXIT_VALUE = EXIT_IDLE + EXIT_MAX_POINTS  # exit latencies of the points, s
# flow control (back-pressure stations): bytes in the station above which an admitted
# message costs its server FC_FIXED + FC_PER_BYTE x size more (set_flow_control)
FC_BYTES = EXIT_VALUE + EXIT_MAX_POINTS
FC_FIXED, FC_PER_BYTE = FC_BYTES + 1, FC_BYTES + 2
# speed drift (set_speed_drift): log-sd of the factor, its correlation time (s), the stream key,
# and the period, log-factor and factor last drawn
DRIFT_SIGMA = FC_PER_BYTE + 1
DRIFT_TIME, DRIFT_KEY, DRIFT_P, DRIFT_X, DRIFT_S = range(DRIFT_SIGMA + 1, DRIFT_SIGMA + 6)
# throttled periods counted (set_throttle_window): the window's start and end (s), the count
THR_W0, THR_W1, THR_N = DRIFT_S + 1, DRIFT_S + 2, DRIFT_S + 3
# an event loop that runs out of work is awake for a while before it sleeps: a message arriving
# less than SLEEP_ENTRY s after the server became free is read without a wake-up (no IDLE_EXTRA,
# no exit latency; BrokerParams.sleep_entry_s; 0 = none)
SLEEP_ENTRY = THR_N + 1
# wake-ups charged (IDLE_EXTRA paid) by messages whose service starts in [THR_W0, THR_W1)
WOKE_N = SLEEP_ENTRY + 1
# the quota checked at the scheduler's ticks (set_quota_tick): tick length (s, 0 = checked at
# every instant), when the server's last service ended (s; a later start is a wake-up, where the
# quota is checked too)
TICK, LAST_END = WOKE_N + 1, WOKE_N + 2
# the wake-up's cost by idle time (set_wake_curve): its number of points (0 = none: IDLE_EXTRA
# whatever the idle), their idle times (s) and shares of the full wake-up, and the share of the
# message's own work that a wake-up after a long idle adds (wake_extra_s)
WAKE_N = LAST_END + 1
WAKE_IDLE = WAKE_N + 1
WAKE_VALUE = WAKE_IDLE + EXIT_MAX_POINTS
WAKE_WORK = WAKE_VALUE + EXIT_MAX_POINTS
FS_LEN = WAKE_WORK + 1
N_HEAP, CAP_MSGS, POLICY, RING_HEAD = 0, 1, 2, 3

# overflow policies understood by the arithmetic kernel
POLICY_DROP_NEWEST = 0
POLICY_BACKPRESSURE = 1

# outcome codes (shared by every station kind)
OK = 0
DROP_FULL = 1  # buffer full (messages)
DROP_BYTES = 2  # buffer full (bytes) or message larger than the buffer
DROP_LOSS = 3  # random loss on a link
DROP_OLDEST = 4  # evicted by a newer message (drop-oldest policy)
NEED_GROW = -1  # internal: heap arrays too small, grow and resume
DROP_RESTART = 5  # in a broker when it restarted (not persistent, or queue not durable)
DROP_DOWN = 6  # refused: the broker was down (restarting)
DROP_REJECTED = 7  # refused by a full queue with the reject policy (sender told)
DROP_REPLACED = 8  # replaced while waiting by a newer message of its flow (update policy)
NOT_OWED = 9  # subscriber offline, copy not owed (clean session; models.mechanisms.sessions.sessions)

CAUSE_NAMES = {
    DROP_FULL: "buffer_full",
    DROP_BYTES: "buffer_bytes",
    DROP_LOSS: "link_loss",
    DROP_OLDEST: "dropped_oldest",
    DROP_RESTART: "broker_restart",
    DROP_DOWN: "broker_down",
    DROP_REJECTED: "rejected",
    DROP_REPLACED: "replaced",
    NOT_OWED: "offline_not_owed",
}


def set_idle_exit(fs: np.ndarray, idle_s: Sequence[float], exit_s: Sequence[float]) -> None:
    """Store an idle-exit curve (points ``(idle_s[j], exit_s[j])``, s) in a station state ``fs``."""
    n = len(idle_s)
    if n != len(exit_s) or n > EXIT_MAX_POINTS:
        raise ValueError(
            f"an idle-exit curve has 1..{EXIT_MAX_POINTS} points of (idle, exit), got {n} and {len(exit_s)}"
        )
    fs[EXIT_N] = n
    fs[EXIT_IDLE : EXIT_IDLE + n] = idle_s
    fs[EXIT_VALUE : EXIT_VALUE + n] = exit_s


@njit(cache=True, inline="always")
def wakes(fs: np.ndarray, idle: float) -> bool:
    """Does a message that finds the server free for ``idle`` s wake it (``fs[SLEEP_ENTRY]``)?"""
    return idle >= fs[SLEEP_ENTRY]


@njit(cache=True, inline="always")
def count_woke(fs: np.ndarray, start: float) -> None:
    """Count a charged wake-up whose service starts at ``start`` if that is in the station's
    window (``fs[WOKE_N]``; the window of :func:`set_throttle_window`)."""
    if fs[THR_W0] <= start < fs[THR_W1]:
        fs[WOKE_N] += 1.0


def set_wake_curve(fs: np.ndarray, idle_s: Sequence[float], share: Sequence[float], work_share: float) -> None:
    """Store a wake-up curve in a station state ``fs`` (module docstring, Wake-up by idle time).

    Parameters
    ----------
    fs : numpy.ndarray
        Station float state.
    idle_s, share : sequence of float
        Points ``(idle_s[j], share[j])`` (s, dimensionless) of the share of
        the full wake-up a server pays after that much idle.
    work_share : float
        Share of the waking message's own work that a full wake-up adds
        (dimensionless, >= 0).
    """
    n = len(idle_s)
    if n != len(share) or not 1 <= n <= EXIT_MAX_POINTS:
        raise ValueError(f"a wake-up curve has 1..{EXIT_MAX_POINTS} points of (idle, share), got {n} and {len(share)}")
    fs[WAKE_N] = n
    fs[WAKE_IDLE : WAKE_IDLE + n] = idle_s
    fs[WAKE_VALUE : WAKE_VALUE + n] = share
    fs[WAKE_WORK] = work_share


@njit(cache=True, inline="always")
def _curve_at(fs: np.ndarray, n_at: int, idle: float) -> float:
    """The piecewise-linear curve stored from ``fs[n_at]`` (its point count, then
    :data:`EXIT_MAX_POINTS` idle times and as many values) at ``idle``: through ``(0, 0)``,
    linear between the points, the last point's value beyond it."""
    n = int(fs[n_at])
    x0 = 0.0
    y0 = 0.0
    for j in range(n):
        x1 = fs[n_at + 1 + j]
        y1 = fs[n_at + 1 + EXIT_MAX_POINTS + j]
        if idle <= x1:
            if x1 <= x0:
                return y1
            return y0 + (y1 - y0) * (idle - x0) / (x1 - x0)
        x0 = x1
        y0 = y1
    return y0


@njit(cache=True, inline="always")
def idle_exit_s(fs: np.ndarray, idle: float) -> float:
    """Exit latency of a server that has idled for ``idle`` s (module docstring, Idle exit), s."""
    return _curve_at(fs, EXIT_N, idle)


@njit(cache=True, inline="always")
def wake_extra_s(fs: np.ndarray, idle: float, work: float) -> float:
    """Extra work of a message with own work ``work`` (s) that wakes its server after ``idle`` s
    (module docstring, Wake-up by idle time): ``IDLE_EXTRA`` without a wake-up curve, else the
    curve's share of ``IDLE_EXTRA + WAKE_WORK x work``, s."""
    if fs[WAKE_N] == 0.0:
        return fs[IDLE_EXTRA]
    return _curve_at(fs, WAKE_N, idle) * (fs[IDLE_EXTRA] + fs[WAKE_WORK] * work)


@njit(cache=True, inline="always")
def plain_wakes(fs: np.ndarray) -> bool:
    """Does every message that finds its server free pay ``IDLE_EXTRA`` at once (no idle exit,
    sleep entry or wake-up curve)? Then a server's wake-ups need no idle time."""
    return fs[EXIT_N] == 0.0 and fs[SLEEP_ENTRY] == 0.0 and fs[WAKE_N] == 0.0


@njit(cache=True, inline="always")
def _heap_push(hdep: np.ndarray, hsize: np.ndarray, n: int, dep: float, size: float) -> None:
    i = n
    hdep[i] = dep
    hsize[i] = size
    while i > 0:
        parent = (i - 1) // 2
        if hdep[parent] <= hdep[i]:
            break
        hdep[parent], hdep[i] = hdep[i], hdep[parent]
        hsize[parent], hsize[i] = hsize[i], hsize[parent]
        i = parent


@njit(cache=True, inline="always")
def _heap_pop(hdep: np.ndarray, hsize: np.ndarray, n: int) -> tuple[float, float]:
    dep = hdep[0]
    size = hsize[0]
    n -= 1
    hdep[0] = hdep[n]
    hsize[0] = hsize[n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        small = left
        if left + 1 < n and hdep[left + 1] < hdep[left]:
            small = left + 1
        if hdep[i] <= hdep[small]:
            break
        hdep[i], hdep[small] = hdep[small], hdep[i]
        hsize[i], hsize[small] = hsize[small], hsize[i]
        i = small
    return dep, size


@njit(cache=True, inline="always")
def _is_full(fs: np.ndarray, ist: np.ndarray, size: float) -> bool:
    cap = ist[CAP_MSGS]
    if cap >= 0 and ist[N_HEAP] >= cap:
        return True
    return fs[BYTES_IN] + size > fs[CAP_BYTES]


def set_flow_control(fs: np.ndarray, window_bytes: float, fixed_s: float, per_byte_s: float) -> None:
    """Make a byte-limited station's admitted messages cost ``fixed_s + per_byte_s x size`` more
    while it holds more than ``window_bytes`` (the senders' windows are closed: TCP flow
    control clocks their sending, and on loopback that work is done by the receiver).

    Raises ValueError for a station without a byte capacity: it does not count its bytes."""
    if fs[CAP_BYTES] == np.inf:
        raise ValueError("flow control needs a station with a byte capacity")
    fs[FC_BYTES] = window_bytes
    fs[FC_FIXED] = fixed_s
    fs[FC_PER_BYTE] = per_byte_s


@njit(cache=True, inline="always")
def _release_until(fs: np.ndarray, ist: np.ndarray, hdep: np.ndarray, hsize: np.ndarray, t: float) -> None:
    while ist[N_HEAP] > 0 and hdep[0] <= t:
        _, sz = _heap_pop(hdep, hsize, ist[N_HEAP])
        ist[N_HEAP] -= 1
        fs[BYTES_IN] -= sz


@njit(cache=True, inline="always")
def _admit(
    fs: np.ndarray, ist: np.ndarray, hdep: np.ndarray, hsize: np.ndarray, arrival: float, size: float
) -> tuple[float, int]:
    """Admission time, or -1.0 and a drop code. Buffer-limited stations only."""
    t = arrival
    if ist[POLICY] == POLICY_BACKPRESSURE and fs[ADMIT_FLOOR] > t:
        t = fs[ADMIT_FLOOR]
    _release_until(fs, ist, hdep, hsize, t)
    if not _is_full(fs, ist, size):
        return t, OK
    if ist[POLICY] == POLICY_DROP_NEWEST:
        code = DROP_FULL if (ist[CAP_MSGS] >= 0 and ist[N_HEAP] >= ist[CAP_MSGS]) else DROP_BYTES
        return -1.0, code
    # back-pressure: the publisher holds the message until departures make room
    while ist[N_HEAP] > 0 and _is_full(fs, ist, size):
        dep, sz = _heap_pop(hdep, hsize, ist[N_HEAP])
        ist[N_HEAP] -= 1
        fs[BYTES_IN] -= sz
        if dep > t:
            t = dep
    if _is_full(fs, ist, size):
        return -1.0, DROP_BYTES  # larger than the whole buffer
    return t, OK


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def set_speed_drift(fs: np.ndarray, sigma: float, time_s: float, key: int) -> None:
    """Let a station's speed drift per period (see the module docstring).

    Parameters
    ----------
    fs : numpy.ndarray
        Station float state.
    sigma : float
        Standard deviation of ``log S`` (about the coefficient of variation of
        the factor for small values); 0 = no drift.
    time_s : float
        Correlation time of ``log S``, s; 0 = independent per period.
    key : int
        Stream key in [0, 2**53) (drawn from the station's generator).
    """
    fs[DRIFT_SIGMA] = sigma
    fs[DRIFT_TIME] = time_s
    fs[DRIFT_KEY] = float(key)
    fs[DRIFT_P] = -1.0
    fs[DRIFT_X] = 0.0
    fs[DRIFT_S] = 1.0


def set_throttle_window(fs: np.ndarray, w0: float, w1: float) -> None:
    """Count the quota periods starting in ``[w0, w1)`` (s) in which the budget ran out
    before the period ended (``fs[THR_N]``; cgroup ``cpu.stat`` ``nr_throttled``), and the
    wake-ups charged to messages whose service starts in it (``fs[WOKE_N]``, :func:`count_woke`)."""
    fs[THR_W0] = w0
    fs[THR_W1] = w1
    fs[THR_N] = 0.0
    fs[WOKE_N] = 0.0


@njit(cache=True, inline="always")
def _splitmix(key: float, counter: float) -> float:
    """U(0, 1) from splitmix64 of ``key + counter x golden gamma`` (both integers held in float64)."""
    z = np.uint64(key) + np.uint64(counter) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return (float(z >> np.uint64(11)) + 0.5) * 1.1102230246251565e-16


@njit(cache=True, inline="always")
def drift_normal(key: float, p: float) -> float:
    """The standard normal draw of quota period ``p`` (Box-Muller on counters 2p and 2p + 1)."""
    u1 = _splitmix(key, 2.0 * p)
    u2 = _splitmix(key, 2.0 * p + 1.0)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


@njit(cache=True, inline="always")
def drift_factor(fs: np.ndarray, p: float) -> float:
    """CPU seconds per second of work in quota period ``p`` (1 without drift); periods non-decreasing."""
    sigma = fs[DRIFT_SIGMA]
    if sigma == 0.0:
        return 1.0
    if p != fs[DRIFT_P]:
        z = drift_normal(fs[DRIFT_KEY], p)
        if fs[DRIFT_P] < 0.0 or fs[DRIFT_TIME] == 0.0:
            x = sigma * z
        else:
            r = np.exp(-(p - fs[DRIFT_P]) * fs[PERIOD] / fs[DRIFT_TIME])
            x = r * fs[DRIFT_X] + np.sqrt(1.0 - r * r) * sigma * z
        fs[DRIFT_P] = p
        fs[DRIFT_X] = x
        fs[DRIFT_S] = np.exp(x - 0.5 * sigma * sigma)
    return fs[DRIFT_S]


@njit(cache=True, inline="always")
def periodic(fs: np.ndarray) -> bool:
    """Does the server's pace depend on the period (a CPU quota or a speed drift)? Then
    :func:`quota_finish` settles its services."""
    return fs[QUOTA] < np.inf or fs[DRIFT_SIGMA] > 0.0


def set_quota_tick(fs: np.ndarray, tick_s: float) -> None:
    """Check a one-server station's CPU quota at the scheduler's ticks (see the module docstring).

    Parameters
    ----------
    fs : numpy.ndarray
        Station float state.
    tick_s : float
        Scheduler tick, s (``1 / CONFIG_HZ``: 4 ms at 250 Hz); 0 = the quota is
        enforced at every instant (the default).
    """
    fs[TICK] = tick_s
    fs[LAST_END] = -np.inf


@njit(cache=True, inline="always")
def _run_until(fs: np.ndarray, p: float, t: float, remaining: float, a: float, b: float) -> tuple[float, bool, float]:
    """Serve ``remaining`` work from ``t`` in period ``p`` for at most ``a`` and ``b`` s of CPU:
    ``(time, done, work left)``, the CPU charged to the period's budget."""
    speed = drift_factor(fs, p)
    need = remaining * speed
    run = need
    if a < run:
        run = a
    if b < run:
        run = b
    fs[USED] += run
    t += run
    if run >= need:
        return t, True, remaining
    return t, False, remaining - run / speed


@njit(cache=True, inline="always")
def _throttle_periods(fs: np.ndarray, p: float, t: float) -> tuple[float, float]:
    """Throttled from ``t`` in period ``p``: ``(period, time)`` where the server runs again, the
    deficit repaid (each period's quota pays it first); the throttled periods are counted."""
    period = fs[PERIOD]
    while True:
        if fs[THR_W0] <= p * period < fs[THR_W1]:
            fs[THR_N] += 1.0
        p += 1.0
        t = p * period
        fs[USED] = max(0.0, fs[USED] - fs[QUOTA])
        if fs[USED] < fs[QUOTA]:
            return p, t


@njit(cache=True, inline="always")
def _tick_quota_finish(fs: np.ndarray, start: float, work: float) -> float:
    """:func:`quota_finish` with the quota checked at ticks and wake-ups (:func:`set_quota_tick`)."""
    period = fs[PERIOD]
    quota = fs[QUOTA]
    tick = fs[TICK]
    p = np.floor(start / period)
    if p > fs[PERIOD_IDX]:  # the periods passed since repay the deficit
        fs[USED] = max(0.0, fs[USED] - quota * (p - fs[PERIOD_IDX]))
        fs[PERIOD_IDX] = p
    p = fs[PERIOD_IDX]
    t = start
    if start > fs[LAST_END] and fs[USED] >= quota:  # a wake-up: checked, out of budget
        p, t = _throttle_periods(fs, p, t)
    remaining = work
    while True:
        end = (p + 1.0) * period
        if t >= end:  # a new period: its quota repays the deficit first
            p += 1.0
            fs[USED] = max(0.0, fs[USED] - quota)
            continue
        nxt = (np.floor(t / tick) + 1.0) * tick  # the next tick
        if nxt <= t:  # t / tick rounded down across a tick: the one after
            nxt += tick
        t, done, remaining = _run_until(fs, p, t, remaining, end - t, nxt - t)
        if done:
            break
        if t >= nxt and t < end and fs[USED] >= quota:  # a tick finds the budget spent
            p, t = _throttle_periods(fs, p, t)
    fs[PERIOD_IDX] = p
    fs[LAST_END] = t
    return t


@njit(cache=True, inline="always")
def quota_finish(fs: np.ndarray, start: float, work: float) -> float:
    """Finish time of ``work`` CPU seconds started at ``start`` under the quota (and speed drift)."""
    if fs[TICK] > 0.0:
        return _tick_quota_finish(fs, start, work)
    period = fs[PERIOD]
    quota = fs[QUOTA]
    p = np.floor(start / period)
    if p > fs[PERIOD_IDX]:
        fs[PERIOD_IDX] = p
        fs[USED] = 0.0
    p = fs[PERIOD_IDX]
    t = start
    remaining = work
    while True:
        end = (p + 1.0) * period
        avail = quota - fs[USED]
        if avail <= 0.0 or t >= end:
            if t < end and fs[THR_W0] <= p * period < fs[THR_W1]:  # out of budget: throttled
                fs[THR_N] += 1.0
            p += 1.0
            fs[USED] = 0.0
            if t < p * period:
                t = p * period
            continue
        t, done, remaining = _run_until(fs, p, t, remaining, avail, end - t)
        if done:
            break
    fs[PERIOD_IDX] = p
    return t


@njit(cache=True, inline="always")
def _ring_offer(
    fs: np.ndarray, ist: np.ndarray, free: np.ndarray, hdep: np.ndarray, arrival: float, service: float
) -> tuple[float, float, float, int]:
    """:func:`fifo_offer` for one server, drop-newest and a message capacity only.

    One FIFO server departs messages in admission order, so the departure
    times in the station form a queue: ``hdep`` is a ring of them from slot
    ``ist[RING_HEAD]`` (``ist[N_HEAP]`` entries; ``hdep`` holds at least the
    capacity). Releasing the departures up to ``arrival`` pops the same set
    the heap would, so the outcome is the heap's, without its log-time work.
    """
    cap = hdep.shape[0]
    head = ist[RING_HEAD]
    n = ist[N_HEAP]
    while n > 0 and hdep[head] <= arrival:
        head += 1
        if head == cap:
            head = 0
        n -= 1
    ist[RING_HEAD] = head
    ist[N_HEAP] = n
    if n >= ist[CAP_MSGS]:
        return -1.0, -1.0, -1.0, DROP_FULL
    fs[ADMIT_FLOOR] = arrival
    start = arrival
    if free[0] > arrival:
        start = free[0]
    elif wakes(fs, arrival - free[0]):
        service = service + wake_extra_s(fs, arrival - free[0], service)
        if fs[EXIT_N] > 0.0:
            start = arrival + idle_exit_s(fs, arrival - free[0])
        count_woke(fs, start)
    fs[WORK] += service
    fs[SERVED] += 1.0
    if periodic(fs) and service > 0.0:
        depart = quota_finish(fs, start, service)
    else:
        depart = start + service
    free[0] = depart
    tail = head + n
    if tail >= cap:
        tail -= cap
    hdep[tail] = depart
    ist[N_HEAP] = n + 1
    return arrival, start, depart, OK


@njit(cache=True, inline="always")
def fifo_offer(
    fs: np.ndarray,
    ist: np.ndarray,
    free: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    arrival: float,
    service: float,
    size: float,
) -> tuple[float, float, float, int]:
    """Offer one message to a FIFO station.

    Parameters
    ----------
    fs, ist, free, hdep, hsize : numpy.ndarray
        Station state (see module docstring); updated in place.
    arrival : float
        Arrival time, s.
    service : float
        Service time, s (known on arrival).
    size : float
        Size counted against a byte capacity, bytes.

    Returns
    -------
    admit, start, depart : float
        Admission (>= arrival under back-pressure), service start and
        departure times, s; -1.0 when dropped.
    code : int
        ``OK``, a drop code, or ``NEED_GROW`` (state untouched).
    """
    ring = ist.shape[0] > RING_HEAD and free.shape[0] == 1 and ist[CAP_MSGS] >= 0
    if ring and ist[POLICY] == POLICY_DROP_NEWEST and fs[CAP_BYTES] == np.inf:
        return _ring_offer(fs, ist, free, hdep, arrival, service)
    limited = ist[CAP_MSGS] >= 0 or fs[CAP_BYTES] < np.inf
    if limited:
        if ist[N_HEAP] >= hdep.shape[0]:
            return -1.0, -1.0, -1.0, NEED_GROW
        admit, code = _admit(fs, ist, hdep, hsize, arrival, size)
        if code != OK:
            return -1.0, -1.0, -1.0, code
        fs[ADMIT_FLOOR] = admit
        if fs[BYTES_IN] > fs[FC_BYTES]:
            service = service + fs[FC_FIXED] + fs[FC_PER_BYTE] * size
    else:
        admit = arrival
    k = 0
    for j in range(1, free.shape[0]):
        if free[j] < free[k]:
            k = j
    start = admit
    if free[k] > admit:
        start = free[k]
    elif wakes(fs, admit - free[k]):
        service = service + wake_extra_s(fs, admit - free[k], service)
        if fs[EXIT_N] > 0.0:
            start = admit + idle_exit_s(fs, admit - free[k])
        count_woke(fs, start)
    fs[WORK] += service
    fs[SERVED] += 1.0
    if periodic(fs) and service > 0.0:
        depart = quota_finish(fs, start, service)
    else:
        depart = start + service
    free[k] = depart
    if limited:
        _heap_push(hdep, hsize, ist[N_HEAP], depart, size)
        ist[N_HEAP] += 1
        fs[BYTES_IN] += size
    return admit, start, depart, OK


@njit(cache=True, inline="always")
def _open_run(
    fs: np.ndarray,
    free: np.ndarray,
    arrival: np.ndarray,
    service: np.ndarray,
    first: int,
    out_admit: np.ndarray,
    out_start: np.ndarray,
    out_dep: np.ndarray,
    out_code: np.ndarray,
) -> None:
    """:func:`fifo_offer` over a batch for one server, no buffer limit and no
    CPU quota, with the state in locals (the same operations in the same order)."""
    f = free[0]
    exits = fs[EXIT_N] > 0.0
    work = fs[WORK]
    served = fs[SERVED]
    for i in range(first, arrival.shape[0]):
        a = arrival[i]
        svc = service[i]
        st = a
        if f > a:
            st = f
        elif wakes(fs, a - f):
            svc = svc + wake_extra_s(fs, a - f, svc)
            if exits:
                st = a + idle_exit_s(fs, a - f)
            count_woke(fs, st)
        work += svc
        served += 1.0
        f = st + svc
        out_admit[i] = a
        out_start[i] = st
        out_dep[i] = f
        out_code[i] = OK
    free[0] = f
    fs[WORK] = work
    fs[SERVED] = served


@njit(cache=True, inline="always")
def _ring_run(
    fs: np.ndarray,
    ist: np.ndarray,
    free: np.ndarray,
    hdep: np.ndarray,
    arrival: np.ndarray,
    service: np.ndarray,
    first: int,
    out_admit: np.ndarray,
    out_start: np.ndarray,
    out_dep: np.ndarray,
    out_code: np.ndarray,
) -> None:
    """:func:`_ring_offer` over a batch with no CPU quota, the state in locals."""
    cap = hdep.shape[0]
    limit = ist[CAP_MSGS]
    head = ist[RING_HEAD]
    cnt = ist[N_HEAP]
    f = free[0]
    exits = fs[EXIT_N] > 0.0
    work = fs[WORK]
    served = fs[SERVED]
    floor = fs[ADMIT_FLOOR]
    for i in range(first, arrival.shape[0]):
        a = arrival[i]
        while cnt > 0 and hdep[head] <= a:
            head += 1
            if head == cap:
                head = 0
            cnt -= 1
        if cnt >= limit:
            out_admit[i] = -1.0
            out_start[i] = -1.0
            out_dep[i] = -1.0
            out_code[i] = DROP_FULL
            continue
        floor = a
        svc = service[i]
        st = a
        if f > a:
            st = f
        elif wakes(fs, a - f):
            svc = svc + wake_extra_s(fs, a - f, svc)
            if exits:
                st = a + idle_exit_s(fs, a - f)
            count_woke(fs, st)
        work += svc
        served += 1.0
        f = st + svc
        tail = head + cnt
        if tail >= cap:
            tail -= cap
        hdep[tail] = f
        cnt += 1
        out_admit[i] = a
        out_start[i] = st
        out_dep[i] = f
        out_code[i] = OK
    ist[RING_HEAD] = head
    ist[N_HEAP] = cnt
    free[0] = f
    fs[WORK] = work
    fs[SERVED] = served
    fs[ADMIT_FLOOR] = floor


@njit(cache=True)
def fifo_run(
    fs: np.ndarray,
    ist: np.ndarray,
    free: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    arrival: np.ndarray,
    service: np.ndarray,
    size: np.ndarray,
    first: int,
    out_admit: np.ndarray,
    out_start: np.ndarray,
    out_dep: np.ndarray,
    out_code: np.ndarray,
) -> int:
    """Apply :func:`fifo_offer` to ``arrival[first:]`` in order.

    Returns the index at which it stopped: ``len(arrival)`` when done, or the
    index of a message that needs larger heap arrays (``out_code == NEED_GROW``).
    """
    n = arrival.shape[0]
    if free.shape[0] == 1 and fs[CAP_BYTES] == np.inf and not periodic(fs):
        if ist[CAP_MSGS] < 0:
            _open_run(fs, free, arrival, service, first, out_admit, out_start, out_dep, out_code)
            return n
        if ist.shape[0] > RING_HEAD and ist[POLICY] == POLICY_DROP_NEWEST:
            _ring_run(fs, ist, free, hdep, arrival, service, first, out_admit, out_start, out_dep, out_code)
            return n
    for i in range(first, n):
        a, s, d, c = fifo_offer(fs, ist, free, hdep, hsize, arrival[i], service[i], size[i])
        out_code[i] = c
        if c == NEED_GROW:
            return i
        out_admit[i] = a
        out_start[i] = s
        out_dep[i] = d
    return n


TICKS_PER_S = 2.0**32  # station integrals are summed in integer ticks of 2^-32 s (0.23 ns)


@njit(cache=True, inline="always")
def _ticks(a: float, b: float, w0: float, w1: float) -> int:
    """Length of [a, b) inside [w0, w1], rounded to whole ticks."""
    hi = b if b < w1 else w1
    lo = a if a > w0 else w0
    x = hi - lo
    if x < 0.0:
        x = 0.0
    return int(np.rint(x * TICKS_PER_S))


@njit(cache=True)
def window_counts(t: np.ndarray, mask: np.ndarray, w0: float, w1: float) -> tuple[int, int]:
    """Entries of ``t`` in [w0, w1), and those of them where ``mask`` is set."""
    n = 0
    m = 0
    for i in range(t.shape[0]):
        if t[i] >= w0 and t[i] < w1:
            n += 1
            if mask[i]:
                m += 1
    return n, m


@njit(cache=True)
def service_window_stats(
    arrival: np.ndarray, admit: np.ndarray, start: np.ndarray, end: np.ndarray, w0: float, w1: float
) -> tuple[int, int, int, int, int]:
    """Per-call service figures of a station over the window [w0, w1], in one pass.

    Returns the messages that started service in [w0, w1), those of them
    that started the moment they were admitted (wake-ups), and the ticks of
    [start, end), [admit, start) and [arrival, admit) inside [w0, w1] summed
    per message (each rounded to whole ticks, so the totals do not depend on
    how messages were batched).
    """
    started = 0
    wakeups = 0
    busy = 0
    waiting = 0
    blocked = 0
    for i in range(start.shape[0]):
        s = start[i]
        if s >= w0 and s < w1:
            started += 1
            if s == admit[i]:
                wakeups += 1
        busy += _ticks(s, end[i], w0, w1)
        waiting += _ticks(admit[i], s, w0, w1)
        blocked += _ticks(arrival[i], admit[i], w0, w1)
    return started, wakeups, busy, waiting, blocked


@njit(cache=True, inline="always")
def ordered_arrival(depart: float, latency: float, delay: float, last: float, idle_receiver: bool) -> float:
    """A link's arrival of a message sent at ``depart``, delivery order kept (TCP).

    ``delay`` is ``latency`` plus the message's jitter draw (one sum, as the
    callers form it); ``last`` the previous message's arrival. Every packet
    (``idle_receiver`` False): ``max(depart + delay, last)``. Idle receiver:
    a message that reaches the far end before ``last`` (``depart + latency
    < last``: the receiver is still waking up or reading) arrives with the
    previous one, at ``last``, its draw unused; one that finds the receiver
    idle arrives at ``max(depart + delay, last)``, as with every packet.
    """
    if idle_receiver and depart + latency < last:
        return last
    t = depart + delay
    if t < last:
        t = last
    return t


@njit(cache=True)
def propagate(
    last: np.ndarray,
    depart: np.ndarray,
    code: np.ndarray,
    delay: np.ndarray,
    lost: np.ndarray,
    out_arrival: np.ndarray,
    latency: float = 0.0,
    idle_receiver: bool = False,
) -> None:
    """Propagation after a link's transmitter, keeping delivery order (TCP).

    ``out_arrival[i] = max(depart[i] + delay[i], previous arrival)`` for sent
    messages (:func:`ordered_arrival`; with ``idle_receiver``, a message
    that reaches the far end, ``depart[i] + latency``, before the previous
    arrival arrives with it); lost ones get code ``DROP_LOSS`` and do not
    advance the order. ``last`` (float64[1]) carries the last arrival time
    between calls.
    """
    for i in range(depart.shape[0]):
        if code[i] != OK:
            out_arrival[i] = -1.0
            continue
        if lost[i]:
            code[i] = DROP_LOSS
            out_arrival[i] = -1.0
            continue
        t = ordered_arrival(depart[i], latency, delay[i], last[0], idle_receiver)
        last[0] = t
        out_arrival[i] = t


# --- batch service (automatic batching, group commit) ------------------------
#
# One server that serves messages in batches. When it becomes free (or a
# message arrives to an idle server) it takes every message waiting at that
# moment, up to ``batch_max_messages`` and ``batch_max_bytes`` (the first
# message is always taken), and serves them together in
# ``fixed + c_1 + ... + c_k`` (added in that order). Every message of a batch
# departs at the batch end. A batch starting at ``s`` holds the messages
# admitted strictly before ``s``; a message admitted to an idle server starts
# a batch of its own at once (and pays the idle extra cost). So a lone
# message pays the fixed cost; under load the fixed cost is shared by up to
# B messages and the capacity tends to B / (fixed + B c).
#
# This is ZeroMQ's rule: an I/O thread writes every message queued in a pipe
# in one send() call (ZeroMQ guide, ch. 1 "Why we needed ZeroMQ" / libzmq
# design "Message batching": "0MQ ... batches messages ... when there's a
# backlog"), and a database's group commit (one fsync for every record
# queued behind the one in progress).
#
# State: ``bf`` float64[BF_LEN], ``bi`` int64[BI_LEN]; waiting messages in
# arrays ``wid`` (caller's id), ``wadm`` (admission), ``wsvc`` (own cost),
# ``wsize`` (buffer bytes), slots ``bi[HEAD]:bi[TAIL]``; the min-heap
# ``hdep``/``hsize`` holds the departures of messages in closed batches
# (buffer-limited stations). Outputs of closed batches go to ``oid``,
# ``oadm``, ``ostart`` (start of the message's share of the batch),
# ``oend`` (end of its share: ``ostart + fixed (first only) + c_j``),
# ``odep`` (batch end) from slot ``bi[NOUT]`` on.
BF_FREE, BF_FIXED, BF_IDLE, BF_BYTES_IN, BF_CAP_BYTES = 0, 1, 2, 3, 4
BF_FLOOR, BF_WORK, BF_SERVED, BF_BATCHES, BF_MAX_BYTES = 5, 6, 7, 8, 9
BF_LEN = 10
BI_NHEAP, BI_CAP, BI_POLICY, BI_MAXMSG, BI_HEAD, BI_TAIL, BI_NOUT = 0, 1, 2, 3, 4, 5, 6
BI_LEN = 7


@njit(cache=True)
def _batch_limited(bf: np.ndarray, bi: np.ndarray) -> bool:
    return bi[BI_CAP] >= 0 or bf[BF_CAP_BYTES] < np.inf


@njit(cache=True)
def _batch_start(
    bf: np.ndarray,
    bi: np.ndarray,
    wadm: np.ndarray,
    wsvc: np.ndarray,
    wsize: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    s: float,
    extra: float,
    oid: np.ndarray,
    wid: np.ndarray,
    oadm: np.ndarray,
    ostart: np.ndarray,
    oend: np.ndarray,
    odep: np.ndarray,
) -> None:
    """Close one batch starting at ``s`` with the messages at the head of the queue."""
    h = bi[BI_HEAD]
    end = h
    nbytes = 0.0
    while end < bi[BI_TAIL] and end - h < bi[BI_MAXMSG]:
        if end > h and nbytes + wsize[end] > bf[BF_MAX_BYTES]:
            break
        nbytes += wsize[end]
        end += 1
    cur = s
    limited = _batch_limited(bf, bi)
    o0 = bi[BI_NOUT]
    for j in range(h, end):
        o = bi[BI_NOUT]
        oid[o] = wid[j]
        oadm[o] = wadm[j]
        ostart[o] = cur
        if j == h:
            cur = cur + (bf[BF_FIXED] + extra)
        cur = cur + wsvc[j]
        oend[o] = cur
        bi[BI_NOUT] += 1
    for o in range(o0, bi[BI_NOUT]):
        odep[o] = cur
    for j in range(h, end):
        if limited:
            _heap_push(hdep, hsize, bi[BI_NHEAP], cur, wsize[j])
            bi[BI_NHEAP] += 1
    bf[BF_WORK] += cur - s
    bf[BF_SERVED] += end - h
    bf[BF_BATCHES] += 1.0
    bf[BF_FREE] = cur
    bi[BI_HEAD] = end


@njit(cache=True)
def batch_close(
    bf: np.ndarray,
    bi: np.ndarray,
    wid: np.ndarray,
    wadm: np.ndarray,
    wsvc: np.ndarray,
    wsize: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    t: float,
    oid: np.ndarray,
    oadm: np.ndarray,
    ostart: np.ndarray,
    oend: np.ndarray,
    odep: np.ndarray,
) -> None:
    """Close every batch that starts at or before ``t`` (all its members are known)."""
    while bi[BI_HEAD] < bi[BI_TAIL] and bf[BF_FREE] <= t:
        _batch_start(bf, bi, wadm, wsvc, wsize, hdep, hsize, bf[BF_FREE], 0.0, oid, wid, oadm, ostart, oend, odep)


@njit(cache=True)
def _batch_full(bf: np.ndarray, bi: np.ndarray, size: float) -> bool:
    n = bi[BI_NHEAP] + (bi[BI_TAIL] - bi[BI_HEAD])
    if bi[BI_CAP] >= 0 and n >= bi[BI_CAP]:
        return True
    return bf[BF_BYTES_IN] + size > bf[BF_CAP_BYTES]


@njit(cache=True)
def _batch_release(bf: np.ndarray, bi: np.ndarray, hdep: np.ndarray, hsize: np.ndarray, t: float) -> None:
    while bi[BI_NHEAP] > 0 and hdep[0] <= t:
        _, sz = _heap_pop(hdep, hsize, bi[BI_NHEAP])
        bi[BI_NHEAP] -= 1
        bf[BF_BYTES_IN] -= sz


@njit(cache=True)
def batch_offer(
    bf: np.ndarray,
    bi: np.ndarray,
    wid: np.ndarray,
    wadm: np.ndarray,
    wsvc: np.ndarray,
    wsize: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    ident: int,
    arrival: float,
    service: float,
    size: float,
    oid: np.ndarray,
    oadm: np.ndarray,
    ostart: np.ndarray,
    oend: np.ndarray,
    odep: np.ndarray,
) -> tuple[float, int]:
    """Offer one message to a batch station (the step both drivers share).

    Closes the batches that start before the message is admitted, then
    admits it (drop-newest or back-pressure on a finite buffer, as
    :func:`fifo_offer`), and starts a batch at once if the server is idle.
    The caller sizes the arrays (no growth inside). Returns ``(admit, code)``.
    """
    t = arrival
    if bi[BI_POLICY] == POLICY_BACKPRESSURE and bf[BF_FLOOR] > t:
        t = bf[BF_FLOOR]
    batch_close(bf, bi, wid, wadm, wsvc, wsize, hdep, hsize, t, oid, oadm, ostart, oend, odep)
    if _batch_limited(bf, bi):
        _batch_release(bf, bi, hdep, hsize, t)
        if _batch_full(bf, bi, size):
            if bi[BI_POLICY] == POLICY_DROP_NEWEST:
                n = bi[BI_NHEAP] + (bi[BI_TAIL] - bi[BI_HEAD])
                code = DROP_FULL if (bi[BI_CAP] >= 0 and n >= bi[BI_CAP]) else DROP_BYTES
                return -1.0, code
            while _batch_full(bf, bi, size) and bi[BI_NHEAP] > 0:
                t = hdep[0]  # the publisher waits for the next departure
                batch_close(bf, bi, wid, wadm, wsvc, wsize, hdep, hsize, t, oid, oadm, ostart, oend, odep)
                _batch_release(bf, bi, hdep, hsize, t)
            if _batch_full(bf, bi, size):
                return -1.0, DROP_BYTES
        bf[BF_FLOOR] = t
        bf[BF_BYTES_IN] += size
    j = bi[BI_TAIL]
    wid[j] = ident
    wadm[j] = t
    wsvc[j] = service
    wsize[j] = size
    bi[BI_TAIL] += 1
    if bi[BI_HEAD] == j and bf[BF_FREE] <= t:  # idle server: a batch of one, now
        _batch_start(bf, bi, wadm, wsvc, wsize, hdep, hsize, t, bf[BF_IDLE], oid, wid, oadm, ostart, oend, odep)
    return t, OK


@njit(cache=True)
def batch_run(
    bf: np.ndarray,
    bi: np.ndarray,
    wid: np.ndarray,
    wadm: np.ndarray,
    wsvc: np.ndarray,
    wsize: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    first_id: int,
    arrival: np.ndarray,
    service: np.ndarray,
    size: np.ndarray,
    horizon: float,
    oid: np.ndarray,
    oadm: np.ndarray,
    ostart: np.ndarray,
    oend: np.ndarray,
    odep: np.ndarray,
    drop_code: np.ndarray,
) -> None:
    """Offer ``arrival`` in order (ids ``first_id + i``), then close the
    batches that start at or before ``horizon``. ``drop_code[i]`` gets the
    outcome of message ``i``."""
    for i in range(arrival.shape[0]):
        _, c = batch_offer(
            bf,
            bi,
            wid,
            wadm,
            wsvc,
            wsize,
            hdep,
            hsize,
            first_id + i,
            arrival[i],
            service[i],
            size[i],
            oid,
            oadm,
            ostart,
            oend,
            odep,
        )
        drop_code[i] = c
    batch_close(bf, bi, wid, wadm, wsvc, wsize, hdep, hsize, horizon, oid, oadm, ostart, oend, odep)
