"""What monitoring shows of hosts: CPU % per process and per host, card
utilization per direction, over the measurement window.

CPU of a process = the mean number of its servers in service over the window
(its station's busy time / window) plus, for a broker, its background load in
cores; an uncapped broker with background load has its service stretched by
``1 / (1 - background / workers)`` (:mod:`pubsim.models.params.broker`), so its
busy time is counted at ``1 - background / workers`` of a core. Under a CPU
quota a server that waits for the next period counts as busy (an upper
bound). CPU % of one core = cores x 100; of the host = cores / host cores x 100.

The processes of a shared host run on its CPU station (:mod:`.cpu`): each
process's share of its busy time is its demand of the messages starting in
the window over all of theirs (a ZeroMQ socket's includes its batches' fixed
and wake-up times; other wake-ups spread in proportion); a background
load ``B`` of ``c`` servers stretched that busy time by ``1 / (1 - B / c)``, so
the busy time counts at ``1 - B / c`` and each broker adds its own
background. A host's CPU is then at most its servers' (<= its cores, 100 %
of the host). A process alone on its host keeps its own servers (at most
its host's cores by validation).
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


def _cores_used(station, params, kind: str) -> float:
    busy = station.stats.record()["mean_in_service"]
    if kind != "broker":
        return busy
    background = params.background_cpu_fraction
    if params.cpu_quota_cores is None and background > 0:
        busy *= 1.0 - background / params.workers
    return busy + background


def _shared_cores(cpu, name: str, params, kind: str) -> float:
    """Cores process ``name`` uses of a shared host's CPU station ``cpu``."""
    busy = cpu.stats.record()["mean_in_service"] * cpu.shares()[name]
    busy *= 1.0 - cpu.background_cores / cpu.stats.servers
    return busy + (params.background_cpu_fraction if kind == "broker" else 0.0)


def host_rows(g, stations) -> pd.DataFrame:
    """Tidy table (host, process, measure, value) of a run's stations on the hosts of topology ``g``.

    Measures: ``cpu_cores``, ``cpu_pct_of_core``, ``cpu_pct_of_host`` per process and for the
    host (process ``"host"``); ``card_tx_pct`` and ``card_rx_pct`` per host with a card station.
    """
    table = T.hosts(g)
    rows: list[tuple] = []
    total = dict.fromkeys(table, 0.0)
    nodes = {str(n): n for n in g}
    shared = {name: cpu for cpu in stations if cpu.role == "host_cpu" for name in cpu.demand_in_window_s}
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
        if st.name in shared:  # the host's CPU station runs them all: split its busy time by demand
            cores = _shared_cores(shared[st.name], st.name, g.nodes[node][T.PARAMS], kind)
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
