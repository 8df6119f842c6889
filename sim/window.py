"""A connection with an in-flight window, by arithmetic (numba).

One step per message of a connection (MQTT client connection, AMQP channel
to a consumer). The transmitter is the FIFO step of :mod:`pubsim.sim.kernels` (same
admission, same buffer), with one more floor on the start of service: at
most ``W`` acknowledged-delivery messages may be un-acknowledged, so a
windowed message may start only when a slot is free: the window is ``W``
slots holding the acknowledgement time of their last message, and the
message takes the slot freed first (acknowledgements may come out of order
when a message is resent, so this is the earliest of the last W acks, not
the ack of message i-W)::

    start_i = max(admit_i, transmitter free, min(slots))
    depart_i = start_i + service_i
    reach_i = max(depart_i + delay_i, reach_{i-1})           (in order, TCP)
    free_i = max(reach_i, free_{i-1}) + processing_i           (consumer)
    done_i = free_i + extra_i                                  (resends)
    ack_i = done_i + ack_extra_i + ack_return_i

A resent message (``extra_i`` > 0: whole retry timeouts) does not hold up
the messages behind it: its processing keeps its place in the consumer's
queue and only its delivery moves later (approximation: a real consumer
would process it when it arrives).

and ``ack_i`` replaces ``min(slots)``. The slots are a binary min-heap
(O(log W) per message). W is Mosquitto's ``max_inflight_messages`` or an
AMQP ``basic.qos`` prefetch count. Messages not windowed (QoS 0, auto-ack)
use no slot.

Speed. :func:`window_run` steps :func:`window_offer` per message in the
general case (a buffer limit). A connection with no buffer limit (the usual
MQTT or AMQP client connection) runs as one loop with the state in local
variables (:func:`_open_window_run`), the same operations in the same order
as :func:`window_offer` (``tests/kernel/test_fast_path_kernels.py`` checks
it), as the FIFO kernels of :mod:`pubsim.sim.kernels` do: a numba call that
passes arrays pays reference counting per array per call, so a
:func:`window_offer` call per message (eight arrays) cost about 170 ns where
the loop costs a few ns. The helpers are inlined (``inline="always"``).

Without resends and processing, one windowed connection carries at most
``W / (service + delay + ack_return)`` messages per second (the window
bound of a sliding-window protocol).

State: the FIFO arrays of :class:`pubsim.sim.disciplines.FifoDiscipline` (one
server, no CPU quota) plus ``ring`` float64[max(W, 1)] (the slot heap),
``wst`` int64[2] (unused, W; W = 0 means no window), ``last`` float64[2]
(last in-order arrival, consumer free time). The per-message inputs beyond
service time and size are a :class:`WindowInputs`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import kernels as K

__all__ = ["window_offer", "window_run", "WindowInputs", "RING_POS", "RING_W", "LAST_REACH", "CONSUMER_FREE"]


class WindowInputs(NamedTuple):
    """Per-message inputs of :func:`window_run` besides arrival, service and size
    (arrays of one length, in arrival order)."""

    windowed: np.ndarray  # bool: uses a window slot (acknowledged delivery)
    lost: np.ndarray  # bool: lost on the link (not acknowledged, no resend)
    delay: np.ndarray  # propagation delay, s
    extra: np.ndarray  # delivery delay by resends, s
    processing: np.ndarray  # consumer's processing time, s (0: no consumer here)
    ack_extra: np.ndarray  # extra delay of the acknowledgement (its resends), s


RING_POS, RING_W = 0, 1
LAST_REACH, CONSUMER_FREE = 0, 1


@njit(cache=True, inline="always")
def _replace_min(heap: np.ndarray, value: float) -> None:
    """Replace the root of a binary min-heap with ``value`` and sift it down."""
    n = heap.shape[0]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        small = left
        if left + 1 < n and heap[left + 1] < heap[left]:
            small = left + 1
        if value <= heap[small]:
            break
        heap[i] = heap[small]
        i = small
    heap[i] = value


@njit(cache=True, inline="always")
def window_offer(
    fs: np.ndarray,
    ist: np.ndarray,
    free: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    ring: np.ndarray,
    wst: np.ndarray,
    last: np.ndarray,
    arrival: float,
    service: float,
    size: float,
    windowed: bool,
    lost: bool,
    delay: float,
    extra: float,
    processing: float,
    ack_extra: float,
    ack_return: float,
) -> tuple[float, float, float, float, int]:
    """Offer one message to a windowed connection.

    Returns ``(admit, start, depart, done, code)``: admission, transmitter
    start and departure, time it is done at the receiver (delivered), s
    (-1.0 when dropped or lost), and the outcome code (``K.OK``,
    ``K.DROP_FULL``/``K.DROP_BYTES``, ``K.DROP_LOSS``, ``K.NEED_GROW``).
    """
    limited = ist[K.CAP_MSGS] >= 0 or fs[K.CAP_BYTES] < np.inf
    admit = arrival
    if limited:
        if ist[K.N_HEAP] >= hdep.shape[0]:
            return -1.0, -1.0, -1.0, -1.0, K.NEED_GROW
        admit, code = K._admit(fs, ist, hdep, hsize, arrival, size)
        if code != K.OK:
            return -1.0, -1.0, -1.0, -1.0, code
        fs[K.ADMIT_FLOOR] = admit
    start = admit
    if free[0] > start:
        start = free[0]
    w = wst[RING_W]
    if windowed and w > 0 and ring[0] > start:
        start = ring[0]
    depart = start + service
    free[0] = depart
    fs[K.WORK] += service
    fs[K.SERVED] += 1.0
    if limited:
        K._heap_push(hdep, hsize, ist[K.N_HEAP], depart, size)
        ist[K.N_HEAP] += 1
        fs[K.BYTES_IN] += size
    if lost:
        return admit, start, depart, -1.0, K.DROP_LOSS
    reach = depart + delay
    if reach < last[LAST_REACH]:
        reach = last[LAST_REACH]
    last[LAST_REACH] = reach
    done = reach
    if processing > 0.0 or last[CONSUMER_FREE] > done:
        if last[CONSUMER_FREE] > done:
            done = last[CONSUMER_FREE]
        done = done + processing
        last[CONSUMER_FREE] = done
    done = done + extra
    if windowed and w > 0:
        _replace_min(ring, done + ack_extra + ack_return)
    return admit, start, depart, done, K.OK


@njit(cache=True)
def window_run(
    fs: np.ndarray,
    ist: np.ndarray,
    free: np.ndarray,
    hdep: np.ndarray,
    hsize: np.ndarray,
    ring: np.ndarray,
    wst: np.ndarray,
    last: np.ndarray,
    arrival: np.ndarray,
    service: np.ndarray,
    size: np.ndarray,
    windowed: np.ndarray,
    lost: np.ndarray,
    delay: np.ndarray,
    extra: np.ndarray,
    processing: np.ndarray,
    ack_extra: np.ndarray,
    ack_return: float,
    first: int,
    out_admit: np.ndarray,
    out_start: np.ndarray,
    out_dep: np.ndarray,
    out_done: np.ndarray,
    out_code: np.ndarray,
) -> int:
    """Apply :func:`window_offer` to messages ``first:`` in order; returns where it stopped
    (``len(arrival)``, or the index of a message that needs larger heap arrays)."""
    n = arrival.shape[0]
    if free.shape[0] == 1 and ist[K.CAP_MSGS] < 0 and fs[K.CAP_BYTES] == np.inf:
        _open_window_run(
            fs,
            free,
            ring,
            wst,
            last,
            arrival,
            service,
            windowed,
            lost,
            delay,
            extra,
            processing,
            ack_extra,
            ack_return,
            first,
            out_admit,
            out_start,
            out_dep,
            out_done,
            out_code,
        )
        return n
    for i in range(first, n):
        a, s, d, e, c = window_offer(
            fs,
            ist,
            free,
            hdep,
            hsize,
            ring,
            wst,
            last,
            arrival[i],
            service[i],
            size[i],
            windowed[i],
            lost[i],
            delay[i],
            extra[i],
            processing[i],
            ack_extra[i],
            ack_return,
        )
        out_code[i] = c
        if c == K.NEED_GROW:
            return i
        out_admit[i] = a
        out_start[i] = s
        out_dep[i] = d
        out_done[i] = e
    return n


@njit(cache=True, inline="always")
def _open_window_run(
    fs: np.ndarray,
    free: np.ndarray,
    ring: np.ndarray,
    wst: np.ndarray,
    last: np.ndarray,
    arrival: np.ndarray,
    service: np.ndarray,
    windowed: np.ndarray,
    lost: np.ndarray,
    delay: np.ndarray,
    extra: np.ndarray,
    processing: np.ndarray,
    ack_extra: np.ndarray,
    ack_return: float,
    first: int,
    out_admit: np.ndarray,
    out_start: np.ndarray,
    out_dep: np.ndarray,
    out_done: np.ndarray,
    out_code: np.ndarray,
) -> None:
    """:func:`window_offer` over ``arrival[first:]`` for one server and no buffer
    limit (admission is the arrival), with the state in local variables:
    the same operations in the same order, so bit-identical results."""
    n = arrival.shape[0]
    f = free[0]
    work = fs[K.WORK]
    served = fs[K.SERVED]
    last_reach = last[LAST_REACH]
    consumer_free = last[CONSUMER_FREE]
    w = wst[RING_W]
    for i in range(first, n):
        admit = arrival[i]
        start = admit
        if f > start:
            start = f
        slot = windowed[i] and w > 0
        if slot and ring[0] > start:
            start = ring[0]
        depart = start + service[i]
        f = depart
        work += service[i]
        served += 1.0
        out_admit[i] = admit
        out_start[i] = start
        out_dep[i] = depart
        if lost[i]:
            out_done[i] = -1.0
            out_code[i] = K.DROP_LOSS
            continue
        reach = depart + delay[i]
        if reach < last_reach:
            reach = last_reach
        last_reach = reach
        done = reach
        if processing[i] > 0.0 or consumer_free > done:
            if consumer_free > done:
                done = consumer_free
            done = done + processing[i]
            consumer_free = done
        done = done + extra[i]
        if slot:
            _replace_min(ring, done + ack_extra[i] + ack_return)
        out_done[i] = done
        out_code[i] = K.OK
    free[0] = f
    fs[K.WORK] = work
    fs[K.SERVED] = served
    last[LAST_REACH] = last_reach
    last[CONSUMER_FREE] = consumer_free


@njit(cache=True)
def acked_hop(
    qos: np.ndarray,
    wire_bytes: np.ndarray,
    bandwidth_Bps: float,
    latency_s: float,
    ack_s: float,
    timeout_s: float,
    jitter_s: np.ndarray,
    loss_u: np.ndarray,
    loss_p: float,
    first1: np.ndarray,
    later1: np.ndarray,
    dups1: np.ndarray,
    first2: np.ndarray,
    later2: np.ndarray,
    dups2: np.ndarray,
    service: np.ndarray,
    windowed: np.ndarray,
    lost: np.ndarray,
    delay: np.ndarray,
    extra: np.ndarray,
    ack_extra: np.ndarray,
    control: np.ndarray,
    resent: np.ndarray,
    dups: np.ndarray,
) -> None:
    """Per-message arithmetic of a hop with acknowledged delivery, in one pass.

    The rules are those of :class:`pubsim.models.mechanisms.qos.link.QosLinkStation`
    (MQTT QoS 0, 1 and 2 on a lossy link, whole retry timeouts per resend);
    this is their vectorised NumPy form written as one loop, the same
    operations in the same order (bit-identical), without the temporaries of
    some twenty array operations per batch. Inputs per message: hop QoS,
    wire bytes, jitter draw (s), loss draw U[0, 1), and the attempts of the
    two exchanges (``first``, ``later``, ``dups`` of
    :func:`pubsim.models.mechanisms.qos.rules.exchange_draws`: PUBLISH/PUBACK
    or PUBREC, then PUBREL/PUBCOMP). Outputs: transmitter service time (s),
    the :class:`WindowInputs` fields, and the handshake packets, resent
    packets and duplicate deliveries of each message.
    """
    two_legs_s = 2 * (latency_s + ack_s)
    for i in range(qos.shape[0]):
        q = qos[i]
        one = q == 1
        two = q == 2
        sends = first1[i] + later1[i] if q > 0 else 1
        rel_sends = first2[i] + later2[i] if two else 0
        e = 0.0
        if one:
            e = (first1[i] - 1) * timeout_s
        if two:
            e = (first1[i] - 1 + later1[i] + first2[i] - 1) * timeout_s + two_legs_s
        a = 0.0
        if one:
            a = later1[i] * timeout_s
        elif two:
            a = later2[i] * timeout_s
        delay[i] = latency_s + jitter_s[i]
        lost[i] = loss_u[i] < loss_p and q == 0
        windowed[i] = q > 0
        extra[i] = e
        ack_extra[i] = a
        c = 0
        if one:
            c += 1 + dups1[i]
        if two:
            c += 1 + dups1[i] + rel_sends + 1 + dups2[i]
        control[i] = c
        resent[i] = (sends - 1) + (rel_sends - 1 if two else 0)
        dups[i] = dups1[i] if one else 0
        service[i] = (wire_bytes[i] / bandwidth_Bps) * sends + ack_s * rel_sends
