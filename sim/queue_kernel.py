"""The event-driven queue of :class:`pubsim.sim.disciplines.QueueDiscipline`, compiled with numba.

Design. Priority scheduling and the drop-oldest / update / flow-to-disk
overflow policies decide a message's fate only after it has waited, so the
station cannot be computed by Lindley arithmetic (:mod:`pubsim.sim.kernels`).
It is still a plain event loop with no randomness: between two arrivals the
only events are service completions, each of which starts the next waiting
message. :func:`queue_run` runs that loop over a whole batch of arrivals in
one compiled call, so a chunk of the fast path costs one Python call instead
of several per message. The loop is the Python reference
(:class:`pubsim.sim.disciplines.EventQueueDiscipline`) transcribed statement
by statement, with the same floating-point operations in the same order, so
both give bit-identical results (``tests/kernel/test_queue_kernel.py``
checks it on random inputs).

The waiting room is a pool of slots (rows of ``sf``/``si``) linked into one
FIFO list per priority level, plus a stack of free slots; a level is created
the first time a message of its priority waits and is never removed, so the
level table lists priorities in the order the reference's dict does. With
few priority levels (the usual case: a handful of publisher priorities, at
most 256 with AMQP ``x-max-priority``) a linear scan of the levels is cheaper
than any ordered structure; picking the next message scans the levels for
the highest non-empty one, evicting the oldest compares the levels' head
sequence numbers (each level is in sequence order), and the ``update``
policy finds a key's waiting message through a table indexed by key. The
servers' completion times are a binary heap ordered by (completion time,
sequence number), as in the reference.

A message is known to the kernel by a *reference*: its index in the caller's
"held messages then this batch" packet list (:func:`queue_held` renumbers
the waiting ones at the end of each call). Outputs are references, so the
caller gathers packet rows with one ``take``.

State layout (arrays, mutated in place):

* ``qi`` int64[QI_LEN]: servers, message capacity (-1 = none), policy,
  messages in service, messages waiting, next sequence number, priority
  levels in use, free slots, outputs written, drops written.
* ``qf`` float64[QF_LEN]: bytes in the station, byte capacity (inf = none),
  extra service of a message that finds a server idle (s), extra service of
  a message spilled to disk by ``flow_to_disk`` (s).
* ``hf`` float64[c, 2] (completion time, size) and ``hseq`` int64[c]: heap of
  the messages in service.
* ``sf`` float64[S, 3] (service s, size bytes, arrival s) and ``si``
  int64[S, 4] (reference, sequence number, key, next slot or -1): slots;
  ``free`` int64[S]: stack of free slots (``qi[QI_NFREE]`` of them).
* ``lv`` int64[L, 4]: per level, priority, head slot, tail slot, count.
* ``kslot`` int64[K]: slot of the waiting message of each key, or -1
  (``update`` policy only).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernels import DROP_BYTES, DROP_FULL, DROP_OLDEST, DROP_REJECTED, DROP_REPLACED

__all__ = ["queue_run", "queue_held"]

# qi
QI_SERVERS, QI_CAP, QI_POLICY, QI_NBUSY, QI_NWAIT, QI_SEQ, QI_NLEV, QI_NFREE, QI_NOUT, QI_NDROP = range(10)
QI_LEN = 10
# qf
QF_BYTES, QF_CAP_BYTES, QF_IDLE, QF_DISK = range(4)
QF_LEN = 4
# sf / si / lv columns
SF_SVC, SF_SIZE, SF_ARR = range(3)
SI_REF, SI_SEQ, SI_KEY, SI_NEXT = range(4)
LV_PRIO, LV_HEAD, LV_TAIL, LV_COUNT = range(4)
# policies
Q_DROP_NEWEST, Q_REJECT, Q_DROP_OLDEST, Q_UPDATE, Q_FLOW_TO_DISK = range(5)


@njit(cache=True)
def _full(n_in: int, cap: int, bytes_in: float, size: float, cap_bytes: float) -> bool:
    """No room for a message of ``size`` bytes (``cap`` -1: no message limit)."""
    return (cap >= 0 and n_in >= cap) or bytes_in + size > cap_bytes


@njit(cache=True)
def _earlier(dep_a: float, seq_a: int, dep_b: float, seq_b: int) -> bool:
    """Order of the servers' heap: completion time, then sequence number."""
    return dep_a < dep_b or (dep_a == dep_b and seq_a < seq_b)


@njit(cache=True)
def queue_run(
    qi: np.ndarray,
    qf: np.ndarray,
    hf: np.ndarray,
    hseq: np.ndarray,
    sf: np.ndarray,
    si: np.ndarray,
    free: np.ndarray,
    lv: np.ndarray,
    kslot: np.ndarray,
    first: int,
    ref0: int,
    arrival: np.ndarray,
    service: np.ndarray,
    size: np.ndarray,
    prio: np.ndarray,
    key: np.ndarray,
    horizon: float,
    out_ref: np.ndarray,
    out_time: np.ndarray,
    drop_ref: np.ndarray,
    drop_t: np.ndarray,
    drop_code: np.ndarray,
) -> int:
    """Offer ``arrival[first:]`` in order (references ``ref0 + i``), then advance to ``horizon``.

    One function with the state in local variables: numba counts
    references to every array handed to a called function (atomic
    operations), which made the same loop split into helpers three times
    slower. Only scalar helpers are called.

    Parameters
    ----------
    qi, qf, hf, hseq, sf, si, free, lv, kslot : numpy.ndarray
        Queue state (module docstring); updated in place.
    first : int
        Index of the first arrival not offered yet.
    ref0 : int
        Reference of ``arrival[0]``.
    arrival, service, size : numpy.ndarray of float
        Arrival time (s, non-decreasing), service time (s) and buffer bytes per message.
    prio, key : numpy.ndarray of int
        Priority (higher first) and ``update`` key (``0 <= key < len(kslot)``) per message.
    horizon : float
        Time to advance to after the last arrival, s.
    out_ref, out_time : numpy.ndarray
        Started messages from column ``qi[QI_NOUT]`` on, in start order:
        reference, and admission, start and departure times (rows 0, 1, 2
        of ``out_time``, float64[3, m]).
    drop_ref, drop_t, drop_code : numpy.ndarray
        Dropped messages from ``qi[QI_NDROP]`` on: reference, time, cause.

    Returns
    -------
    int
        ``len(arrival)`` when done, or the index of the arrival that needs
        more slots or priority levels (nothing of it done yet): grow ``sf``,
        ``si``, ``free`` or ``lv`` and call again from there.
    """
    n = arrival.shape[0]
    servers, cap, policy = qi[QI_SERVERS], qi[QI_CAP], qi[QI_POLICY]
    cap_bytes, idle, disk = qf[QF_CAP_BYTES], qf[QF_IDLE], qf[QF_DISK]
    nbusy, nwait, seq, nlev, nfree = qi[QI_NBUSY], qi[QI_NWAIT], qi[QI_SEQ], qi[QI_NLEV], qi[QI_NFREE]
    nout, ndrop = qi[QI_NOUT], qi[QI_NDROP]
    bytes_in = qf[QF_BYTES]
    i = first
    while True:
        level = -1
        if i < n:
            t = arrival[i]
            for j in range(nlev):
                if lv[j, LV_PRIO] == prio[i]:
                    level = j
                    break
            if nfree == 0 or (level < 0 and nlev == lv.shape[0]):
                break  # the caller grows the arrays and calls again from i
        else:
            t = horizon
        # --- completions at or before t, each starting the best waiting message at its time
        while nbusy > 0 and hf[0, 0] <= t:
            done = hf[0, 0]
            bytes_in -= hf[0, 1]
            if nwait > 0:
                best = -1
                for j in range(nlev):
                    if lv[j, LV_COUNT] > 0 and (best < 0 or lv[j, LV_PRIO] > lv[best, LV_PRIO]):
                        best = j
                s = lv[best, LV_HEAD]
                lv[best, LV_HEAD] = si[s, SI_NEXT]
                lv[best, LV_COUNT] -= 1
                if lv[best, LV_COUNT] == 0:
                    lv[best, LV_TAIL] = -1
                nwait -= 1
                free[nfree] = s
                nfree += 1
                if policy == Q_UPDATE:
                    kslot[si[s, SI_KEY]] = -1
                dep = done + sf[s, SF_SVC]
                hf[0, 0], hf[0, 1], hseq[0] = dep, sf[s, SF_SIZE], si[s, SI_SEQ]  # pop and push at once
                out_ref[nout] = si[s, SI_REF]
                out_time[0, nout], out_time[1, nout], out_time[2, nout] = sf[s, SF_ARR], done, dep
                nout += 1
            else:
                nbusy -= 1
                hf[0, 0], hf[0, 1], hseq[0] = hf[nbusy, 0], hf[nbusy, 1], hseq[nbusy]
            k = 0  # sift the root down
            while True:
                c = 2 * k + 1
                if c >= nbusy:
                    break
                if c + 1 < nbusy and _earlier(hf[c + 1, 0], hseq[c + 1], hf[c, 0], hseq[c]):
                    c += 1
                if not _earlier(hf[c, 0], hseq[c], hf[k, 0], hseq[k]):
                    break
                hf[k, 0], hf[c, 0] = hf[c, 0], hf[k, 0]
                hf[k, 1], hf[c, 1] = hf[c, 1], hf[k, 1]
                hseq[k], hseq[c] = hseq[c], hseq[k]
                k = c
        if i == n:
            break
        # --- arrival i
        ref, svc, sz = ref0 + i, service[i], size[i]
        i += 1
        if policy == Q_UPDATE and kslot[key[i - 1]] >= 0:
            s = kslot[key[i - 1]]
            old = sf[s, SF_SIZE]
            if not (bytes_in - old + sz > cap_bytes):  # the new message takes the waiting one's place
                bytes_in += sz - old
                drop_ref[ndrop], drop_t[ndrop], drop_code[ndrop] = si[s, SI_REF], t, DROP_REPLACED
                ndrop += 1
                si[s, SI_REF] = ref
                sf[s, SF_SVC], sf[s, SF_SIZE], sf[s, SF_ARR] = svc, sz, t
                continue
        if _full(nbusy + nwait, cap, bytes_in, sz, cap_bytes):
            if policy == Q_FLOW_TO_DISK:
                svc += disk  # spilled to disk, read back before it is sent
            else:
                while policy == Q_DROP_OLDEST and nwait > 0 and _full(nbusy + nwait, cap, bytes_in, sz, cap_bytes):
                    best = -1  # evict the oldest waiting message: least sequence number of the levels' heads
                    for j in range(nlev):
                        if lv[j, LV_COUNT] > 0 and (
                            best < 0 or si[lv[j, LV_HEAD], SI_SEQ] < si[lv[best, LV_HEAD], SI_SEQ]
                        ):
                            best = j
                    s = lv[best, LV_HEAD]
                    lv[best, LV_HEAD] = si[s, SI_NEXT]
                    lv[best, LV_COUNT] -= 1
                    if lv[best, LV_COUNT] == 0:
                        lv[best, LV_TAIL] = -1
                    nwait -= 1
                    free[nfree] = s
                    nfree += 1
                    bytes_in -= sf[s, SF_SIZE]
                    drop_ref[ndrop], drop_t[ndrop], drop_code[ndrop] = si[s, SI_REF], t, DROP_OLDEST
                    ndrop += 1
                if _full(nbusy + nwait, cap, bytes_in, sz, cap_bytes):
                    if policy == Q_REJECT:
                        code = DROP_REJECTED
                    elif cap >= 0 and nbusy + nwait >= cap:
                        code = DROP_FULL
                    else:
                        code = DROP_BYTES
                    drop_ref[ndrop], drop_t[ndrop], drop_code[ndrop] = ref, t, code
                    ndrop += 1
                    continue
        bytes_in += sz
        seq += 1
        if nbusy < servers:  # a server is idle: start now, sift the new completion up
            dep = t + (svc + idle)
            k = nbusy
            nbusy += 1
            hf[k, 0], hf[k, 1], hseq[k] = dep, sz, seq - 1
            while k > 0 and _earlier(hf[k, 0], hseq[k], hf[(k - 1) // 2, 0], hseq[(k - 1) // 2]):
                c = (k - 1) // 2
                hf[k, 0], hf[c, 0] = hf[c, 0], hf[k, 0]
                hf[k, 1], hf[c, 1] = hf[c, 1], hf[k, 1]
                hseq[k], hseq[c] = hseq[c], hseq[k]
                k = c
            out_ref[nout] = ref
            out_time[0, nout], out_time[1, nout], out_time[2, nout] = t, t, dep
            nout += 1
            continue
        if level < 0:  # first message of this priority to wait
            level = nlev
            nlev += 1
            lv[level, LV_PRIO], lv[level, LV_HEAD], lv[level, LV_TAIL], lv[level, LV_COUNT] = prio[i - 1], -1, -1, 0
        nfree -= 1
        s = free[nfree]
        sf[s, SF_SVC], sf[s, SF_SIZE], sf[s, SF_ARR] = svc, sz, t
        si[s, SI_REF], si[s, SI_SEQ], si[s, SI_KEY], si[s, SI_NEXT] = ref, seq - 1, key[i - 1], -1
        if lv[level, LV_COUNT] == 0:
            lv[level, LV_HEAD] = s
        else:
            si[lv[level, LV_TAIL], SI_NEXT] = s
        lv[level, LV_TAIL] = s
        lv[level, LV_COUNT] += 1
        nwait += 1
        if policy == Q_UPDATE:
            kslot[key[i - 1]] = s
    qi[QI_NBUSY], qi[QI_NWAIT], qi[QI_SEQ], qi[QI_NLEV], qi[QI_NFREE] = nbusy, nwait, seq, nlev, nfree
    qi[QI_NOUT], qi[QI_NDROP] = nout, ndrop
    qf[QF_BYTES] = bytes_in
    return i


@njit(cache=True)
def queue_held(qi: np.ndarray, si: np.ndarray, lv: np.ndarray, refs: np.ndarray) -> int:
    """Write the waiting messages' references to ``refs`` (level by level in
    creation order, FIFO within a level) and renumber them ``0, 1, ...`` in
    that order. Returns how many are waiting."""
    j = 0
    for level in range(qi[QI_NLEV]):
        s = lv[level, LV_HEAD]
        for _ in range(lv[level, LV_COUNT]):
            refs[j] = si[s, SI_REF]
            si[s, SI_REF] = j
            j += 1
            s = si[s, SI_NEXT]
    return j
