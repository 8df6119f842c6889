"""One compiled pass per FIFO station per batch: queue, statistics and propagation.

The plain path of a station call (:meth:`pubsim.sim.station.Station.process`)
makes about 25 NumPy passes over a batch: the discipline's output arrays and
masks (:meth:`pubsim.sim.disciplines.FifoDiscipline.run`), the ingress gather
and two statistics kernels (:class:`pubsim.sim.station.StationStats`), the
jitter, loss and code arrays of a link's propagation and the checks of its
outcome. On the standard star (``benchmarks/star_benchmark.py``) the ten
downlinks and their subscribers spent about 55 % of the run there.

:func:`fifo_station_pass` does the same work in one loop per batch for the
commonest stations: one FIFO server with no byte limit and no CPU quota,
either with no message limit (:func:`pubsim.sim.kernels._open_run`) or
drop-newest on a message limit (the ring of :func:`pubsim.sim.kernels._ring_run`),
followed either by nothing (brokers, subscribers: a packet leaves at its
departure) or by a link's propagation (latency plus a jitter draw, a loss
draw, delivery order kept: :func:`pubsim.sim.kernels.propagate`). Each
message goes through the same IEEE operations in the same order as on the
plain path, and every draw stream gives the same draws (one per served
message, in arrival order), so records are identical; the batch driver
uses it, the reference driver keeps the plain path
(``tests/oracles/test_station_pass.py`` checks both ways against each other).

Profiled on the standard star at 80 % (CPU seconds of 1M messages): the
plain path's ``fifo_run`` + ``propagate`` + the two statistics kernels took
0.23 s, this pass 0.15 s (its first form; the counters have since moved to
locals and only drop codes are written); the rest of a station call (inbox split and
concatenation, the broker's sort, routing, the sinks) is outside it.
A batch with drops is split into sent and dropped packets by
:func:`split_outcome` in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from . import kernels as K
from .disciplines import FifoDiscipline
from .packets import Packets

__all__ = ["Propagation", "NO_PROPAGATION", "fifo_station_pass", "fusable_discipline", "run_pass", "split_outcome"]

# tally slots written by fifo_station_pass
T_ARRIVALS, T_INGRESS, T_STARTED, T_WAKEUPS = 0, 1, 2, 3
T_BUSY, T_WAITING = 4, 5
T_QUEUE_DROPS, T_QUEUE_DROPS_IN, T_LOST, T_LOST_IN = 6, 7, 8, 9
T_LEN = 10

_NO_DRAWS = np.empty(0)


@dataclass(frozen=True, kw_only=True)
class Propagation:
    """What happens to a packet after service, for :func:`fifo_station_pass`.

    Parameters
    ----------
    ordered : bool
        False: the packet leaves at its departure (no delay, no loss).
        True: a link's propagation, delivery order kept.
    latency_s : float
        Propagation delay added to every jitter draw, s.
    constant_delay_s : float
        ``latency_s`` plus the jitter's value when the jitter is constant, s.
    jitter : sim.rng.DrawStream or None
        Jitter draws (None: constant jitter, no draws).
    loss : sim.rng.DrawStream or None
        U[0, 1) loss draws (None: loss probability 0, no draws).
    loss_probability : float
    last : numpy.ndarray or None
        float64[1], the link's last arrival time (kept between calls).
    idle_receiver : bool
        Only a packet that finds the receiver idle pays its jitter
        (:func:`pubsim.sim.kernels.ordered_arrival`).
    """

    ordered: bool
    latency_s: float = 0.0
    constant_delay_s: float = 0.0
    jitter: Any = None
    loss: Any = None
    loss_probability: float = 0.0
    last: np.ndarray | None = None
    idle_receiver: bool = False


NO_PROPAGATION = Propagation(ordered=False)


def fusable_discipline(disc: object) -> bool:
    """Can :func:`fifo_station_pass` run this discipline? One FIFO server, no
    byte limit, no CPU quota or speed drift, no idle-exit latency, sleep entry or wake-up
    curve (:func:`pubsim.sim.kernels.plain_wakes`), and either
    no message limit or drop-newest (or reject) on one."""
    if type(disc) is not FifoDiscipline or len(disc.free) != 1:
        return False
    if disc.fs[K.CAP_BYTES] != np.inf or K.periodic(disc.fs) or not K.plain_wakes(disc.fs):
        return False
    return bool(disc.ist[K.CAP_MSGS] < 0 or disc.ist[K.POLICY] == K.POLICY_DROP_NEWEST)


@njit(cache=True, inline="always")
def _release_ring(hdep: np.ndarray, head: int, cnt: int, a: float) -> tuple[int, int]:
    """Departures in the ring up to ``a`` leave: the new ``(head, count)``."""
    cap = hdep.shape[0]
    while cnt > 0 and hdep[head] <= a:
        head += 1
        if head == cap:
            head = 0
        cnt -= 1
    return head, cnt


@njit(cache=True, inline="always")
def _in(t: float, w0: float, w1: float) -> bool:
    return t >= w0 and t < w1


@njit(cache=True)
def fifo_station_pass(
    fs: np.ndarray,
    ist: np.ndarray,
    free: np.ndarray,
    hdep: np.ndarray,
    arrival: np.ndarray,
    service: np.ndarray,
    visit: np.ndarray,
    ingress: np.ndarray,
    window: np.ndarray,
    prop: np.ndarray,
    jitter: np.ndarray,
    loss_u: np.ndarray,
    last: np.ndarray,
    out_t: np.ndarray,
    out_code: np.ndarray,
    tally: np.ndarray,
) -> None:
    """Serve an arrival-ordered batch at a one-server FIFO station and propagate it.

    Parameters
    ----------
    fs, ist, free, hdep : numpy.ndarray
        The :class:`pubsim.sim.disciplines.FifoDiscipline` state (see
        :mod:`pubsim.sim.kernels`), updated in place. ``ist[CAP_MSGS] < 0``:
        no message limit; else drop-newest on it, departures in the ring
        ``hdep`` (:func:`pubsim.sim.kernels._ring_offer`).
    arrival : numpy.ndarray
        Arrival times, s (non-decreasing).
    service : numpy.ndarray
        Service time of each packet, s.
    visit : numpy.ndarray
        Route visit of each packet (int64).
    ingress : numpy.ndarray
        Per visit: counts as an ingress arrival (bool); empty: none of the
        station's visits does (``visit`` is then not read).
    window : numpy.ndarray
        float64[2], the measurement window [w0, w1), s.
    prop : numpy.ndarray
        float64[5]: ordered propagation (1.0) or none (0.0), latency (s),
        latency plus constant jitter (s), loss probability, idle receiver
        (1.0: only a packet that finds the receiver idle pays its jitter) or
        every packet (0.0).
    jitter : numpy.ndarray
        At least one draw per served packet, in order (s), or empty: constant jitter.
    loss_u : numpy.ndarray
        At least one U[0, 1) draw per served packet, or empty: no loss draws.
    last : numpy.ndarray
        float64[1], the last arrival time at the next place (ordered propagation).
    out_t : numpy.ndarray
        Output, per packet: time it reaches the next place (served and sent),
        its arrival (dropped by the queue), or its departure (lost), s.
    out_code : numpy.ndarray
        Zeros (``OK``) on entry; output: ``DROP_FULL`` or ``DROP_LOSS`` where
        a packet was dropped (int64; only those entries are written).
    tally : numpy.ndarray
        Output, int64[T_LEN]: window counts and tick integrals as
        :meth:`pubsim.sim.station.StationStats.add` sums them, drops and losses.
    """
    w0, w1 = window[0], window[1]
    ordered = prop[0] != 0.0
    latency, delay0, p = prop[1], prop[2], prop[3]
    idle_receiver = prop[4] != 0.0
    limit = ist[K.CAP_MSGS]
    head = ist[K.RING_HEAD]
    cnt = ist[K.N_HEAP]
    cap = hdep.shape[0]
    f = free[0]
    extra = fs[K.IDLE_EXTRA]
    work = fs[K.WORK]
    served = fs[K.SERVED]
    floor = fs[K.ADMIT_FLOOR]
    drawn = jitter.shape[0] > 0
    counts_ingress = ingress.shape[0] > 0
    lossy = loss_u.shape[0] > 0
    n_in = n_ingress = started = wakeups = busy = waiting = 0  # counters in locals (registers)
    n_full = n_full_in = n_lost = n_lost_in = 0
    j = 0  # served packets so far: the index of their draws
    t_last = last[0]
    for i in range(arrival.shape[0]):
        a = arrival[i]
        if _in(a, w0, w1):
            n_in += 1
            if counts_ingress and ingress[visit[i]]:
                n_ingress += 1
        if limit >= 0:
            head, cnt = _release_ring(hdep, head, cnt, a)
            if cnt >= limit:
                out_t[i] = a
                out_code[i] = K.DROP_FULL
                n_full += 1
                if _in(a, w0, w1):
                    n_full_in += 1
                continue
            floor = a
        svc = service[i]
        st = a
        if f > a:
            st = f
        else:
            svc = svc + extra
        work += svc
        served += 1.0
        f = st + svc
        if limit >= 0:
            tail = head + cnt
            if tail >= cap:
                tail -= cap
            hdep[tail] = f
            cnt += 1
        if _in(st, w0, w1):
            started += 1
            if st == a:
                wakeups += 1
        busy += K._ticks(st, f, w0, w1)
        waiting += K._ticks(a, st, w0, w1)  # admitted on arrival: no blocked time
        if not ordered:
            out_t[i] = f
        elif lossy and loss_u[j] < p:
            out_t[i] = f
            out_code[i] = K.DROP_LOSS
            n_lost += 1
            if _in(f, w0, w1):
                n_lost_in += 1
        else:
            x = K.ordered_arrival(f, latency, latency + jitter[j] if drawn else delay0, t_last, idle_receiver)
            t_last = x
            out_t[i] = x
        j += 1
    last[0] = t_last
    if limit >= 0:
        ist[K.RING_HEAD] = head
        ist[K.N_HEAP] = cnt
        fs[K.ADMIT_FLOOR] = floor
    free[0] = f
    fs[K.WORK] = work
    fs[K.SERVED] = served
    tally[T_ARRIVALS], tally[T_INGRESS], tally[T_STARTED], tally[T_WAKEUPS] = n_in, n_ingress, started, wakeups
    tally[T_BUSY], tally[T_WAITING] = busy, waiting
    tally[T_QUEUE_DROPS], tally[T_QUEUE_DROPS_IN], tally[T_LOST], tally[T_LOST_IN] = (
        n_full,
        n_full_in,
        n_lost,
        n_lost_in,
    )


def _draws(stream: Any, n: int) -> np.ndarray:
    """The next ``n`` draws of ``stream`` without consuming them (empty for None)."""
    return _NO_DRAWS if stream is None else stream.peek(n)


def run_pass(
    disc: Any,
    packets: Packets,
    service_s: np.ndarray,
    ingress: np.ndarray,
    window: tuple[float, float],
    prop: Propagation,
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """:func:`fifo_station_pass` over ``packets`` at ``disc`` (a
    :class:`pubsim.sim.disciplines.FifoDiscipline` that :func:`fusable_discipline` accepts).

    Takes one jitter and one loss draw per served packet, as the plain path
    does. Returns ``(out_t, out_code, tally)`` as the kernel writes them
    (``tally`` as Python ints).
    """
    n = len(packets)
    jitter, loss = _draws(prop.jitter, n), _draws(prop.loss, n)
    out_t = np.empty(n)
    code = np.zeros(n, dtype=np.int64)  # OK; pages of zeros the pass mostly never touches
    tally = np.empty(T_LEN, dtype=np.int64)
    last = prop.last if prop.last is not None else np.zeros(1)
    params = np.array(
        [float(prop.ordered), prop.latency_s, prop.constant_delay_s, prop.loss_probability, float(prop.idle_receiver)]
    )
    fifo_station_pass(
        disc.fs, disc.ist, disc.free, disc.hdep, packets.t, service_s, packets.visit, ingress,
        np.array(window, dtype=np.float64), params, jitter, loss, last, out_t, code, tally,
    )  # fmt: skip
    served = n - int(tally[T_QUEUE_DROPS])
    for stream in (prop.jitter, prop.loss):
        if stream is not None:
            stream.skip(served)
    return out_t, code, tally.tolist()


@njit(cache=True)
def _partition(
    code: np.ndarray,
    out_t: np.ndarray,
    cols: tuple,
    kept: tuple,
    dropped: tuple,
    drop_t: np.ndarray,
    drop_code: np.ndarray,
) -> None:
    """Kept packets (code ``OK``) and dropped ones (queue drops first, then
    losses), each in arrival order, in one pass: ``kept`` gets ``(t, msg,
    visit, size, pub_t)`` with ``t`` from ``out_t``, ``dropped`` the packets
    as they arrived (``cols = (t, msg, visit, size, pub_t)``), ``drop_t``
    their ``out_t`` (drop time) and ``drop_code`` their codes."""
    t, msg, visit, size, pub_t = cols
    n_queue = 0
    for i in range(code.shape[0]):
        if code[i] != K.OK and code[i] != K.DROP_LOSS:
            n_queue += 1
    k = 0
    q = 0
    m = n_queue
    for i in range(code.shape[0]):
        c = code[i]
        if c == K.OK:
            kept[0][k] = out_t[i]
            kept[1][k] = msg[i]
            kept[2][k] = visit[i]
            kept[3][k] = size[i]
            kept[4][k] = pub_t[i]
            k += 1
            continue
        if c == K.DROP_LOSS:
            o = m
            m += 1
        else:
            o = q
            q += 1
        drop_t[o] = out_t[i]
        drop_code[o] = c
        dropped[0][o] = t[i]
        dropped[1][o] = msg[i]
        dropped[2][o] = visit[i]
        dropped[3][o] = size[i]
        dropped[4][o] = pub_t[i]


def _columns(k: int) -> tuple[np.ndarray, ...]:
    """Empty ``(t, msg, visit, size, pub_t)`` arrays of length ``k``."""
    return (np.empty(k), np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k))


def split_outcome(
    packets: Packets, out_t: np.ndarray, code: np.ndarray, n_dropped: int
) -> tuple[Packets, Packets, np.ndarray, np.ndarray]:
    """``(sent, dropped, drop_t, drop_code)`` of a pass with drops: the packets
    with code ``OK`` at their ``out_t``; the others (queue drops, then losses,
    each in arrival order) as they arrived, with their drop times and codes."""
    kept, dropped = _columns(len(packets) - n_dropped), _columns(n_dropped)
    drop_t = np.empty(n_dropped)
    drop_code = np.empty(n_dropped, dtype=np.int64)
    cols = (packets.t, packets.msg, packets.visit, packets.size, packets.pub_t)
    _partition(code, out_t, cols, kept, dropped, drop_t, drop_code)
    return Packets(*kept), Packets(*dropped), drop_t, drop_code
