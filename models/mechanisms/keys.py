"""Station keys: how the compiler and the mechanisms name the stations they build.

A :class:`StationKey` is a kind and the graph node names it belongs to, e.g.
``StationKey.bridge("b0", "b1")`` for the link from ``b0`` to ``b1``. The
compile context (:class:`pubsim.models.mechanisms.context.CompileContext`)
maps keys to station indices.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["StationKind", "StationKey"]


class StationKind(enum.Enum):
    """What a station models."""

    UPLINK = "up"  # publisher -> its home node
    BROKER = "broker"
    RELAY = "relay"  # ILDM interworking node in front of a broker
    BRIDGE = "bridge"  # one direction of a broker-broker link
    SOCKET = "socket"  # brokerless ZeroMQ socket
    PIPE = "pipe"  # a socket's pipe to one peer
    DOWNLINK = "down"  # home node -> subscriber (the broker's per-client queue)
    SUBSCRIBER = "sub"
    DISK = "disk"  # a broker's disk for persistent messages
    READ = "read"  # a broker's disk reads of stored messages consumed after they left memory
    ENCODE = "encode"  # a publisher's CPU encoding its messages
    DISPATCH = "dispatch"  # a broker's dispatch of one share group (shared subscriptions)
    SERVER = "server"  # a request/reply server's work between request and reply
    CARD = "card"  # one direction of a host's network card (names: host, "tx" or "rx")
    CPU = "cpu"  # a host's CPU shared by a broker and its interworking node (names: host)


@dataclass(frozen=True)
class StationKey:
    """A station's identity in a compiled network.

    Parameters
    ----------
    kind : StationKind
    names : tuple of str
        Graph nodes: one for most kinds, ``(from, to)`` for a bridge,
        ``(socket, subscriber)`` for a pipe, ``(broker, share group)`` for a dispatch.
    """

    kind: StationKind
    names: tuple

    @property
    def node(self):
        """The (first) graph node of the key."""
        return self.names[0]

    @classmethod
    def uplink(cls, publisher) -> StationKey:
        return cls(StationKind.UPLINK, (publisher,))

    @classmethod
    def broker(cls, broker) -> StationKey:
        return cls(StationKind.BROKER, (broker,))

    @classmethod
    def relay(cls, broker) -> StationKey:
        return cls(StationKind.RELAY, (broker,))

    @classmethod
    def bridge(cls, src, dst) -> StationKey:
        return cls(StationKind.BRIDGE, (src, dst))

    @classmethod
    def socket(cls, socket) -> StationKey:
        return cls(StationKind.SOCKET, (socket,))

    @classmethod
    def pipe(cls, socket, subscriber) -> StationKey:
        return cls(StationKind.PIPE, (socket, subscriber))

    @classmethod
    def downlink(cls, subscriber) -> StationKey:
        return cls(StationKind.DOWNLINK, (subscriber,))

    @classmethod
    def subscriber(cls, subscriber) -> StationKey:
        return cls(StationKind.SUBSCRIBER, (subscriber,))

    @classmethod
    def disk(cls, broker) -> StationKey:
        return cls(StationKind.DISK, (broker,))

    @classmethod
    def read(cls, broker) -> StationKey:
        return cls(StationKind.READ, (broker,))

    @classmethod
    def encode(cls, publisher) -> StationKey:
        return cls(StationKind.ENCODE, (publisher,))

    @classmethod
    def server(cls, broker) -> StationKey:
        return cls(StationKind.SERVER, (broker,))

    @classmethod
    def dispatch(cls, broker, group) -> StationKey:
        return cls(StationKind.DISPATCH, (broker, group))
