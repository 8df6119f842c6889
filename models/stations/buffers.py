"""A broker station behind its publishers' bounded socket buffers (``BrokerParams.overload``).

What a flow-controlled broker station does whatever its worker's discipline
(the FIFO worker of :mod:`pubsim.models.mechanisms.overload`, the event-loop
passes of :mod:`pubsim.models.mechanisms.iothreads`): a message occupies
its payload plus ``message_overhead_bytes`` of the buffers, and one that a
publisher had to hold back (its blocking ``send``) is *sent* when the broker
admits it: its arrival and publish times move there, so the station counts
it as ingress then and its latency starts there, as the harness's publisher
stamps a message when its ``send`` returns.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...sim import kernels as K
from ...sim.packets import Packets
from ...sim.station import StationOutput

__all__ = ["SentWhenAdmitted", "flow_control_kwargs"]


def flow_control_kwargs(overload, connections):
    """``Discipline.flow_control`` arguments of ``overload`` (an OverloadParams) for
    ``connections`` publisher connections, or None when it sets no flow-control cost."""
    if not overload.flow_control:
        return None
    return {
        "window_bytes": overload.window_bytes(connections),
        "fixed_s": overload.flow_control_cost_s,
        "per_byte_s": overload.flow_control_cost_s_per_byte,
    }


class SentWhenAdmitted:
    """Mixin of a broker station whose discipline bounds its bytes with back-pressure.

    The station sets ``overhead_bytes`` (bytes per message beyond its payload)."""

    overhead_bytes = 0.0

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
