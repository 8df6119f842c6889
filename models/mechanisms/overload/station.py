"""The broker station of a broker whose publishers are flow-controlled."""

from __future__ import annotations

import dataclasses

import numpy as np

from ....sim import kernels as K
from ....sim.disciplines import Overflow
from ....sim.packets import Packets
from ....sim.station import StationOutput
from ...stations.core import BrokerStation, _background_stretch, _quota, make_discipline

__all__ = ["FlowControlBrokerStation"]


class FlowControlBrokerStation(BrokerStation):
    """A :class:`BrokerStation` behind its publishers' bounded socket buffers (``params.overload``).

    One FIFO worker (CPU quota as the plain broker's) whose station holds at
    most ``connections x socket_buffer_bytes`` (payload plus
    ``message_overhead_bytes`` per message); a message that does not fit is
    held by its sender until departures make room (``Overflow.BACKPRESSURE``).
    With ``receive_window_bytes`` and a flow-control cost set, a message
    admitted while the station holds more than ``connections x
    receive_window_bytes`` costs the worker that much more CPU.
    A message from a publisher (an ingress visit) held so is *sent* when
    admitted: its arrival and publish times move to its admission, so the
    station counts it as ingress then and its latency starts there, as the
    harness's publisher stamps a message when it sends it.

    Parameters
    ----------
    name : str
    params : models.params.broker.BrokerParams
        With ``overload`` set.
    connections : int
        Publisher connections to this broker (at least one buffer is kept).
    filters : int
    streams : sim.rng.StreamFactory
    window : (float, float)
    """

    def __init__(self, name, params, *, connections, filters, streams, window):
        super().__init__(name, params, filters=filters, streams=streams, window=window)
        ov = params.overload
        self.connections = int(connections)
        self.overhead_bytes = float(ov.message_overhead_bytes)
        self.discipline = make_discipline(
            servers=1,
            capacity_messages=None,
            capacity_bytes=ov.buffer_bytes(connections),
            overflow=Overflow.BACKPRESSURE,
            idle_extra_s=params.idle_wakeup_cost_s * _background_stretch(params),
            idle_exit=None if params.idle_exit is None else params.idle_exit.curve,
            sleep_entry_s=params.sleep_entry_s,
            **_quota(params),
        )
        if ov.flow_control:
            self.discipline.flow_control(
                window_bytes=ov.window_bytes(connections),
                fixed_s=ov.flow_control_cost_s,
                per_byte_s=ov.flow_control_cost_s_per_byte,
            )

    def buffer_bytes(self, packets):
        """Bytes a message takes in its connection's socket buffers: payload plus overhead."""
        return packets.size.astype(np.float64) + self.overhead_bytes

    def _serve(self, packets: Packets, horizon: float) -> StationOutput:
        disc = self.discipline
        service = self.service_s(packets)
        size = self.buffer_bytes(packets)
        self.before_run(packets, service, size)
        served = disc.run(packets, service, size, horizon)
        served = dataclasses.replace(served, packets=self._sent(served))
        kept, lost = served.packets, served.dropped
        arrivals = np.concatenate([kept.t, lost.t])
        ingress = self.plan.ingress[np.concatenate([kept.visit, lost.visit])]
        self.stats.add(arrivals, ingress, served, served.drop_t, served.drop_code)
        arrive, code = self.after_service(served)
        if not (code == K.OK).all():  # a broker loses nothing after service
            raise RuntimeError(f"{self.name}: unexpected loss after service")
        return StationOutput(kept.with_time(arrive), lost, served.drop_t, served.drop_code)

    def _sent(self, served) -> Packets:
        """Served packets re-timed: a publisher's message held by back-pressure is sent when admitted."""
        p = served.packets
        held = self.plan.ingress[p.visit].astype(bool) & (served.admit > p.t)
        if not held.any():
            return p
        t = np.where(held, served.admit, p.t)
        return Packets(t, p.msg, p.visit, p.size, p.pub_t + (t - p.t))
