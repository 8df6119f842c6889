"""Static bridges between brokers (Mosquitto style), the simpler alternative to ILDM.

A Mosquitto bridge is configured at one broker (``local``) with lines
``topic <pattern> out|in|both``: ``out`` patterns are forwarded from the
local broker to the remote one, ``in`` patterns from the remote to the local
one (mosquitto.conf(5), "Configuring Bridges"). In a topology with
``forwarding: bridge`` each broker-broker edge may carry a
:class:`BridgeParams` under the edge attribute :data:`pubsim.models.topology.BRIDGE`;
a copy crosses the edge only if its topic matches a pattern of that
direction. An edge without one forwards nothing. On a tree a copy never
returns to where it came from, so there are no loops.

A bridge is a client of both brokers (Mosquitto runs it inside the broker
where it is configured, ``src/bridge.c``): for ``out`` topics it subscribes
locally (``sub__add`` with the topic line's QoS) and publishes to the remote
broker; for ``in`` topics it sends the remote broker a SUBSCRIBE with that
QoS and publishes what it gets locally. Either way a forwarded copy costs
the broker it leaves one delivery and the broker it enters one ingress (the
core broker hop: the copy is a child of the sending broker's visit, and the
receiving broker's visit pays its ingress, matching and deliveries), and at
QoS > 0 both ends handle the hop's handshake packets
(:func:`pubsim.models.mechanisms.qos.build.broker_handshakes`, at
``BrokerParams.ack_cost_s`` each). The hop's QoS (:func:`hop_qos`) is
``qos`` below, any direction, on any broker-broker edge (with ``flood`` and
``subscription`` forwarding the topic patterns are not used, the QoS is).

Provenance of the QoS rule: mosquitto.conf(5), ``topic pattern [[[ out | in
| both ] qos-level] ...]``, "the QoS level defines the publish/subscribe QoS
level used for this topic and defaults to 0"; a subscriber gets
``min(publish QoS, subscription QoS)`` (``src/subs.c``, without
``upgrade_outgoing_qos``), so an MQTT bridge hop runs at ``min(publish,
qos)`` (eclipse/mosquitto at fb9b115, ``src/bridge.c`` lines 188-205 and
534-549). A RabbitMQ federation link (or shovel) consumes from the upstream
broker and publishes to the downstream one; its ``ack-mode`` (``on-confirm``
by default: the upstream delivery is acked after the downstream broker
confirms; ``no-ack``: no acknowledgements; rabbitmq.com/docs/federation-reference)
is its own, whatever the publisher's confirms: with ``protocol: amqp`` a
bridge hop runs at ``qos`` (1 = ``on-confirm``, 0 = ``no-ack``; AMQP has no
QoS 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["BridgeParams", "hop_qos", "QOS_LEVELS"]

#: MQTT QoS levels a bridge hop may carry.
QOS_LEVELS = (0, 1, 2)


@dataclass(frozen=True, kw_only=True)
class BridgeParams:
    """Topic patterns of one bridge.

    Parameters
    ----------
    local : str
        The broker where the bridge is configured (one end of the edge).
    topics_out : tuple of str
        Filters forwarded from ``local`` to the other end.
    topics_in : tuple of str
        Filters forwarded from the other end to ``local``.
    qos : int or None
        QoS of the bridge's hops, both directions (Mosquitto's topic
        ``qos-level``; the federation link's ack mode under AMQP). None: the
        publication's QoS (what a Mosquitto topic line with qos-level 2
        gives; pubsim's behaviour before this field existed). Mosquitto's
        own default, when a topic line gives none, is 0.
    provenance : Provenance
    """

    local: str = field(default="", metadata={"unit": "text"})
    topics_out: tuple = field(default=(), metadata={"unit": "strings"})
    topics_in: tuple = field(default=(), metadata={"unit": "strings"})
    qos: int | None = field(default=None, metadata={"unit": "optional_count"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.local:
            raise ConfigError("local", self.local, "the name of the broker where the bridge is configured")
        if self.qos is not None and self.qos not in QOS_LEVELS:
            raise ConfigError("qos", self.qos, "a QoS level 0, 1 or 2, or unset (the publication's QoS)")

    def patterns(self, a: Any, b: Any) -> dict[tuple[Any, Any], tuple]:
        """``{(a, b): filters, (b, a): filters}`` for the edge (a, b)."""
        if self.local not in (str(a), str(b)):
            raise ConfigError("bridge.local", self.local, f"one end of the edge ({a!r}, {b!r})")
        remote = b if str(a) == self.local else a
        local = a if remote is b else b
        return {(local, remote): self.topics_out, (remote, local): self.topics_in}


def hop_qos(publish_qos: int, *, protocol: str = "mqtt", bridge: BridgeParams | None = None, relay: Any = None) -> int:
    """QoS of one copy on a broker-broker hop.

    Parameters
    ----------
    publish_qos : int
        The publication's QoS (0, 1, 2).
    protocol : str
        The topology's protocol (``mqtt``, ``amqp``, ...).
    bridge : BridgeParams or None
        The edge's bridge, if any.
    relay : RelayParams or None
        The sending broker's ILDM node, if any: the node sends at its
        ``hop_qos`` (ILDM's per-hop QoS, SYSTEMS.md §3), whatever the
        publication's.

    Returns
    -------
    int
        ``relay.hop_qos`` with a relay; else ``publish_qos`` without a bridge
        QoS; else ``bridge.qos`` under AMQP (the federation link's own ack
        mode) and ``min(publish_qos, bridge.qos)`` otherwise (MQTT: the
        bridge is a subscriber at ``qos``).
    """
    if relay is not None:
        return int(relay.hop_qos)
    if bridge is None or bridge.qos is None:
        return int(publish_qos)
    return int(bridge.qos) if protocol == "amqp" else min(int(publish_qos), int(bridge.qos))
