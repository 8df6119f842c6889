"""What monitoring shows of hosts: CPU % per process and per host, card
utilization per direction, over the measurement window.

CPU of a process = the mean number of its servers in service over the window
(its station's busy time / window) plus, for a broker, its background load in
cores; an uncapped broker with background load has its service stretched by
``1 / (1 - background / workers)`` (:mod:`pubsim.models.params.broker`), so its
busy time is counted at ``1 - background / workers`` of a core. Under a CPU
quota a server that waits for the next period counts as busy (an upper
bound). CPU % of one core = cores x 100; of the host = cores / host cores x 100.

A broker and its ILDM node on one host run on the host's CPU station
(:mod:`.cpu`); the node's share of its busy time is the node's demand in the
window, the rest (wake-ups included) the broker's. Other processes of a host keep their own servers (CPU contention
between them is not modelled yet), so a host's CPU % can exceed 100.
"""

from __future__ import annotations

import pandas as pd

from ... import topology as T

__all__ = ["host_rows", "PROCESS_PREFIXES"]

#: Station name prefixes of processes that use a CPU (the node name follows the prefix).
PROCESS_PREFIXES = ("broker:", "relay:", "socket:", "subscriber:", "encode:")
_COLUMNS = ["host", "process", "measure", "value"]


def _node(name: str):
    for prefix in PROCESS_PREFIXES:
        if name.startswith(prefix):
            return prefix[:-1], name[len(prefix) :]
    return None


def _cores_used(station, params, kind: str, share: float = 1.0) -> float:
    busy = station.stats.record()["mean_in_service"] * share
    if kind != "broker":
        return busy
    background = params.background_cpu_fraction
    if params.cpu_quota_cores is None and background > 0:
        busy *= 1.0 - background / params.workers
    return busy + background


def host_rows(g, stations) -> pd.DataFrame:
    """Tidy table (host, process, measure, value) of a run's stations on the hosts of topology ``g``.

    Measures: ``cpu_cores``, ``cpu_pct_of_core``, ``cpu_pct_of_host`` per process and for the
    host (process ``"host"``); ``card_tx_pct`` and ``card_rx_pct`` per host with a card station.
    """
    table = T.hosts(g)
    rows: list[tuple] = []
    total = dict.fromkeys(table, 0.0)
    nodes = {str(n): n for n in g}
    shared = {s.relay.name: s for s in stations if s.role == "host_cpu"}
    shared |= {s.broker.name: s for s in shared.values()}
    for st in stations:
        if st.name.startswith("card:"):
            _, host, direction = st.name.split(":")
            rows.append((host, "card", f"card_{direction}_pct", 100.0 * st.stats.record()["utilization"]))
            continue
        found = _node(st.name)
        if found is None or found[1] not in nodes:
            continue
        kind, name = found
        node = nodes[name]
        host = T.host_of(g, node)
        if host is None:
            continue
        if st.name in shared:  # the host's CPU station runs both: split its busy time by demand
            cpu = shared[st.name]
            share = cpu.relay_share if kind == "relay" else 1.0 - cpu.relay_share
            cores = _cores_used(cpu, g.nodes[node][T.PARAMS], kind, share)
        else:
            cores = _cores_used(st, g.nodes[node][T.PARAMS], kind)
        total[host] += cores
        rows.extend(_cpu(host, st.name, cores, table[host].cores))
    for host, cores in total.items():
        rows.extend(_cpu(host, "host", cores, table[host].cores))
    return pd.DataFrame(rows, columns=_COLUMNS)


def _cpu(host, process, cores, host_cores):
    return [
        (host, process, "cpu_cores", cores),
        (host, process, "cpu_pct_of_core", 100.0 * cores),
        (host, process, "cpu_pct_of_host", 100.0 * cores / host_cores),
    ]
