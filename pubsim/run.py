"""Run one replication of a topology and summarise it.

>>> result = simulate(graph, duration_s=10, warmup_s=1, seed=7)   # doctest: +SKIP
>>> result.summary()            # one dict of headline figures
>>> result.deliveries()         # one row per delivered copy (record="full")
>>> result.stations()           # utilization and queue length per station
>>> result.accuracy()           # per broker: its model's held-out error band, extrapolations
>>> result.hosts()              # CPU % per host and process, card utilization (with hosts)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from . import progress as P
from .bands import COLUMNS as ACCURACY_COLUMNS
from .bands import accuracy_table, summary_fields
from .models.assembly.build import build_network
from .models.mechanisms.hosts.monitor import host_rows
from .models.mechanisms.ildm.traffic import traffic_table
from .sim.drivers import BatchDriver, ReferenceDriver
from .sim.errors import ConfigError
from .sim.records import RecordSink, StreamSink

__all__ = ["simulate", "RunResult", "DRIVERS", "RECORDS"]

DRIVERS = {"batch": BatchDriver, "reference": ReferenceDriver}
RECORDS = {"full": RecordSink, "stream": StreamSink}


@dataclass
class RunResult:
    """What a run produced: the network, the sink and the run settings (and the topology run)."""

    network: object
    sink: object
    driver: object
    duration_s: float
    window: tuple
    topology: object = None  # the graph simulated (for accuracy() and hosts())

    @cached_property
    def _accuracy(self) -> pd.DataFrame:
        if self.topology is None:
            return pd.DataFrame(columns=list(ACCURACY_COLUMNS))
        return accuracy_table(self.topology)

    def accuracy(self) -> pd.DataFrame:
        """Per broker: the held-out error band of its model and the parameters it extrapolates.

        One row per broker (:func:`pubsim.bands.accuracy_table`):
        ``validation`` (``held-out``, ``evidence fit``, ``none``...), the
        signed held-out errors ``(simulated - measured) / measured`` of the
        saturation limit, p50 and p99 latency of its calibrated profile
        (``saturation_error_low_pct`` .. ``p99_error_high_pct``, %; NaN: no
        validation), ``band`` (one line) and, when this run leaves the
        range of configurations the profile was fitted on, ``extrapolated``
        and ``extrapolation`` (parameter, value, fitted range). Model error,
        not the run's sampling error: replications do not shrink it.
        """
        return self._accuracy.copy()

    def deliveries(self) -> pd.DataFrame:
        self._need_full("deliveries")
        return self.sink.deliveries()

    def drops(self) -> pd.DataFrame:
        self._need_full("drops")
        return self.sink.drops()

    def _need_full(self, what):
        if not isinstance(self.sink, RecordSink):
            raise ConfigError("record", "stream", f"record='full' to get per-message {what}")

    def stations(self) -> pd.DataFrame:
        """Per station: role, utilization, mean waiting messages, drops, over the window."""
        rows = [{"station": s.name, "role": s.role, **s.record()} for s in self.network.stations]
        return pd.DataFrame(rows)

    def traffic(self) -> pd.DataFrame:
        """Client vs inter-broker traffic, data vs control, per node and per tree
        edge (tidy; see :mod:`pubsim.models.mechanisms.ildm.traffic`)."""

        return traffic_table(self.network)

    def hosts(self) -> pd.DataFrame:
        """Per host and per process: CPU in cores, % of one core and % of the host;
        per host: card utilization % per direction; over the window (tidy: host,
        process, measure, value; empty without hosts). See
        :mod:`pubsim.models.mechanisms.hosts.monitor`."""
        if self.topology is None:
            return pd.DataFrame(columns=["host", "process", "measure", "value"])
        return host_rows(self.topology, self.network.stations)

    def parameters(self) -> pd.DataFrame:
        """Every component's parameters and their provenance."""
        return pd.DataFrame(self.network.parameters)

    def latency_ecdf(self) -> pd.DataFrame:
        x, f = self.sink.latency_ecdf()
        return pd.DataFrame({"latency_s": x, "fraction": f})

    def throughput_series(self) -> pd.DataFrame:
        return self.sink.throughput_series()

    def summary(self) -> dict:
        """Headline figures over the measurement window (SYSTEMS.md §4 definitions).

        ``ingress_per_s``: messages from publishers arriving at their first
        broker; ``egress_per_s``: copies delivered to subscribers;
        ``sustainability``: egress / (ingress x sp_ratio), >= 0.99 means the
        load is under the limit; ``offered_per_s``: messages published in the
        window per second; ``delivery_ratio``: egress / (offered x sp_ratio),
        the same rule against what publishers offered (under back-pressure
        ingress falls to what the broker accepts, so only this ratio shows
        the overload); latency of messages published in the window;
        ``loss_rate``: lost / owed deliveries of those messages, in total and
        by cause; ``not_owed``: copies for subscribers offline with a clean
        session (excluded from what is owed); ``retained_deliveries``: retained
        copies sent on connect (not egress); ``duplicates``: extra copies of QoS 1 messages received
        after a lost acknowledgement (not egress; see :mod:`pubsim.models.mechanisms.qos.rules`).
        ``model_*``: the brokers' model error band from held-out validation and
        the fitted ranges this run leaves (:meth:`accuracy`, :func:`pubsim.bands.summary_fields`).
        """
        span = self.window[1] - self.window[0]
        counts = self.sink.counts()
        ingress = sum(s.stats.ingress_arrivals for s in self.network.stations) / span
        egress = counts["egress_deliveries"] / span
        sp = self.network.sp_ratio
        lat = self.sink.latency_stats((0.5, 0.9, 0.99))
        owed = counts["expected_deliveries"]
        lost = {k: v for k, v in counts.items() if k.startswith("lost_")}
        out = {
            "window_s": span,
            "published": counts["published"],
            "ingress_per_s": ingress,
            "egress_per_s": egress,
            "sp_ratio": sp,
            "sustainability": egress / (ingress * sp) if ingress * sp > 0 else math.nan,
            "offered_per_s": counts["published"] / span,
            "delivery_ratio": egress * span / (counts["published"] * sp) if counts["published"] * sp > 0 else math.nan,
            "latency_mean_s": lat["mean"],
            "latency_p50_s": lat[0.5],
            "latency_p90_s": lat[0.9],
            "latency_p99_s": lat[0.99],
            "latency_max_s": lat["max"],
            "expected_deliveries": owed,
            "delivered": counts["delivered"],
            "loss_rate": sum(lost.values()) / owed if owed else math.nan,
            "not_owed": counts.get("not_owed", 0),
            "retained_deliveries": counts.get("retained_deliveries", 0),
            "duplicates": sum(getattr(s.stats, "duplicates", 0) for s in self.network.stations),
        }
        for key, n in lost.items():
            out[f"loss_rate_{key[5:]}"] = n / owed if owed else math.nan
        out.update(summary_fields(self._accuracy))
        return out


def _check_window(duration_s, warmup_s, cooldown_s):
    for name, value in (("duration_s", duration_s), ("warmup_s", warmup_s), ("cooldown_s", cooldown_s)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ConfigError(name, value, "a finite number of seconds >= 0")
    if warmup_s + cooldown_s >= duration_s:
        raise ConfigError("warmup_s", warmup_s, f"warmup + cooldown < duration ({duration_s} s)")
    return (float(warmup_s), float(duration_s - cooldown_s))


def simulate(
    topology,
    *,
    duration_s,
    warmup_s=0.0,
    cooldown_s=0.0,
    seed=0,
    replication=0,
    driver="batch",
    record="full",
    drain=True,
    series_bin_s=None,
    progress=None,
    chunk_messages=250_000,
    batch_options=None,
):
    """Simulate ``duration_s`` seconds of publications on a topology.

    Parameters
    ----------
    topology : networkx.Graph
        See :mod:`pubsim.models.topology`.
    duration_s, warmup_s, cooldown_s : float
        Publications happen in [0, duration_s); statistics use
        [warmup_s, duration_s - cooldown_s).
    seed, replication : int
        Same seed and replication, same results.
    driver : {"batch", "reference"}
        Fast path or SimPy reference (for tests; slow).
    record : {"full", "stream"}
        Keep every record, or only streaming tallies (flat memory).
    drain : bool
        Let messages in flight at ``duration_s`` finish.
    series_bin_s : float, optional
        Bin of the throughput time series; default duration / 100.
    progress : bool, str or callable, optional
        True (or a label) shows a bar of simulated seconds (tqdm: a widget
        in Jupyter, text on stderr elsewhere; :mod:`pubsim.progress`); a
        callable gets ``progress(simulated_s, total_s)``. Batch driver only.
    batch_options : dict, optional
        More keyword arguments of :class:`pubsim.sim.drivers.BatchDriver`
        (how cyclic components are advanced: ``cycles``,
        ``cycle_window_messages``, ``cycle_max_sweeps``, ``cycle_dense_arrivals``).
    """

    window = _check_window(duration_s, warmup_s, cooldown_s)
    if driver not in DRIVERS:
        raise ConfigError("driver", driver, f"one of {sorted(DRIVERS)}")
    if record not in RECORDS:
        raise ConfigError("record", record, f"one of {sorted(RECORDS)}")
    net = build_network(topology, seed=seed, replication=replication, window=window)
    sink = RECORDS[record](net, series_bin_s or duration_s / 100)
    drv = (
        DRIVERS[driver](net, sink)
        if driver == "reference"
        else BatchDriver(net, sink, chunk_messages=chunk_messages, **(batch_options or {}))
    )
    with P.seconds(progress, desc="simulating", total_s=duration_s) as callback:
        drv.run(duration_s, drain=drain, progress=callback)
    return RunResult(net, sink, drv, duration_s, window, topology)
