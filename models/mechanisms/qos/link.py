"""A link that carries acknowledged deliveries: QoS handshakes, window, resends.

:class:`QosLinkStation` is a :class:`pubsim.models.stations.core.LinkStation` whose
messages each travel at a hop QoS (see :mod:`pubsim.models.mechanisms.qos.rules`). It is used for
a client's or bridge's link when some message on it has QoS > 0; links that
carry only QoS 0 stay plain :class:`~pubsim.models.stations.core.LinkStation`.

Per message it adds, by arithmetic in :func:`pubsim.sim.window.window_offer`:

* the MQTT packet identifier (2 bytes) and the forward handshake packets
  (QoS 2 PUBREL) to the transmitter's work, for every attempt;
* the in-flight window of the connection (``inflight_messages``; 0 = none);
* resends on a lossy link for QoS > 0 (never lost; delayed by whole
  ``retry_timeout_s``), QoS 0 lost with ``loss_probability`` as before;
* on a subscriber's downlink with QoS > 0, the subscriber itself (a FIFO
  consumer with its processing time), because its acknowledgement (Paho:
  after ``on_message`` returns; AMQP manual ack: after the consumer's work)
  frees the window slot. The copy is delivered when the consumer is done.

Counts per station (messages arriving in the window): handshake packets
sent on the link in both directions, resent packets and duplicate
deliveries (QoS 1).
"""

from __future__ import annotations

import numpy as np

from ....sim import kernels as K
from ....sim import window as W
from ....sim.disciplines import FifoDiscipline, Overflow, Served
from ....sim.packets import Packets
from ....sim.station import StationStats
from ...stations.core import _UNIFORM, LinkStation
from .rules import ACK_BYTES, exchange_draws

__all__ = ["QosLinkStation", "WindowDiscipline", "QosStats"]

_FIELDS = ("windowed", "lost", "delay", "extra", "processing", "ack_extra")


class WindowDiscipline(FifoDiscipline):
    """One FIFO transmitter with an in-flight window (see :mod:`pubsim.sim.window`).

    Besides :meth:`run`'s arguments it needs a :class:`pubsim.sim.window.WindowInputs`
    per batch, given by :meth:`set_inputs` before each :meth:`run` (the station's
    ``before_run`` hook) and used by that call only.

    Parameters
    ----------
    inflight_messages : int
        Window W (0 = no window).
    capacity_messages, capacity_bytes, overflow
        As for :class:`pubsim.sim.disciplines.FifoDiscipline`.
    """

    def __init__(
        self, *, inflight_messages, capacity_messages=None, capacity_bytes=None, overflow=Overflow.DROP_NEWEST
    ):
        super().__init__(
            servers=1, capacity_messages=capacity_messages, capacity_bytes=capacity_bytes, overflow=overflow
        )
        w = int(inflight_messages)
        self.ring = np.zeros(max(w, 1))
        self.wst = np.array([0, w], dtype=np.int64)
        self.last = np.zeros(2)
        self.ack_return_s = 0.0
        self._inputs = None
        self.done = np.empty(0)
        self.rows = np.empty(0, dtype=np.int64)  # rows of the last batch that used the transmitter (None: all)

    def set_inputs(self, inputs: W.WindowInputs) -> None:
        """Per-message inputs of the next :meth:`run` (same packets, same order)."""
        self._inputs = inputs

    def run(
        self,
        packets: Packets,
        service_s: np.ndarray,
        size_bytes: np.ndarray,
        horizon_s: float,
        priority: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> Served:
        n = len(packets)
        x, self._inputs = self._inputs, None
        if x is None or len(x.windowed) != n:
            raise RuntimeError("WindowDiscipline.run needs set_inputs() for the same packets first")
        admit, start, dep, done = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        code = np.empty(n, dtype=np.int64)
        i = 0
        while True:
            i = W.window_run(
                self.fs,
                self.ist,
                self.free,
                self.hdep,
                self.hsize,
                self.ring,
                self.wst,
                self.last,
                packets.t,
                service_s,
                size_bytes,
                x.windowed,
                x.lost,
                x.delay,
                x.extra,
                x.processing,
                x.ack_extra,
                self.ack_return_s,
                i,
                admit,
                start,
                dep,
                done,
                code,
            )
            if i == n:
                break
            self.hdep = np.concatenate([self.hdep, np.empty_like(self.hdep)])
            self.hsize = np.concatenate([self.hsize, np.empty_like(self.hsize)])
        used = (code == K.OK) | (code == K.DROP_LOSS)  # used the transmitter
        if used.all():  # the usual batch (no buffer limit): no copies
            self.rows, self.done, self.codes = None, done, code
            return Served(packets, admit, start, dep, Packets.empty(), _EMPTY_DONE, _EMPTY_ROWS)
        self.rows = np.flatnonzero(used)
        self.done = done[used]
        self.codes = code[used]
        bad = ~used
        return Served(
            packets.take(used), admit[used], start[used], dep[used], packets.take(bad), packets.t[bad], code[bad]
        )

    def take_outcome(self):
        """``(done, codes)`` of the last :meth:`run`'s transmitted messages, handed
        over once: the discipline keeps no per-batch arrays afterwards."""
        out = (self.done, self.codes)
        self.rows, self.done, self.codes = _EMPTY_ROWS, _EMPTY_DONE, _EMPTY_ROWS
        return out


_EMPTY_ROWS = np.empty(0, dtype=np.int64)
_EMPTY_DONE = np.empty(0)


class QosStats(StationStats):
    """Station statistics plus handshake packets, resends and duplicates."""

    def __init__(self, window, servers):
        super().__init__(window, servers)
        self.control_packets = 0
        self.resent_packets = 0
        self.duplicates = 0

    def add_qos(self, arrivals, control, resent, dups):
        inw = self._in_window(arrivals)
        self.control_packets += int(control[inw].sum())
        self.resent_packets += int(resent[inw].sum())
        self.duplicates += int(dups[inw].sum())

    def record(self):
        row = super().record()
        row.update(control_packets=self.control_packets, resent_packets=self.resent_packets, duplicates=self.duplicates)
        return row


class QosLinkStation(LinkStation):
    """Link with per-message QoS, an in-flight window, resends and, optionally, the consumer.

    Parameters
    ----------
    name, params, protocol, topic_bytes, streams, window, queue_messages, queue_bytes, **queue
        As for :class:`pubsim.models.stations.core.LinkStation` (the queue must be FIFO,
        drop newest or back-pressure).
    inflight_messages : int
        In-flight window of the connection (0 = none).
    retry_timeout_s : float
        Time after which an unacknowledged packet is resent, s.
    consumer : models.params.client.SubscriberParams or None
        The subscriber at the end of a downlink, served here (see module docstring).
    consumer_name : str
        Its station name (its processing-time stream is the subscriber's own).
    """

    def __init__(
        self,
        name,
        params,
        *,
        protocol,
        topic_bytes,
        streams,
        window,
        queue_messages=None,
        queue_bytes=None,
        inflight_messages=0,
        retry_timeout_s=20.0,
        consumer=None,
        consumer_name="",
        **queue,
    ):
        super().__init__(
            name,
            params,
            protocol=protocol,
            topic_bytes=topic_bytes,
            streams=streams,
            window=window,
            queue_messages=queue_messages,
            queue_bytes=queue_bytes,
            **queue,
        )
        overflow = (
            queue.get("overflow") or params.overflow
        )  # FIFO, drop_newest or backpressure (models.assembly.features)
        self.discipline = WindowDiscipline(
            inflight_messages=inflight_messages,
            capacity_messages=queue_messages,
            capacity_bytes=queue_bytes,
            overflow=overflow,
        )
        self.stats = QosStats(window, 1)
        self.visit_qos = None
        self.retry_timeout_s = float(retry_timeout_s)
        self.ack_wire_bytes = ACK_BYTES.get(protocol, 0) + params.overhead_bytes
        self.ack_serialization_s = self.ack_wire_bytes / params.bandwidth_Bps
        self.discipline.ack_return_s = params.latency_s + self.ack_serialization_s
        self.retry = [streams.draws(_UNIFORM, name, f"retry{k}") for k in range(6)]
        self.processing = (
            None if consumer is None else streams.draws(consumer.processing_s, consumer_name, "processing")
        )
        self._counts = None
        self._window_inputs = None  # from service_s, for before_run

    def wire(self, index, wiring):
        """Also the QoS of each visit (:mod:`pubsim.models.mechanisms.qos.build`)."""
        super().wire(index, wiring)
        self.visit_qos = wiring.visit_qos

    def hop_qos(self, packets):
        return self._qos(packets)

    def _qos(self, packets):
        if self.visit_qos is None:
            return np.zeros(len(packets), dtype=np.int64)
        return self.visit_qos[packets.visit]

    def wire_bytes(self, packets):
        extra = 2 * (self._qos(packets) > 0) if self.protocol == "mqtt" else 0
        return super().wire_bytes(packets) + extra

    def _unit(self, k, n):
        return 1.0 - self.retry[k].take(n)  # U(0, 1]

    def service_s(self, packets):
        n = len(packets)
        q = self._qos(packets)
        p = self.params.loss_probability
        wire = self.wire_bytes(packets)
        self._wire = (packets, wire)  # buffer_bytes of the same packets comes next (Station._serve)
        jitter = self.jitter.take(n)
        loss_u = self.loss.take(n)
        f1, l1, d1 = exchange_draws(self._unit(0, n), self._unit(1, n), lambda k: self._unit(4, k), p)
        f2, l2, d2 = exchange_draws(self._unit(2, n), self._unit(3, n), lambda k: self._unit(5, k), p)
        processing = self.processing.take(n) if self.processing is not None else np.zeros(n)
        service, delay, extra, ack_extra = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        windowed, lost = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)
        control, resent, dups = (np.empty(n, dtype=np.int64) for _ in range(3))
        W.acked_hop(
            q, wire, float(self.params.bandwidth_Bps), float(self.params.latency_s),
            float(self.ack_serialization_s), self.retry_timeout_s, jitter, loss_u, float(p),
            f1, l1, d1, f2, l2, d2,
            service, windowed, lost, delay, extra, ack_extra, control, resent, dups,
        )  # fmt: skip
        self._window_inputs = W.WindowInputs(
            windowed=windowed, lost=lost, delay=delay, extra=extra, processing=processing, ack_extra=ack_extra
        )
        self._counts = (control, resent, dups)
        return service

    def before_run(self, packets, service_s, size_bytes):
        """The window's per-message inputs, drawn with the service times by :meth:`service_s`."""
        self.discipline.set_inputs(self._window_inputs)
        self._window_inputs = None

    def after_service(self, served):
        d = self.discipline
        control, resent, dups = self._counts if d.rows is None else (c[d.rows] for c in self._counts)
        self.stats.add_qos(served.packets.t, control, resent, dups)
        done, codes = d.take_outcome()
        self._counts = None  # per-batch arrays: not kept until the next batch
        return done, codes

    @property
    def duplicates(self):
        return self.stats.duplicates
