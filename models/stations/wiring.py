"""The per-visit arrays a compiled network's model stations take in one bind step.

Mechanisms fill a :class:`Wiring` once the route plan exists (their ``wire``
hooks, :mod:`pubsim.models.assembly.registry`); then every model station
takes what it needs in :meth:`pubsim.models.stations.core.ModelStation.wire`.
Nothing else assigns collaborators onto a station after it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...sim.routing import RoutePlan

__all__ = ["Wiring"]


@dataclass
class Wiring:
    """Per-visit and per-flow arrays of one compiled network.

    Parameters
    ----------
    plan : pubsim.sim.routing.RoutePlan
        The route plan the arrays are indexed by.
    flow_topic_bytes : numpy.ndarray
        Topic length in bytes, per flow (links' framing).
    visit_qos : numpy.ndarray or None
        QoS of each visit on QoS links (:mod:`pubsim.models.mechanisms.qos`).
    ack_packets : numpy.ndarray or None
        Handshake packets of the exchange with the sender a broker handles per visit;
        None when no visit has handshake packets.
    copy_ack_packets : numpy.ndarray or None
        Handshake packets of the exchanges with the copies' receivers, per visit
        (set together with ``ack_packets``).
    flow_retain : numpy.ndarray or None
        Per flow: its publisher retains (sessions' retained messages); None when nobody retains.
    copies_by_visit : dict of int -> numpy.ndarray
        Broker station index -> copies made per visit, for brokers whose copies
        hang below a disk (:mod:`pubsim.models.mechanisms.persistence`).
    durable_visit : dict of int -> numpy.ndarray
        Station index -> visits that survive a restart (restarting queues only).
    relay_load : dict of int -> dict of str -> numpy.ndarray
        ILDM relay station index -> per-visit counts (``inbound_acks``,
        ``table_entries``, ``table_matches``; :mod:`pubsim.models.mechanisms.ildm`).
    preloaded_flow : numpy.ndarray or None
        Per flow: its messages were stored before the run (``PublisherParams.preloaded``;
        :mod:`pubsim.models.mechanisms.persistence`); None when no read station needs it.
    confirm_delay_s : numpy.ndarray or None
        Per visit: NaN, or the return delay (s) of the producer confirm issued when
        a message departs this visit (:mod:`pubsim.models.mechanisms.persistence.sending`);
        None when no producer waits for confirms.
    """

    plan: RoutePlan
    flow_topic_bytes: np.ndarray
    visit_qos: np.ndarray | None = None
    ack_packets: np.ndarray | None = None
    copy_ack_packets: np.ndarray | None = None
    flow_retain: np.ndarray | None = None
    copies_by_visit: dict[int, np.ndarray] = field(default_factory=dict)
    durable_visit: dict[int, np.ndarray] = field(default_factory=dict)
    relay_load: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    preloaded_flow: np.ndarray | None = None
    confirm_delay_s: np.ndarray | None = None
