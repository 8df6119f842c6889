"""The broker station of a broker whose publishers are flow-controlled."""

from __future__ import annotations

from ....sim.disciplines import Overflow
from ...stations.buffers import SentWhenAdmitted, flow_control_kwargs
from ...stations.core import BrokerStation, _background_stretch, _quota, make_discipline

__all__ = ["FlowControlBrokerStation"]


class FlowControlBrokerStation(SentWhenAdmitted, BrokerStation):
    """A :class:`BrokerStation` behind its publishers' bounded socket buffers (``params.overload``).

    One FIFO worker (CPU quota as the plain broker's) whose station holds at
    most ``connections x socket_buffer_bytes`` (payload plus
    ``message_overhead_bytes`` per message); a message that does not fit is
    held by its sender until departures make room (``Overflow.BACKPRESSURE``).
    With ``receive_window_bytes`` and a flow-control cost set, a message
    admitted while the station holds more than ``connections x
    receive_window_bytes`` costs the worker that much more CPU.
    A message from a publisher (an ingress visit) held so is *sent* when
    admitted (:class:`~pubsim.models.stations.buffers.SentWhenAdmitted`).

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
        flow = flow_control_kwargs(ov, connections)
        if flow is not None:
            self.discipline.flow_control(**flow)
