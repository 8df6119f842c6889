"""Per-message station arithmetic, compiled with numba.

A FIFO station whose service time is known on arrival needs no event per
message: with ``c`` servers the next message starts at
``max(admission, earliest server free time)`` and departs ``service`` later
(Lindley's recursion generalised to c servers, Kiefer & Wolfowitz 1955). A
finite buffer keeps a min-heap of the departure times (and sizes) of the
messages in the station to decide admission.

:func:`fifo_offer` is the one-message step. :func:`fifo_run` applies it to an
arrival-ordered batch. The fast path calls :func:`fifo_run`; the reference
driver calls the same :func:`fifo_offer` one event at a time, so both share a
single copy of the station logic. No fast-math: IEEE arithmetic keeps the two
bit-identical.

State layout (arrays so that numba can mutate them in place)

* ``fs`` float64[10]: admission floor (FIFO admission under back-pressure),
  bytes in station, byte capacity (inf = none), extra service when a message
  finds its server idle (wake-up cost, s); CPU quota per period (s, inf =
  none), quota period (s), index of the current period, CPU used in it (s);
  total work served (s) and messages served, over the whole run.

CPU quota (Linux CFS bandwidth control, ``cpu.cfs_quota_us`` /
``cpu.cfs_period_us``): the servers together may work ``quota`` seconds per
``period``; a message is served at full speed while budget remains, and
when the budget is spent its server stalls until the next period starts.
So a lightly loaded capped broker is as fast as an uncapped one, its
capacity is ``quota / period`` cores, and near the limit messages wait out
whole periods (Turner et al., "CPU bandwidth control for CFS", Linux
Symposium 2010). Budget is charged in service-start order; with several
servers whose services overlap a period boundary this is an approximation.
* ``ist`` int64[3]: messages in the heap, message capacity (-1 = none), policy.
* ``free`` float64[c]: time each server becomes free.
* ``hdep``/``hsize`` float64[h]: heap of departure times and sizes.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# state indices
ADMIT_FLOOR, BYTES_IN, CAP_BYTES, IDLE_EXTRA = 0, 1, 2, 3
QUOTA, PERIOD, PERIOD_IDX, USED, WORK, SERVED = 4, 5, 6, 7, 8, 9
FS_LEN = 10
N_HEAP, CAP_MSGS, POLICY = 0, 1, 2

# overflow policies understood by the arithmetic kernel
POLICY_DROP_NEWEST = 0
POLICY_BACKPRESSURE = 1

# outcome codes (shared by every station kind)
OK = 0
DROP_FULL = 1        # buffer full (messages)
DROP_BYTES = 2       # buffer full (bytes) or message larger than the buffer
DROP_LOSS = 3        # random loss on a link
DROP_OLDEST = 4      # evicted by a newer message (drop-oldest policy)
DROP_REJECTED = 5    # refused by a full queue with the reject policy (sender told)
DROP_REPLACED = 6    # replaced while waiting by a newer message of its flow (update policy)
NEED_GROW = -1       # internal: heap arrays too small, grow and resume

CAUSE_NAMES = {
    DROP_FULL: "buffer_full",
    DROP_BYTES: "buffer_bytes",
    DROP_LOSS: "link_loss",
    DROP_OLDEST: "dropped_oldest",
    DROP_REJECTED: "rejected",
    DROP_REPLACED: "replaced",
}


@njit(cache=True)
def _heap_push(hdep, hsize, n, dep, size):
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


@njit(cache=True)
def _heap_pop(hdep, hsize, n):
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


@njit(cache=True)
def _is_full(fs, ist, size):
    cap = ist[CAP_MSGS]
    if cap >= 0 and ist[N_HEAP] >= cap:
        return True
    return fs[BYTES_IN] + size > fs[CAP_BYTES]


@njit(cache=True)
def _release_until(fs, ist, hdep, hsize, t):
    while ist[N_HEAP] > 0 and hdep[0] <= t:
        _, sz = _heap_pop(hdep, hsize, ist[N_HEAP])
        ist[N_HEAP] -= 1
        fs[BYTES_IN] -= sz


@njit(cache=True)
def _admit(fs, ist, hdep, hsize, arrival, size):
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


@njit(cache=True)
def quota_finish(fs, start, work):
    """Finish time of ``work`` CPU seconds started at ``start`` under the quota."""
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
            p += 1.0
            fs[USED] = 0.0
            if t < p * period:
                t = p * period
            continue
        run = remaining
        if avail < run:
            run = avail
        if end - t < run:
            run = end - t
        fs[USED] += run
        remaining -= run
        t += run
        if remaining <= 0.0:
            break
    fs[PERIOD_IDX] = p
    return t


@njit(cache=True)
def fifo_offer(fs, ist, free, hdep, hsize, arrival, service, size):
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
    limited = ist[CAP_MSGS] >= 0 or fs[CAP_BYTES] < np.inf
    if limited:
        if ist[N_HEAP] >= hdep.shape[0]:
            return -1.0, -1.0, -1.0, NEED_GROW
        admit, code = _admit(fs, ist, hdep, hsize, arrival, size)
        if code != OK:
            return -1.0, -1.0, -1.0, code
        fs[ADMIT_FLOOR] = admit
    else:
        admit = arrival
    k = 0
    for j in range(1, free.shape[0]):
        if free[j] < free[k]:
            k = j
    start = admit
    if free[k] > admit:
        start = free[k]
    else:
        service = service + fs[IDLE_EXTRA]
    fs[WORK] += service
    fs[SERVED] += 1.0
    if fs[QUOTA] < np.inf and service > 0.0:
        depart = quota_finish(fs, start, service)
    else:
        depart = start + service
    free[k] = depart
    if limited:
        _heap_push(hdep, hsize, ist[N_HEAP], depart, size)
        ist[N_HEAP] += 1
        fs[BYTES_IN] += size
    return admit, start, depart, OK


@njit(cache=True)
def fifo_run(fs, ist, free, hdep, hsize, arrival, service, size, first,
             out_admit, out_start, out_dep, out_code):
    """Apply :func:`fifo_offer` to ``arrival[first:]`` in order.

    Returns the index at which it stopped: ``len(arrival)`` when done, or the
    index of a message that needs larger heap arrays (``out_code == NEED_GROW``).
    """
    n = arrival.shape[0]
    for i in range(first, n):
        a, s, d, c = fifo_offer(fs, ist, free, hdep, hsize, arrival[i], service[i], size[i])
        out_code[i] = c
        if c == NEED_GROW:
            return i
        out_admit[i] = a
        out_start[i] = s
        out_dep[i] = d
    return n


@njit(cache=True)
def propagate(last, depart, code, delay, lost, out_arrival):
    """Propagation after a link's transmitter, keeping delivery order (TCP).

    ``out_arrival[i] = max(depart[i] + delay[i], previous arrival)`` for sent
    messages; lost ones get code ``DROP_LOSS`` and do not advance the order.
    ``last`` (float64[1]) carries the last arrival time between calls.
    """
    for i in range(depart.shape[0]):
        if code[i] != OK:
            out_arrival[i] = -1.0
            continue
        if lost[i]:
            code[i] = DROP_LOSS
            out_arrival[i] = -1.0
            continue
        t = depart[i] + delay[i]
        if t < last[0]:
            t = last[0]
        last[0] = t
        out_arrival[i] = t
