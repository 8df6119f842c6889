"""The I/O-cycle server by arithmetic (numba).

One server, an unlimited FIFO queue, optional CPU quota. A message that
arrives after the current cycle started opens a new cycle; one that arrived
before (it was waiting when the cycle began, or arrived with its opener) is
read by the same cycle, unless the cycle already holds its most members or
its bytes would pass the most a cycle reads (one ``read`` returns at most a
buffer's worth: nats-server's 64 KiB), then it opens the next.
(A loop that reads a few messages per connection per pass, as Mosquitto's,
serves out of arrival order: :mod:`.pass_kernel`.)
The members are routed back to back (their own demands); the cycle's cost
(flushes, thread hand-offs, parking) follows its last member, as
nats-server's ``flushClients`` follows the parsing of a whole read buffer.
It is known to be the last when the next cycle opens, so the cost is put on
the server then, from the time the last member left: it delays the next
cycle and uses CPU (and quota), never the messages of its own cycle
(measured: NATS at 200 msg/s spends 83 us of CPU per message with a 1st
latency percentile of 67 us, so most of that CPU is off the message's path).
Cycle membership depends only on past arrivals, so messages are settled one
by one in arrival order, like :func:`pubsim.sim.kernels.fifo_run`, and any
split of the arrivals into calls gives the same result (both drivers agree).

State: ``fs`` is the FIFO kernel's float state (:mod:`pubsim.sim.kernels`:
idle extra, quota, period, used, work, served, idle-exit curve: a message
that finds the server idle starts that much later, unless it came within
the sleep entry, :func:`pubsim.sim.kernels.wakes`); ``cyc`` float64[2]: start of
the current cycle (s, -inf before the first), cycles opened so far,
members of the current cycle, most members per cycle (inf: no limit),
its cost not yet put on the server (s), bytes of the current cycle, most
bytes per cycle (inf: no limit); ``free`` float64[1]: when the server is
next free, s.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ....sim import kernels as K

__all__ = ["CYC_START", "CYC_COUNT", "CYC_LEN", "CYC_MAX", "CYC_MAX_BYTES", "cycle_run", "finish"]

CYC_START, CYC_COUNT, CYC_MEMBERS, CYC_MAX, CYC_PENDING, CYC_BYTES, CYC_MAX_BYTES = 0, 1, 2, 3, 4, 5, 6
CYC_LEN = 7


@njit(cache=True, inline="always")
def finish(fs: np.ndarray, start: float, work: float) -> float:
    """End of ``work`` s of service begun at ``start``, under the quota in ``fs`` if any, s."""
    if K.periodic(fs) and work > 0.0:
        return K.quota_finish(fs, start, work)
    return start + work


@njit(cache=True)
def cycle_run(
    fs: np.ndarray,
    cyc: np.ndarray,
    free: np.ndarray,
    arrival: np.ndarray,
    service: np.ndarray,
    size: np.ndarray,
    cycle_cost: np.ndarray,
    out_start: np.ndarray,
    out_dep: np.ndarray,
    out_end: np.ndarray,
    out_opens: np.ndarray,
) -> None:
    """Serve ``arrival`` (sorted) with own demands ``service``, read sizes ``size`` (bytes)
    and, after the last member of a cycle, the ``cycle_cost`` of its opener (s); fills start
    and departure times, and each message's departure plus, for an opener,
    its cycle's cost (so that busy time sums to the work), s, and whether it
    opened a cycle; a message that woke the server (paid the wake-up) is
    counted as the FIFO kernel counts it (:func:`pubsim.sim.kernels.count_woke`)."""
    for i in range(arrival.shape[0]):
        a = arrival[i]
        work = service[i]
        full = cyc[CYC_MEMBERS] >= cyc[CYC_MAX] or cyc[CYC_BYTES] + size[i] > cyc[CYC_MAX_BYTES]
        opens = a > cyc[CYC_START] or (full and cyc[CYC_MEMBERS] > 0.0)
        if opens and cyc[CYC_PENDING] > 0.0:  # the previous cycle ended with the last message
            free[0] = finish(fs, free[0], cyc[CYC_PENDING])
            cyc[CYC_PENDING] = 0.0
        start = a
        if free[0] > a:
            start = free[0]
        elif K.wakes(fs, a - free[0]):  # else the loop was still awake: read without a wake-up
            work += K.wake_extra_s(fs, a - free[0], work)
            if fs[K.EXIT_N] > 0.0:  # the idle core's exit latency, as the FIFO kernel's
                start = a + K.idle_exit_s(fs, a - free[0])
            K.count_woke(fs, start)
        extra = 0.0
        if opens:
            extra = cycle_cost[i]
            cyc[CYC_START] = start
            cyc[CYC_COUNT] += 1.0
            cyc[CYC_MEMBERS] = 0.0
            cyc[CYC_BYTES] = 0.0
            cyc[CYC_PENDING] = extra
        cyc[CYC_MEMBERS] += 1.0
        cyc[CYC_BYTES] += size[i]
        fs[K.WORK] += work + extra
        fs[K.SERVED] += 1.0
        dep = finish(fs, start, work)
        free[0] = dep
        out_start[i] = start
        out_dep[i] = dep
        out_end[i] = dep + extra  # busy time: the cycle's cost counted with its opener
        out_opens[i] = opens
