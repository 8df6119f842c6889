"""Traffic accounting: client traffic vs inter-broker traffic, data vs control.

One tidy row per (scope, element, traffic, plane, direction):

``scope``
    ``node`` (a broker+node pair) or ``edge`` (a directed tree edge ``a->b``).
``traffic``
    ``client`` (between a node and its clients) or ``inter_broker``.
``plane``
    ``data`` (PUBLISH copies) or ``control`` (SUBSCRIBE, inter-subscriptions,
    per-hop QoS acknowledgements).
``direction``
    ``in`` / ``out`` for nodes, ``""`` for edges (an edge row counts the
    packets travelling from ``a`` to ``b``).
``messages``
    Data counts are the copies handed to the links in the measurement window
    (link station arrivals); per-hop acks follow from them and the sender's
    hop QoS (QoS 1: PUBACK back; QoS 2: PUBREC and PUBCOMP back, PUBREL
    forward). Subscription control messages (``source`` ``setup``) are those
    of the control plane when every subscriber subscribed once, before the
    run: they are not per window.
"""

from __future__ import annotations

import pandas as pd

from .control import Kind

__all__ = ["traffic_table", "COLUMNS"]

COLUMNS = ["scope", "element", "traffic", "plane", "direction", "messages", "source"]
_SETUP_KINDS = (Kind.SUBSCRIBE.value, Kind.INTER_SUBSCRIBE.value, Kind.INTER_UNSUBSCRIBE.value, Kind.UNSUBSCRIBE.value)


def _link_counts(network):
    """{(a, b): arrivals} of every link station ``link:a->b``."""
    out = {}
    for st in network.stations:
        if st.role != "link" or not st.name.startswith("link:"):
            continue
        a, sep, b = st.name[5:].partition("->")
        if sep:
            out[(a, b)] = st.stats.arrivals
    return out


def _ack_counts(copies, qos_ab, qos_ba):
    """Ack packets travelling a->b, given copies a->b (qos_ab) and b->a (qos_ba)."""
    a_to_b, b_to_a = copies
    forward = a_to_b if qos_ab == 2 else 0  # PUBREL
    back = b_to_a * {0: 0, 1: 1, 2: 2}[qos_ba]  # PUBACK / PUBREC + PUBCOMP
    return forward + back


def traffic_table(network) -> pd.DataFrame:
    """Tidy traffic table of a simulated network (see module docstring)."""
    cp = network.control
    nodes = {str(x): x for x in cp.nodes}
    links = _link_counts(network)
    setup = {}
    for f in cp.log:
        if f.kind in _SETUP_KINDS:
            setup[(f.src, f.dst)] = setup.get((f.src, f.dst), 0) + 1
    rows = []
    edge = {}
    for (a, b), n in links.items():
        if a in nodes and b in nodes:
            qos_ab = cp.hop_qos.get((nodes[a], nodes[b]), 0)
            qos_ba = cp.hop_qos.get((nodes[b], nodes[a]), 0)
            acks = _ack_counts((n, links.get((b, a), 0)), qos_ab, qos_ba)
            edge[(a, b)] = (n, acks, setup.get((a, b), 0))
            name = f"{a}->{b}"
            rows += [
                ("edge", name, "inter_broker", "data", "", n, "simulated"),
                ("edge", name, "inter_broker", "control", "", acks, "simulated"),
                ("edge", name, "inter_broker", "control", "", setup.get((a, b), 0), "setup"),
            ]
    for x in nodes:
        rows += _node_rows(x, nodes, links, edge, setup)
    return pd.DataFrame(rows, columns=COLUMNS)


def _node_rows(x, nodes, links, edge, setup):
    up = sum(n for (a, b), n in links.items() if b == x and a not in nodes)
    down = sum(n for (a, b), n in links.items() if a == x and b not in nodes)
    subs = sum(n for (a, b), n in setup.items() if b == x and a not in nodes)
    rows = [
        ("node", x, "client", "data", "in", up, "simulated"),
        ("node", x, "client", "data", "out", down, "simulated"),
        ("node", x, "client", "control", "in", subs, "setup"),
    ]
    for direction, mine in (("in", lambda a, b: b == x), ("out", lambda a, b: a == x)):
        sel = [v for (a, b), v in edge.items() if mine(a, b)]
        rows += [
            ("node", x, "inter_broker", "data", direction, sum(v[0] for v in sel), "simulated"),
            ("node", x, "inter_broker", "control", direction, sum(v[1] for v in sel), "simulated"),
            ("node", x, "inter_broker", "control", direction, sum(v[2] for v in sel), "setup"),
        ]
    return rows
