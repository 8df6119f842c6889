"""Wiring QoS into a compiled network (called from :mod:`pubsim.models.assembly.build`).

* :func:`qos_link_options`: whether a link needs a
  :class:`pubsim.models.mechanisms.qos.link.QosLinkStation` and with which window, resend
  timeout and consumer;
* :func:`visit_qos`: the QoS of every link visit of the route plan
  (publisher's QoS on uplinks, the hop QoS on bridges
  (:func:`pubsim.models.params.bridge.hop_qos`), ``min(publish, granted)`` on
  MQTT downlinks, the consumer's ack mode on AMQP downlinks);
* :func:`broker_handshakes`: handshake packets a broker handles per visit
  (those of the hop that brought the message plus those of each copy it
  sends), charged at ``BrokerParams.ack_cost_s`` each (those with the copies'
  receivers at ``copy_ack_s``).
"""

from __future__ import annotations

import numpy as np

from ... import topology as T
from ...params.bridge import hop_qos
from ..keys import StationKind
from .rules import check_protocol_qos, handshake_packets

__all__ = ["qos_link_options", "visit_qos", "broker_handshakes", "consumer_folded"]


def _p(g, n):
    return g.nodes[n][T.PARAMS]


def consumer_folded(g, s):
    """True if subscriber ``s`` is served inside its downlink (QoS > 0: it acknowledges after work)."""
    return _p(g, s).qos > 0


def qos_link_options(g, key):
    """Keyword arguments of a QosLinkStation for the link ``key``, or None for a plain link.

    ``key``: a :class:`~pubsim.models.mechanisms.keys.StationKey` of an uplink,
    a bridge or a downlink (other links, e.g. brokerless pipes, have no
    acknowledgements).
    """
    proto = g.graph[T.PROTOCOL]
    kind = key.kind
    if kind is StationKind.UPLINK:
        pp = _p(g, key.node)
        check_protocol_qos(proto, pp.qos, f"{key.node}.qos")
        if pp.qos == 0:
            return None
        return {"inflight_messages": pp.inflight_messages, "retry_timeout_s": pp.retry_timeout_s}
    if kind is StationKind.BRIDGE:
        x, y = key.names
        bridge = g.edges[x, y].get(T.BRIDGE)
        if bridge is not None and bridge.qos is not None:
            check_protocol_qos(proto, bridge.qos, f"edge ({x!r}, {y!r}).{T.BRIDGE}.qos")
        publish = {_p(g, p).qos for p in T.clients(g, T.NodeKind.PUBLISHER)} | {0}
        if max(_bridge_qos(g, x, y, q) for q in publish) == 0:
            return None
        bp = _p(g, key.node)
        return {"inflight_messages": bp.max_inflight_messages, "retry_timeout_s": bp.retry_timeout_s}
    if kind is not StationKind.DOWNLINK:
        return None
    s = key.node
    sp = _p(g, s)
    check_protocol_qos(proto, sp.qos, f"{s}.qos")
    if sp.qos == 0:
        return None
    bp = _p(g, T.home_broker(g, s))
    window = bp.max_inflight_messages if sp.inflight_messages is None else sp.inflight_messages
    return {
        "inflight_messages": window,
        "retry_timeout_s": bp.retry_timeout_s,
        "consumer": sp,
        "consumer_name": f"subscriber:{s}",
    }


_LINKS = (StationKind.UPLINK, StationKind.BRIDGE, StationKind.DOWNLINK)


def _bridge_qos(g, x, y, publish_qos):
    """QoS of a copy of a ``publish_qos`` publication on the hop ``x -> y`` between brokers."""
    return hop_qos(
        publish_qos, protocol=g.graph[T.PROTOCOL], bridge=g.edges[x, y].get(T.BRIDGE), relay=g.nodes[x].get(T.RELAY)
    )


def visit_qos(g, plan, station_keys, pubs, subs):
    """QoS per visit (0 off links), from the station key of each visit's station."""
    qos = np.zeros(plan.n_visits, dtype=np.int64)
    pub_qos = np.array([_p(g, p).qos for p in pubs], dtype=np.int64)
    amqp = g.graph[T.PROTOCOL] == "amqp"  # consumer acks do not depend on publisher confirms
    for v in range(plan.n_visits):
        key = station_keys[int(plan.station[v])]
        if key.kind not in _LINKS:
            continue
        q = pub_qos[plan.flow_publisher[plan.flow[v]]]
        if key.kind is StationKind.DOWNLINK:
            q = _p(g, key.node).qos if amqp else min(q, _p(g, key.node).qos)
        elif key.kind is StationKind.BRIDGE:
            q = _bridge_qos(g, *key.names, q)
        qos[v] = q
    return qos


def _children(plan, v):
    return plan.child_idx[plan.child_ptr[v] : plan.child_ptr[v + 1]]


def _copy_visits(plan, v):
    """Visits of the copies a broker visit sends: a share group's choice visit stands
    for its first member's copy (the members of a group share their QoS)."""
    kids = _children(plan, v)
    if not plan.choice[kids].any():
        return kids
    return np.array([_children(plan, _children(plan, k)[0])[0] if plan.choice[k] else k for k in kids], np.int64)


def broker_handshakes(plan, qos, broker_stations):
    """Handshake packets per visit at broker stations (0 elsewhere): ``(sender, copies)``,
    those of the exchange with the sender (publisher or upstream hop) and those of the
    exchanges with the copies' receivers (``BrokerParams.ack_cost_s`` and ``copy_ack_s``)."""
    per_hop = handshake_packets(qos)
    sender = np.zeros(plan.n_visits, dtype=np.int64)
    copies = np.zeros(plan.n_visits, dtype=np.int64)
    for v in range(plan.n_visits):
        if int(plan.station[v]) not in broker_stations:
            continue
        parent = plan.parent[v]
        sender[v] = per_hop[parent] if parent >= 0 else 0
        copies[v] = int(per_hop[_copy_visits(plan, v)].sum())
    return sender, copies
