"""The ordered registry of mechanisms the compiler runs.

Registry order is station order (hence the order of the records): each
publisher's uplink; each broker; relays; both directions of each bridge;
sockets and their pipes; downlinks and subscribers; disks; encode stations;
request/reply server stations; share-group dispatch stations; host network cards
last. Hooks other than ``entry_hop`` are called in this order;
``entry_hop`` is asked last-to-first (:meth:`CompileContext.entry_hop`).
See :mod:`pubsim.models.mechanisms.base` for the hooks.
"""

from __future__ import annotations

from ..mechanisms.base import HOOKS, Mechanism
from ..mechanisms.brokerless import BROKERLESS
from ..mechanisms.core import BROKERS, DELIVERY
from ..mechanisms.frames import FRAMES
from ..mechanisms.hosts import HOSTS
from ..mechanisms.ildm import ILDM
from ..mechanisms.iothreads import IOTHREADS
from ..mechanisms.overload import OVERLOAD
from ..mechanisms.patterns.plugin import REQREP
from ..mechanisms.persistence import PERSISTENCE
from ..mechanisms.priority import PRIORITY
from ..mechanisms.qos import QOS
from ..mechanisms.readers import READERS
from ..mechanisms.serialization import SERIALIZATION
from ..mechanisms.sessions import SESSIONS
from ..mechanisms.shared import SHARED
from ..mechanisms.turns import TURNS

__all__ = ["MECHANISMS", "Mechanism", "HOOKS", "hooks"]

#: The mechanisms, in the order the compiler runs them.
MECHANISMS: tuple[Mechanism, ...] = (
    BROKERS,  # uplinks, brokers, subscription tables, flow routes, plain broker hops
    IOTHREADS,  # brokers with io: the same broker station, served in I/O cycles
    OVERLOAD,  # brokers with overload: the same broker station behind bounded publisher sockets
    ILDM,  # control plane, relays, bridges (both directions), forwarding
    BROKERLESS,  # ZeroMQ sockets and their pipes, socket hops
    DELIVERY,  # downlinks and subscriber stations
    PERSISTENCE,  # disks; restarting per-client queues; disk hops; copies per visit, durable visits
    SERIALIZATION,  # encode stations (last), encode hop before the uplink
    QOS,  # QoS link stations, folded consumers, visit QoS, handshake packets
    SESSIONS,  # downlink sessions, retain flags, publisher outages and Will
    PRIORITY,  # per-client queue policy, flow priorities
    FRAMES,  # YAMI4 frame channels on framing brokers' downlinks (subscriber read inside)
    REQREP,  # request/reply server stations; server hop below server-broker visits of requests
    SHARED,  # share groups: dispatch stations, one choice hop per matching group
    READERS,  # brokers with reader_wake: per-visit write times, copies that wake their readers
    TURNS,  # brokers with copies_in_turn: each copy leaves as it is written (route plan's child leads)
    HOSTS,  # speed, loopback within a host; shared CPUs and network cards (last); card and CPU hops
)


def hooks(name: str, mechanisms: tuple = MECHANISMS) -> list:
    """Bound hooks called ``name`` of the registry entries that have one, in registry order."""
    if name not in HOOKS:
        raise ValueError(f"unknown hook {name!r}")
    return [getattr(m, name) for m in mechanisms if hasattr(m, name)]
