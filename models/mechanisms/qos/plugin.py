"""QoS as a registry entry (see :mod:`.build` for the rules).

* uplinks, bridges and downlinks of a QoS > 0 connection are
  :class:`~pubsim.models.mechanisms.qos.link.QosLinkStation` (in-flight
  window, resends; a QoS > 0 subscriber is served inside its downlink);
* every visit's QoS goes to the QoS links, and the handshake packets a
  broker handles per visit to the brokers, through the wiring.
"""

from __future__ import annotations

from ...stations.wiring import Wiring
from ..context import CompileContext
from ..keys import StationKey, StationKind
from .build import broker_handshakes, consumer_folded, qos_link_options, visit_qos
from .link import QosLinkStation

__all__ = ["QOS", "Qos"]


class Qos:
    """Per-hop QoS."""

    name = "qos"

    def link_options(self, ctx: CompileContext, key: StationKey) -> dict | None:
        """A QosLinkStation, its window, resend timeout and consumer, for QoS > 0 connections."""
        options = qos_link_options(ctx.graph, key)
        return None if options is None else {"station_class": QosLinkStation, **options}

    def folds_subscriber(self, ctx: CompileContext, subscriber) -> bool:
        """A QoS > 0 subscriber acknowledges after its work: it is served inside its downlink."""
        return consumer_folded(ctx.graph, subscriber)

    def wire(self, ctx: CompileContext, wiring: Wiring) -> None:
        """QoS of every visit; handshake packets per broker visit (None if there are none)."""
        plan = wiring.plan
        wiring.visit_qos = visit_qos(ctx.graph, plan, ctx.keys, ctx.publishers, ctx.subscribers)
        brokers = {i for k, i in ctx.index.items() if k.kind is StationKind.BROKER}
        sender, copies = broker_handshakes(plan, wiring.visit_qos, brokers)
        if sender.any() or copies.any():
            wiring.ack_packets, wiring.copy_ack_packets = sender, copies


QOS = Qos()
