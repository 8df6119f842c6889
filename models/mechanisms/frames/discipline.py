"""The event loop of a frame channel: a priority queue of frames, a transmitter, a send window, a reader.

YAMI4 (SYSTEMS.md §1) splits each outgoing message into frames of at most
``frame_bytes`` (its ``tcp_frame_size``) and keeps one outgoing queue per
channel that orders *frames* by priority, FIFO within a level (the frames
of one message stay in order). Here:

* the transmitter sends one frame at a time at the link's bandwidth,
  choosing the head frame of the highest non-empty priority level when it
  starts (a frame in transmission is never preempted);
* a frame may start only while the send window (``window_bytes``: the
  socket buffers between the queue and the receiver) has room for it; it
  occupies the window from its start until the reader takes its message;
* a message is complete when its last frame has arrived (last frame's end
  plus the link latency); the reader (the subscriber) takes complete
  messages in completion order, one at a time: it takes a message at
  ``max(complete, reader free)``, which frees the message's bytes in the
  window once the window update has travelled back (one link latency
  later: with a fast reader the channel carries at most the window per
  round trip, W/RTT), and is free again ``processing`` later, when the
  copy is delivered (a sleeping subscriber reads one message per sleep);
* YAMI4's receiving agent keeps reading frames of messages it is still
  assembling, so the window stops the transmitter only while a read is
  pending that will free it (a complete message waits for the reader);
  with nothing to free, the next frame goes (no deadlock when interleaved
  partial messages fill the window).

A message is settled (returned by :meth:`FrameDiscipline.run`) when its
last frame starts: its delivery time is known then. Events at one instant:
window frees and the end of a transmission come before arrivals, so the
outcome does not depend on how the arrivals are batched.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from ....sim import kernels as K
from ....sim.disciplines import Row, Served, _rows_to_packets
from ....sim.packets import Packets

__all__ = ["FrameDiscipline", "frame_sizes"]


def frame_sizes(wire_bytes: float, frame_bytes: int) -> list[float]:
    """Sizes of the frames of a message of ``wire_bytes`` bytes (all ``frame_bytes`` but the last)."""
    n = max(1, math.ceil(wire_bytes / frame_bytes))
    return [float(frame_bytes)] * (n - 1) + [wire_bytes - (n - 1) * frame_bytes]


class _Message:
    """A message in the channel: its frames still to send and what its settlement needs."""

    __slots__ = ("seq", "row", "frames", "next", "bytes", "processing", "first_start")

    def __init__(self, seq, row, frames, processing):
        self.seq = seq
        self.row = row
        self.frames = frames
        self.next = 0
        self.bytes = sum(frames)
        self.processing = processing
        self.first_start = math.nan


class FrameDiscipline:
    """Priority queue of frames, transmitter, send window and reader of one channel (module docstring).

    Parameters
    ----------
    frame_bytes : int
        Largest frame, bytes.
    window_bytes : int or None
        Send window (socket buffers) between the queue and the reader, bytes (None: unlimited).
    bandwidth_Bps : float
        Transmitter speed, bytes/s.
    delay_s : float
        Propagation delay of a frame, s.
    capacity_messages : int or None
        Messages with frames still queued beyond which an arriving one is dropped (``buffer_full``).
    capacity_bytes : float or None
        Same in wire bytes (``buffer_bytes``).

    :meth:`run` needs each message's reading time, given by :meth:`set_processing`
    for the same packets just before (the station's ``before_run`` hook).
    """

    event_driven = True
    uses_priority = True
    uses_key = False

    def __init__(
        self, *, frame_bytes, window_bytes, bandwidth_Bps, delay_s, capacity_messages=None, capacity_bytes=None
    ):
        self.frame_bytes = int(frame_bytes)
        self.window_bytes = math.inf if window_bytes is None else float(window_bytes)
        self.bandwidth_Bps = float(bandwidth_Bps)
        self.delay_s = float(delay_s)
        self.cap_msgs = math.inf if capacity_messages is None else int(capacity_messages)
        self.cap_bytes = math.inf if capacity_bytes is None else float(capacity_bytes)
        self.levels: dict[int, deque[_Message]] = {}  # priority -> messages with frames to send
        self.n_queued = 0
        self.bytes_queued = 0.0
        self.tx_end: float | None = None  # end of the frame being sent
        self.used = 0.0  # window bytes
        self.frees: list[tuple[float, int, float]] = []  # heap of (read time, seq, bytes)
        self.reader_free = 0.0
        self.seq = 0
        self._processing: np.ndarray | None = None
        self._out: list[tuple[Row, float, float, float, float]] = []
        self._drops: list[tuple[Row, float, int]] = []

    def set_processing(self, processing_s: np.ndarray) -> None:
        """Reading time of each message of the next :meth:`run` (same packets, same order), s."""
        self._processing = processing_s

    # --- events -----------------------------------------------------------
    def _next_event(self) -> float | None:
        times = [x for x in (self.tx_end, self.frees[0][0] if self.frees else None) if x is not None]
        return min(times) if times else None

    def advance(self, t: float) -> None:
        """Process window frees and transmission ends at or before ``t``, starting frames as they can."""
        while True:
            e = self._next_event()
            if e is None or e > t:
                return
            while self.frees and self.frees[0][0] <= e:
                self.used -= heapq.heappop(self.frees)[2]
            if self.tx_end is not None and self.tx_end <= e:
                self.tx_end = None
            self._try_start(e)

    def _try_start(self, now: float) -> None:
        if self.tx_end is not None or not self.n_queued:
            return
        prio = max(p for p, q in self.levels.items() if q)
        msg = self.levels[prio][0]
        size = msg.frames[msg.next]
        if self.used + size > self.window_bytes and self.frees:
            return  # blocked until the reader frees the window
        self.used += size
        self.tx_end = now + size / self.bandwidth_Bps
        if msg.next == 0:
            msg.first_start = now
        msg.next += 1
        if msg.next == len(msg.frames):
            self._settle(self.levels[prio].popleft(), self.tx_end)

    def _settle(self, msg: _Message, last_end: float) -> None:
        self.n_queued -= 1
        self.bytes_queued -= msg.bytes
        read = max(last_end + self.delay_s, self.reader_free)
        self.reader_free = read + msg.processing
        heapq.heappush(self.frees, (read + self.delay_s, msg.seq, msg.bytes))  # the window update travels back
        self._out.append((msg.row, msg.row[0], msg.first_start, self.reader_free, last_end))

    def arrive(self, t: float, row: Row, wire_bytes: float, prio: int, processing: float) -> None:
        """One message at time ``t`` (after :meth:`advance` to ``t``)."""
        if self.n_queued >= self.cap_msgs:
            self._drops.append((row, t, K.DROP_FULL))
            return
        if self.bytes_queued + wire_bytes > self.cap_bytes:
            self._drops.append((row, t, K.DROP_BYTES))
            return
        msg = _Message(self.seq, row, frame_sizes(wire_bytes, self.frame_bytes), processing)
        self.seq += 1
        self.levels.setdefault(prio, deque()).append(msg)
        self.n_queued += 1
        self.bytes_queued += msg.bytes
        self._try_start(t)

    # --- batch interface --------------------------------------------------
    def run(
        self,
        packets: Packets,
        service_s: np.ndarray,
        size_bytes: np.ndarray,
        horizon_s: float,
        priority: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> Served:
        """Offer a batch (``size_bytes``: wire bytes; ``service_s`` unused) and advance to ``horizon_s``."""
        n = len(packets)
        processing, self._processing = self._processing, None
        if processing is None or len(processing) != n:
            raise RuntimeError("FrameDiscipline.run needs set_processing() for the same packets first")
        prio = np.zeros(n, dtype=np.int64) if priority is None else priority
        rows = zip(
            packets.t.tolist(),
            packets.msg.tolist(),
            packets.visit.tolist(),
            packets.size.tolist(),
            packets.pub_t.tolist(),
        )
        for i, row in enumerate(rows):
            self.advance(row[0])
            self.arrive(row[0], row, float(size_bytes[i]), int(prio[i]), float(processing[i]))
        self.advance(horizon_s)
        return self._collect()

    def _collect(self) -> Served:
        out, drops = self._out, self._drops
        self._out, self._drops = [], []
        times = np.array([o[1:] for o in out], dtype=float).reshape(-1, 4)
        return Served(
            _rows_to_packets([o[0] for o in out]),
            times[:, 0],
            times[:, 1],
            times[:, 2],
            _rows_to_packets([d[0] for d in drops]),
            np.array([d[1] for d in drops], dtype=float),
            np.array([d[2] for d in drops], dtype=np.int64),
            service_end=times[:, 3],
        )

    def next_wake(self) -> float | None:
        """Next window free or transmission end while frames wait."""
        return self._next_event() if self.n_queued else None

    def held_visits(self) -> np.ndarray:
        """Visits of the messages with frames still queued."""
        return np.array([m.row[2] for q in self.levels.values() for m in q], dtype=np.int64)
