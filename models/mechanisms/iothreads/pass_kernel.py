"""Event-loop passes over ready connections by arithmetic (numba): Mosquitto's loop.

One server, per-connection FIFO queues, optional CPU quota. A pass starts
when the server is free (or when a message finds it idle, after the idle
core's exit latency and its wake-up cost, unless it came within the sleep
entry, :func:`pubsim.sim.kernels.wakes`) and reads, from every connection that has data at its
start, its head messages (at most ``per_key`` of them; at most ``max_members``
in all), in order of arrival; they are routed back to back (their own
demands), then the pass's cost (the ``epoll_wait`` and its bookkeeping)
follows its last member, as in :mod:`.kernel`. A message that arrives while
the pass runs, or whose connection already gave the pass its share, waits
for a later pass: messages of different connections leave out of arrival
order (Mosquitto's ``mux_epoll__handle`` reads one packet per ready
descriptor, in epoll's ready order, approximated by arrival).

How it is settled. Arrivals come in time order. A pass's members are the
messages that arrived by its start, so a message that may join it is served
the moment it arrives (members are served in arrival order); one that must
wait is *deferred* (a linked list in arrival order, per-connection counts).
A pass is closed, and the next one opened with the deferred heads, when an
arrival after its start is seen or the call's ``horizon`` passes its start
(all arrivals before the horizon are known): which of the two happens first
does not change the result, so the drivers agree whatever their batches.

Socket buffers. With a byte capacity (``fs[CAP_BYTES]`` finite: the
publishers' pooled socket buffers, ``BrokerParams.overload``) the station
holds at most that many bytes of messages taken in and not yet departed,
those waiting for a pass included; a message that does not fit waits at its
sender until departures make room (back-pressure, FIFO over all senders, as
the FIFO kernel's :func:`pubsim.sim.kernels._admit`) and arrives then, one
larger than the whole buffer is dropped (``DROP_BYTES``). Departures of
messages still waiting for a pass are not known, but none comes before the
next pass opens, so a held message's admission closes the current pass and
opens the next (it could not join either) until a known departure comes
first. Flow control (:func:`pubsim.sim.kernels.set_flow_control`): a message
admitted while the station holds more than the window costs more, as in the
FIFO kernel.

State: ``fs`` the FIFO kernel's float state (:mod:`pubsim.sim.kernels`);
``ps`` float64[PS_LEN]; ``kpass`` / ``kcount`` / ``kdef`` int64[connections]:
the last pass that read each connection, how many of its messages that pass
read, how many of its messages are deferred; ``sf`` float64[slots, 4]
(admission, service, cycle cost, bytes) and ``si`` int64[slots, 3]
(connection, reference, next slot) of deferred messages, ``stack`` the free
slots, ``dl`` int64[DL_LEN] the list's head, tail, length and free slots;
with a byte capacity, ``hdep`` / ``hsize`` a min-heap of the known
departures (s) of the messages in the station and their bytes, ``hn``
int64[1] its length.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ....sim import kernels as K
from .kernel import finish

__all__ = ["PS_LEN", "DL_LEN", "PS_START", "PS_COUNT", "PS_FREE", "PS_PENDING", "new_state", "pass_run", "pass_held"]

PS_START, PS_COUNT, PS_MEMBERS, PS_MAX, PS_PER_KEY, PS_PENDING, PS_FREE = 0, 1, 2, 3, 4, 5, 6
PS_LEN = 7
DL_HEAD, DL_TAIL, DL_N, DL_NFREE = 0, 1, 2, 3
DL_LEN = 4
C_OUT, C_OPENED, C_DROP = 0, 1, 2  # counters of a run: messages settled, passes opened, messages dropped
SF_COLUMNS = 4  # a deferred message's admission, service, cycle cost and bytes


def new_state(max_members: float, per_key: float) -> np.ndarray:
    """``ps`` before the first arrival."""
    ps = np.zeros(PS_LEN)
    ps[PS_START] = -np.inf
    ps[PS_MAX] = max_members
    ps[PS_PER_KEY] = per_key
    return ps


@njit(cache=True)
def _open(ps, start, out_pass, counts):
    """Open a pass at ``start``."""
    ps[PS_START] = start
    ps[PS_COUNT] += 1.0
    ps[PS_MEMBERS] = 0.0
    out_pass[counts[C_OPENED]] = start
    counts[C_OPENED] += 1


@njit(cache=True)
def _close(fs, ps):
    """The current pass's cost runs after its last member."""
    if ps[PS_PENDING] > 0.0:
        ps[PS_FREE] = finish(fs, ps[PS_FREE], ps[PS_PENDING])
        ps[PS_PENDING] = 0.0


@njit(cache=True)
def _join(fs, ps, kpass, kcount, work, cost, k, ref, admit, size, hb, out_ref, out_t, counts):
    """Member ``ref`` (connection ``k``, admitted at ``admit``, ``size`` bytes) of the current pass,
    served now; with a byte capacity its departure goes on the heap ``hb`` = (hdep, hsize, hn)."""
    start = max(ps[PS_FREE], ps[PS_START])
    opener = ps[PS_MEMBERS] == 0.0
    extra = cost if opener else 0.0
    ps[PS_MEMBERS] += 1.0
    if kpass[k] != ps[PS_COUNT]:
        kpass[k] = ps[PS_COUNT]
        kcount[k] = 0
    kcount[k] += 1
    fs[K.WORK] += work + extra
    fs[K.SERVED] += 1.0
    dep = finish(fs, start, work)
    ps[PS_FREE] = dep
    if opener:
        ps[PS_PENDING] = extra
    j = counts[C_OUT]
    out_ref[j] = ref
    out_t[0, j] = start
    out_t[1, j] = dep
    out_t[2, j] = dep + extra  # busy time: the pass's cost counted with its opener
    out_t[3, j] = admit
    counts[C_OUT] += 1
    if fs[K.CAP_BYTES] < np.inf:
        hdep, hsize, hn = hb
        K._heap_push(hdep, hsize, hn[0], dep, size)
        hn[0] += 1


@njit(cache=True)
def _has_share(ps, kpass, kcount, k):
    """Has connection ``k`` given the current pass fewer messages than its share?"""
    return kpass[k] != ps[PS_COUNT] or kcount[k] < ps[PS_PER_KEY]


@njit(cache=True)
def _may_join(ps, kpass, kcount, kdef, k):
    """May a new arrival of connection ``k`` join the current pass (none of its messages waits)?"""
    return ps[PS_MEMBERS] < ps[PS_MAX] and kdef[k] == 0 and _has_share(ps, kpass, kcount, k)


@njit(cache=True)
def _advance(fs, ps, kpass, kcount, kdef, sf, si, stack, dl, hb, out_ref, out_t, out_pass, counts):
    """Close the current pass and open the next with the deferred heads (there are some)."""
    _close(fs, ps)
    _open(ps, ps[PS_FREE], out_pass, counts)
    want = 0.0
    for c in range(kdef.shape[0]):
        want += min(kdef[c], ps[PS_PER_KEY])
    want = min(want, ps[PS_MAX])
    prev, s = -1, dl[DL_HEAD]
    while s >= 0 and ps[PS_MEMBERS] < want:
        nxt = si[s, 2]
        k = si[s, 0]
        if _has_share(ps, kpass, kcount, k):
            _join(
                fs, ps, kpass, kcount, sf[s, 1], sf[s, 2], k, si[s, 1], sf[s, 0], sf[s, 3], hb, out_ref, out_t, counts
            )
            kdef[k] -= 1
            if prev < 0:
                dl[DL_HEAD] = nxt
            else:
                si[prev, 2] = nxt
            if nxt < 0:
                dl[DL_TAIL] = prev
            dl[DL_N] -= 1
            stack[dl[DL_NFREE]] = s
            dl[DL_NFREE] += 1
        else:
            prev = s
        s = nxt


@njit(cache=True)
def _defer(sf, si, stack, dl, kdef, a, work, cost, size, k, ref):
    dl[DL_NFREE] -= 1
    s = stack[dl[DL_NFREE]]
    sf[s, 0], sf[s, 1], sf[s, 2], sf[s, 3] = a, work, cost, size
    si[s, 0], si[s, 1], si[s, 2] = k, ref, -1
    if dl[DL_TAIL] >= 0:
        si[dl[DL_TAIL], 2] = s
    else:
        dl[DL_HEAD] = s
    dl[DL_TAIL] = s
    dl[DL_N] += 1
    kdef[k] += 1


@njit(cache=True)
def _admit(fs, ps, kpass, kcount, kdef, sf, si, stack, dl, hb, out_ref, out_t, out_pass, counts, a, size):
    """When a message that reaches the full station at ``a`` is admitted (module docstring), s."""
    hdep, hsize, hn = hb
    t = max(a, fs[K.ADMIT_FLOOR])
    while True:
        while hn[0] > 0 and hdep[0] <= t:
            _, sz = K._heap_pop(hdep, hsize, hn[0])
            hn[0] -= 1
            fs[K.BYTES_IN] -= sz
        if fs[K.BYTES_IN] + size <= fs[K.CAP_BYTES] or (hn[0] == 0 and dl[DL_N] == 0):
            return t
        if hn[0] > 0 and (dl[DL_N] == 0 or hdep[0] <= ps[PS_FREE] + ps[PS_PENDING]):
            t = hdep[0]  # the next departure comes before the next pass opens
        else:  # it comes with the next pass, which the held message cannot join
            _advance(fs, ps, kpass, kcount, kdef, sf, si, stack, dl, hb, out_ref, out_t, out_pass, counts)


@njit(cache=True)
def pass_run(
    fs: np.ndarray,
    ps: np.ndarray,
    kpass: np.ndarray,
    kcount: np.ndarray,
    kdef: np.ndarray,
    sf: np.ndarray,
    si: np.ndarray,
    stack: np.ndarray,
    dl: np.ndarray,
    hb: tuple,
    first: int,
    ref0: int,
    arrival: np.ndarray,
    service: np.ndarray,
    cycle_cost: np.ndarray,
    size: np.ndarray,
    key: np.ndarray,
    horizon: float,
    out_ref: np.ndarray,
    out_t: np.ndarray,
    out_pass: np.ndarray,
    out_drop: np.ndarray,
    counts: np.ndarray,
) -> int:
    """Offer ``arrival[first:]`` (sorted; references ``ref0 + i``; ``size`` bytes), then advance to
    ``horizon``.

    Returns the index of the first message not offered: ``arrival.shape[0]``
    when done, less when no slot is free for a message to wait in, or, with a
    byte capacity, the heap ``hb`` might overflow (the caller grows them and
    calls again from there). Settled messages go to ``out_ref`` / ``out_t``
    (start, departure, departure plus an opener's pass cost, admission, s),
    the start of each pass opened to ``out_pass``, the references of messages
    dropped (larger than the whole buffer) to ``out_drop``; ``counts`` holds
    how many of each so far. A message that woke the server is counted as the
    FIFO kernel counts it (:func:`pubsim.sim.kernels.count_woke`).
    """
    bounded = fs[K.CAP_BYTES] < np.inf
    for i in range(first, arrival.shape[0]):
        if dl[DL_NFREE] == 0 or (bounded and hb[2][0] + dl[DL_N] + 1 > hb[0].shape[0]):
            return i
        a = arrival[i]
        work = service[i]
        k = key[i]
        if bounded:
            if size[i] > fs[K.CAP_BYTES]:
                out_drop[counts[C_DROP]] = ref0 + i
                counts[C_DROP] += 1
                continue
            a = _admit(fs, ps, kpass, kcount, kdef, sf, si, stack, dl, hb, out_ref, out_t, out_pass, counts, a, size[i])
            fs[K.ADMIT_FLOOR] = a
            if fs[K.BYTES_IN] > fs[K.FC_BYTES]:
                work += fs[K.FC_FIXED] + fs[K.FC_PER_BYTE] * size[i]
            fs[K.BYTES_IN] += size[i]
        while dl[DL_N] > 0 and a > ps[PS_START]:
            _advance(fs, ps, kpass, kcount, kdef, sf, si, stack, dl, hb, out_ref, out_t, out_pass, counts)
        if a > ps[PS_START]:  # nothing waits: the message opens a pass
            _close(fs, ps)
            start = a
            if ps[PS_FREE] > a:
                start = ps[PS_FREE]
            elif K.wakes(fs, a - ps[PS_FREE]):  # else the loop was still entering epoll_wait: no wake-up
                work += K.wake_extra_s(fs, a - ps[PS_FREE], work)
                if fs[K.EXIT_N] > 0.0:  # the idle core's exit latency, as the FIFO kernel's
                    start = a + K.idle_exit_s(fs, a - ps[PS_FREE])
                K.count_woke(fs, start)
            _open(ps, start, out_pass, counts)
            _join(fs, ps, kpass, kcount, work, cycle_cost[i], k, ref0 + i, a, size[i], hb, out_ref, out_t, counts)
        elif _may_join(ps, kpass, kcount, kdef, k):
            _join(fs, ps, kpass, kcount, work, cycle_cost[i], k, ref0 + i, a, size[i], hb, out_ref, out_t, counts)
        else:
            _defer(sf, si, stack, dl, kdef, a, work, cycle_cost[i], size[i], k, ref0 + i)
    while dl[DL_N] > 0 and horizon > ps[PS_START]:
        _advance(fs, ps, kpass, kcount, kdef, sf, si, stack, dl, hb, out_ref, out_t, out_pass, counts)
    return arrival.shape[0]


@njit(cache=True)
def pass_held(si: np.ndarray, dl: np.ndarray, refs: np.ndarray) -> None:
    """The deferred messages' references in list order into ``refs``; they are renumbered 0, 1, ..."""
    s = dl[DL_HEAD]
    j = 0
    while s >= 0:
        refs[j] = si[s, 1]
        si[s, 1] = j
        j += 1
        s = si[s, 2]
