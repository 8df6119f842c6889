"""Kernel transmit timestamps on a TCP socket: when each of a publisher's batches left for the wire.

``SO_TIMESTAMPING`` with ``SOF_TIMESTAMPING_TX_SOFTWARE`` (Linux
``Documentation/networking/timestamping.rst``) makes the kernel stamp a
send when the driver takes its last segment: loopback's ``loopback_xmit``
calls ``skb_tx_timestamp``, just before the segment is queued for the
receiver, whose receive stamp (:mod:`.rxstamp`) is taken in the same softirq.
``SOF_TIMESTAMPING_OPT_ID`` tags each stamp with the byte offset of the
last byte of the ``send`` call it belongs to (a 32-bit counter), counted
from the next byte written when the option was set with
``SOF_TIMESTAMPING_OPT_ID_TCP`` (without it, from the oldest unacknowledged
byte, which would shift the count by whatever a delayed ACK left open; a
kernel without it refuses the option and the run has no transmit stamps); ``SOF_TIMESTAMPING_OPT_TSONLY`` returns the
stamp without a copy of the data. Stamps are read from the socket's error
queue (``MSG_ERRQUEUE``), which is charged to its receive buffer: read it
often (:meth:`TxStamps.collect`).

The time from the publisher's write (its clock read just before the
batch's ``sendall``) to this stamp is the time the batch waited in the
publisher's socket: the ``send`` system call, and whatever the broker's TCP
window held back (``socket_wait_s`` of :class:`..loadgen.LoadResult`). Latency
itself starts at the write: a held batch leaves in pieces, and its last
byte's stamp comes after its first messages have arrived.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import time

__all__ = ["TxStamps", "enable_tx_stamps"]

# asm-generic/socket.h (SO_TIMESTAMPING_OLD on 64-bit Linux); linux/net_tstamp.h flags
_SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
_TX_SOFTWARE = 1 << 1
_SOFTWARE = 1 << 4
_OPT_ID = 1 << 7
_OPT_TSONLY = 1 << 11
_OPT_ID_TCP = 1 << 16  # count from the next byte written, not from the oldest unacknowledged one (Linux 6.2)
_FLAGS = _TX_SOFTWARE | _SOFTWARE | _OPT_ID | _OPT_TSONLY | _OPT_ID_TCP
# struct scm_timestamping (three timespecs, [0] the software stamp); struct sock_extended_err
_TIMESPECS = struct.Struct("@qqqqqq")
_EXTENDED_ERR = struct.Struct("@IBBBBII")
_ORIGIN_TIMESTAMPING = 4  # SO_EE_ORIGIN_TIMESTAMPING
_RECVERR = {(getattr(socket, "SOL_IP", 0), 11), (getattr(socket, "SOL_IPV6", 41), 25)}  # IP_RECVERR, IPV6_RECVERR
_ANCILLARY_BYTES = 512
_SIOCOUTQNSD = 0x894B  # linux/sockios.h: bytes written but not yet sent


def enable_tx_stamps(sock):
    """Ask the kernel for a transmit stamp of every ``send`` on ``sock``; False where it refuses."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPING, _FLAGS)
    except OSError:
        return False
    return True


def _parse(ancillary):
    """``(key, realtime_ns)`` of one error-queue message, or None if it is not a transmit stamp."""
    key = stamp = None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPING and len(data) >= _TIMESPECS.size:
            sec, nsec = _TIMESPECS.unpack_from(data)[:2]
            stamp = sec * 1_000_000_000 + nsec
        elif (level, kind) in _RECVERR and len(data) >= _EXTENDED_ERR.size:
            fields = _EXTENDED_ERR.unpack_from(data)
            if fields[1] == _ORIGIN_TIMESTAMPING:
                key = fields[6]
    return None if key is None or not stamp else (key, stamp)


class TxStamps:
    """Byte accounting and transmit stamps of one TCP socket (module docstring).

    Every byte written after :meth:`start` must be announced, a batch's with
    :meth:`batch` and any other (pings, pongs) with :meth:`other`, so that
    each stamp's byte offset names its batch.
    """

    def __init__(self, sock):
        self.sock = sock
        self.enabled = False  # stamps are being taken
        self.started = False  # they were, for this run's batches
        self.written = 0
        self.batch_keys = []  # per batch: offset of its last byte, mod 2**32
        self.stamps = {}  # offset of a send's last byte -> CLOCK_MONOTONIC ns

    def start(self):
        """Enable the stamps; the byte count starts here."""
        self.enabled = self.started = enable_tx_stamps(self.sock)
        return self.enabled

    def batch(self, nbytes):
        """A batch of ``nbytes`` was written (in one or more ``send`` calls)."""
        self.written += nbytes
        self.batch_keys.append((self.written - 1) & 0xFFFFFFFF)

    def other(self, nbytes):
        """``nbytes`` not in a batch were written."""
        self.written += nbytes

    def collect(self, offset_ns):
        """Read every stamp queued so far; ``offset_ns``: CLOCK_REALTIME - CLOCK_MONOTONIC."""
        if self.enabled:
            self._read(offset_ns)

    def finish(self, offset_ns, timeout_s):
        """Wait (sleeping) until every byte written has been sent or ``timeout_s`` passed, read the
        stamps and disable them: a queued stamp makes ``poll`` report the socket ready, so a later
        read with a timeout would spin."""
        if not self.enabled:
            return
        deadline = time.monotonic() + timeout_s
        while _unsent_bytes(self.sock) > 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        self._read(offset_ns)
        self.sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPING, 0)
        self.enabled = False
        self._read(offset_ns)

    def _read(self, offset_ns):
        recvmsg, flags = self.sock.recvmsg, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT
        while True:
            try:
                _, ancillary, _, _ = recvmsg(0, _ANCILLARY_BYTES, flags)
            except (BlockingIOError, InterruptedError):
                return
            got = _parse(ancillary)
            if got is not None:
                self.stamps[got[0]] = got[1] - offset_ns

    def batch_ns(self):
        """Each batch's transmit time (CLOCK_MONOTONIC ns), 0 where no stamp came."""
        get = self.stamps.get
        return [get(k, 0) for k in self.batch_keys]


def _unsent_bytes(sock):
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQNSD, b"\0\0\0\0"))[0]
    except OSError:
        return 0
