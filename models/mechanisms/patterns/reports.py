"""Pattern reports for scenario files: what push/pull, request/reply,
polling and format comparisons need beyond the headline summary.

A scenario may list ``patterns``, each a mapping with a ``kind``:

* ``push_pull``: deliveries per (pusher, puller) and their share; with
  ``ack: {ack_bytes: 4B, ack_cost: 5us}`` the ack latency
  (:mod:`pubsim.models.mechanisms.patterns.pushpull`, uncontended return path).
* ``request_reply``: per closed-loop client, window W, replies per second,
  round trip mean and p99, window slots lost (requests or replies dropped:
  no client timeout is modelled, so each closes a slot for good),
  W / (least round trip) as the bound, and the
  Mean Value Analysis throughput of all clients together where the server
  is one exponential worker and the clients are alike (NaN otherwise).
* ``polling``: ``poller`` (a publisher whose messages are the polls),
  ``sensor`` (the subscriber reading them), ``sample_interval`` and
  ``reply_delay`` (an assumption, stated in the output): lost and
  duplicated samples against the closed forms (:mod:`pubsim.models.mechanisms.patterns.polling`).
* ``by_publisher``: throughput, latency and size per publisher (e.g. text
  vs binary publishers).

:func:`report` turns one entry and a run's records into a tidy DataFrame;
the ``pubsim run`` command prints it and writes it as ``pattern-<kind>.csv``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ....sim import theory
from ....sim.distributions import Constant, Exponential
from ....sim.errors import ConfigError
from ....sim.units import parse_duration_s, parse_size_bytes
from ... import topology as T
from ...params.mapping import read_name
from ...params.patterns import AckParams
from ...protocol import framing_bytes
from .polling import (
    constant_times,
    expected_duplicate_fraction,
    expected_lost_fraction,
    poll_records,
    poll_summary,
    read_times_from_deliveries,
)
from .pushpull import ack_times

__all__ = ["parse_patterns", "report", "KINDS"]

KINDS = {
    "push_pull": {"ack"},
    "request_reply": set(),
    "by_publisher": set(),
    "polling": {"poller", "sensor", "sample_interval", "reply_delay"},
}


def _check(entry, where):
    if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str) or entry["kind"] not in KINDS:
        raise ConfigError(
            f"{where}.kind", entry.get("kind") if isinstance(entry, dict) else entry, f"one of {sorted(KINDS)}"
        )
    kind = entry["kind"]
    unknown = sorted(set(entry) - KINDS[kind] - {"kind"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", entry[unknown[0]], f"one of {sorted(KINDS[kind])} for {kind}")
    out = {"kind": kind}
    if kind == "push_pull" and entry.get("ack") is not None:
        ack = entry["ack"]
        if not isinstance(ack, dict) or set(ack) - {"ack_bytes", "ack_cost"}:
            raise ConfigError(f"{where}.ack", ack, "a mapping with ack_bytes and ack_cost")
        out["ack"] = AckParams(
            ack_bytes=parse_size_bytes(ack.get("ack_bytes", 4), f"{where}.ack.ack_bytes"),
            ack_cost_s=parse_duration_s(ack.get("ack_cost", 0), f"{where}.ack.ack_cost"),
        )
    if kind == "polling":
        for key in ("poller", "sensor", "sample_interval"):
            if key not in entry:
                raise ConfigError(f"{where}.{key}", None, "required for a polling report")
        out.update(
            poller=read_name(entry["poller"], f"{where}.poller"),
            sensor=read_name(entry["sensor"], f"{where}.sensor"),
            sample_interval_s=parse_duration_s(entry["sample_interval"], f"{where}.sample_interval"),
            reply_delay_s=parse_duration_s(entry.get("reply_delay", 0), f"{where}.reply_delay"),
        )
        if not out["sample_interval_s"] > 0:
            raise ConfigError(f"{where}.sample_interval", entry["sample_interval"], "an interval > 0")
    return out


def parse_patterns(spec, graph, path="patterns"):
    """Checked pattern entries (a tuple of dicts) for topology ``graph``."""
    if spec is None:
        return ()
    if not isinstance(spec, list):
        raise ConfigError(path, spec, "a list of pattern reports")
    out = tuple(_check(e, f"{path}[{i}]") for i, e in enumerate(spec))
    for i, e in enumerate(out):
        if e["kind"] == "polling":
            pubs = T.clients(graph, T.NodeKind.PUBLISHER)
            subs = T.clients(graph, T.NodeKind.SUBSCRIBER)
            if e["poller"] not in pubs:
                raise ConfigError(f"{path}[{i}].poller", e["poller"], f"one of the publishers {pubs[:5]}")
            if e["sensor"] not in subs:
                raise ConfigError(f"{path}[{i}].sensor", e["sensor"], f"one of the subscribers {subs[:5]}")
    return out


def _in_window(d, window):
    return d[(d["publish_time_s"] >= window[0]) & (d["publish_time_s"] < window[1])]


def _push_pull(result, graph, entry):
    d = _in_window(result.deliveries(), result.window)
    rows = d.groupby(["publisher", "subscriber"]).size().rename("delivered").reset_index()
    rows["share"] = rows["delivered"] / rows.groupby("publisher")["delivered"].transform("sum")
    if "ack" in entry and len(d):
        acked = ack_times(d, graph, entry["ack"])
        lat = acked.groupby(["publisher", "subscriber"])["ack_latency_s"]
        rows = rows.merge(lat.mean().rename("ack_latency_mean_s").reset_index(), on=["publisher", "subscriber"])
        rows = rows.merge(lat.quantile(0.99).rename("ack_latency_p99_s").reset_index(), on=["publisher", "subscriber"])
        rows["ack_note"] = "uncontended return path (assumption)"
    return rows


def _mva_bound(graph, clients):
    """MVA throughput (all clients together) when the closed network is product form
    enough to solve: one exponential server worker and nothing else at the server,
    identical clients (think time, link, constant size); transmissions on the links are
    counted as pure delays (an approximation when several requests share a link)."""

    hub = T.brokers(graph)
    if len(hub) != 1 or not clients:
        return np.nan
    b = graph.nodes[hub[0]][T.PARAMS]
    zero = Constant(value=0.0)
    if not (
        b.workers == 1
        and isinstance(b.ingress_cost_s, Exponential)
        and b.match_cost_s == zero
        and b.delivery_cost_s == zero
        and b.per_byte_cost_s == 0
        and b.filter_scan_cost_s == 0
        and b.connection_cost_s == 0
        and b.connection_wakeup_cost_s == 0
        and b.idle_wakeup_cost_s == 0
        and b.cpu_quota_cores is None
        and b.reply is None  # a server stage (reply size, processing) is a second station
    ):
        return np.nan
    delays = set()
    for p in clients:
        params = graph.nodes[p][T.PARAMS]
        if not params.size_bytes.is_constant or params.serialization is not None:
            return np.nan
        size = int(round(params.size_bytes.mean))
        topic = len(params.topics[0].encode())
        reply = [s for s in T.clients(graph, T.NodeKind.SUBSCRIBER) if s == f"{p}.reply"]
        if len(reply) != 1 or not graph.nodes[reply[0]][T.PARAMS].processing_s == zero:
            return np.nan
        z = params.think_time_s
        for node in (p, reply[0]):
            link = graph.edges[node, hub[0]][T.PARAMS]
            wire = size + int(framing_bytes(graph.graph[T.PROTOCOL], size, topic)) + link.overhead_bytes
            z += link.latency_s + link.jitter_s.mean + wire / link.bandwidth_Bps
        delays.add(round(z, 15))
    if len(delays) != 1:
        return np.nan
    n = sum(graph.nodes[p][T.PARAMS].window_requests for p in clients)
    return theory.mva([b.ingress_cost_s.mean], delays.pop(), n)["throughput_per_s"]


def _request_reply(result, graph, entry):
    d = _in_window(result.deliveries(), result.window)
    lost = result.drops()["publisher"].value_counts()  # each lost request or reply closes a window slot
    span = result.window[1] - result.window[0]
    rows = []
    for p in T.clients(graph, T.NodeKind.PUBLISHER):
        params = graph.nodes[p][T.PARAMS]
        if params.arrival != "closed_loop":
            continue
        mine = d[d["publisher"] == p]["latency_s"]
        w = params.window_requests
        rtt_min = float(mine.min()) if len(mine) else np.nan
        rows.append(
            {
                "client": p,
                "window": w,
                "window_slots_lost": int(lost.get(p, 0)),
                "replies_per_s": len(mine) / span,
                "rtt_mean_s": float(mine.mean()) if len(mine) else np.nan,
                "rtt_p99_s": float(mine.quantile(0.99)) if len(mine) else np.nan,
                "bound_window_over_min_rtt_per_s": w / (rtt_min + params.think_time_s),
            }
        )
    frame = pd.DataFrame(rows)
    if len(frame):  # theory for all clients together, where it applies (else NaN)
        frame["mva_all_clients_per_s"] = _mva_bound(graph, list(frame["client"]))
    return frame


def _polling(result, graph, entry, rng):
    poll_t, read_t = read_times_from_deliveries(result.deliveries(), entry["poller"], entry["sensor"])
    horizon = result.duration_s + 1.0
    samples = constant_times(entry["sample_interval_s"], horizon, rng)
    recs = poll_records(samples, poll_t, read_t, read_t + entry["reply_delay_s"])
    recs = recs[(recs["poll_time_s"] >= result.window[0]) & (recs["poll_time_s"] < result.window[1])]
    s = poll_summary(recs, samples)
    poll_params = graph.nodes[entry["poller"]][T.PARAMS]
    if poll_params.arrival == "constant":
        p_s = 1.0 / poll_params.rate_per_s
        s["expected_lost_fraction"] = expected_lost_fraction(p_s, entry["sample_interval_s"])
        s["expected_duplicate_fraction"] = expected_duplicate_fraction(p_s, entry["sample_interval_s"])
    s["reply_delay_note"] = "fixed reply delay (assumption); request path simulated"
    return pd.DataFrame([s])


def _by_publisher(result, graph, entry):
    d = _in_window(result.deliveries(), result.window)
    span = result.window[1] - result.window[0]
    g = d.groupby("publisher")
    return pd.DataFrame(
        {
            "delivered_per_s": g.size() / span,
            "latency_mean_s": g["latency_s"].mean(),
            "latency_p99_s": g["latency_s"].quantile(0.99),
            "size_bytes_mean": g["size_bytes"].mean(),
        }
    ).reset_index()


def report(result, graph, entry, *, seed=0, replication=0):
    """Tidy DataFrame of one pattern report over a run (``record: full`` needed)."""
    if entry["kind"] == "polling":
        return _polling(result, graph, entry, np.random.default_rng([seed, replication, 7919]))
    return {"push_pull": _push_pull, "request_reply": _request_reply, "by_publisher": _by_publisher}[entry["kind"]](
        result, graph, entry
    )
