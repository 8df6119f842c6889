"""Kernel receive timestamps on TCP sockets, on the clock of the load generator's send times.

``SO_TIMESTAMPNS`` (Linux ``Documentation/networking/timestamping.rst``)
makes every ``recvmsg`` carry the kernel's receive time of what it read:
for TCP, ``tcp_recvmsg`` returns the stamp of the last segment the read
consumed, and ``tcp_try_coalesce`` gives a segment merged into a queued one
the later stamp. On loopback the stamp is taken in the sender's softirq,
before the receiving process is woken, so the time between the stamp and
the reader's own clock read is the reader's wake-up and its wait for a
core: what :mod:`~pubsim.calibration.harness.loadgen.subscriber` reports as
the client's delay and :func:`~pubsim.calibration.harness.machine.idle_wakeup_latency`
measures on an idle core.
"""

from __future__ import annotations

import socket
import struct
import time

__all__ = ["ANCILLARY_BYTES", "RealToMonotonic", "enable_kernel_stamps", "kernel_time_ns"]

# SO_TIMESTAMPNS / SCM_TIMESTAMPNS (Linux asm-generic/socket.h; Python's socket module names it from 3.14)
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")  # struct timespec on a 64-bit Linux: tv_sec, tv_nsec
ANCILLARY_BYTES = socket.CMSG_SPACE(_TIMESPEC.size)


def enable_kernel_stamps(sock):
    """Ask the kernel for a receive timestamp with every read; False where it refuses."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


class RealToMonotonic:
    """The offset CLOCK_REALTIME - CLOCK_MONOTONIC, ns, re-read every ``period_ns``.

    The kernel stamps receptions with CLOCK_REALTIME; the publishers stamp
    sends with CLOCK_MONOTONIC. Each reading takes the best of three
    (monotonic, realtime, monotonic) triples: the one whose two monotonic
    reads are closest, so that a preemption between the reads (the client
    core is shared by every client) cannot shift the offset by the length
    of the preemption. Re-reading every period follows NTP's slewing.
    """

    def __init__(self, period_ns=50_000_000):
        self.period_ns = period_ns
        self.offset_ns = 0
        self.next_ns = 0

    def refresh(self, now_ns):
        """Re-read the offset if ``now_ns`` (CLOCK_MONOTONIC) is past the period."""
        if now_ns < self.next_ns:
            return
        mono, real = time.monotonic_ns, time.time_ns
        best = None
        for _ in range(3):
            m0, r, m1 = mono(), real(), mono()
            if best is None or m1 - m0 < best[0]:
                best = (m1 - m0, r - (m0 + m1) // 2)
        self.offset_ns = best[1]
        self.next_ns = now_ns + self.period_ns


def kernel_time_ns(ancillary, offset_ns):
    """The kernel's receive time (CLOCK_MONOTONIC ns) in ``recvmsg``'s ancillary data, or None.

    ``offset_ns``: CLOCK_REALTIME - CLOCK_MONOTONIC (:class:`RealToMonotonic`).
    """
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec * 1_000_000_000 + nsec - offset_ns
    return None
