"""Where results go: full per-message records, or flat-memory streaming tallies.

Both sinks take the same calls from the drivers (``add_published``,
``add_delivered``, ``add_dropped``) and answer the same questions
(:meth:`latency_quantiles_s`, :meth:`counts`, :meth:`throughput_series`), so
the summary does not care which one ran. :class:`RecordSink` keeps every
delivery and drop and turns them into pandas DataFrames.
:class:`StreamSink` keeps counters, a log-binned latency histogram (relative
resolution about 1.2 %) and per-bin throughput counts, so its memory does not
grow with the number of messages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numba import njit

from . import kernels as K
from .network import Network
from .packets import Packets

__all__ = ["RecordSink", "StreamSink", "LatencyHistogram"]


class _Tally:
    """Counters shared by both sinks: what was owed and what was lost, by cause."""

    def __init__(self, network: Network, series_bin_s: float) -> None:
        self.net = network
        self.w0, self.w1 = network.window
        self.series_bin_s = float(series_bin_s)
        self.published = 0
        self.expected = 0
        self.delivered = 0
        self.delivered_egress = 0
        self.lost: dict[int, int] = {}
        self.retained_deliveries = 0
        self._series = {"published": np.zeros(0, np.int64), "delivered": np.zeros(0, np.int64)}

    def _in(self, t: np.ndarray) -> np.ndarray:
        return (t >= self.w0) & (t < self.w1)

    def _bin(self, name: str, t: np.ndarray, top: int | None = None) -> None:
        """Count ``t`` into the series' bins of ``series_bin_s`` (times before 0
        left out); ``top``: their last bin if known (:func:`_last_bin`)."""
        if top is None:
            top = _last_bin(t, self.series_bin_s)
        if top < 0:
            return
        old = self._series[name]
        if top >= len(old):
            old = np.concatenate([old, np.zeros(top + 1 - len(old), np.int64)])
            self._series[name] = old
        _add_bins(t, self.series_bin_s, old)

    def add_published(self, packets: Packets) -> None:
        """Count published messages (packets at their route roots)."""
        inw = self._in(packets.pub_t)
        self.published += int(inw.sum())
        self.expected += int(self.net.plan.leaves[packets.visit][inw].sum())
        self._bin("published", packets.pub_t)
        self._published_hook(packets)

    def add_delivered(self, packets: Packets) -> None:
        """Count (and, by the sink, keep) delivered copies."""
        if _any_negative(packets.msg):  # retained copies sent on connect (models.mechanisms.sessions): counted apart
            retained = packets.msg < 0
            self.retained_deliveries += int(self._in(packets.t[retained]).sum())
            self._retained_hook(packets.take(retained))
            packets = packets.take(~retained)
        n_published_in, n_delivered_in, top = _delivered_counts(
            packets.t, packets.pub_t, self.w0, self.w1, self.series_bin_s
        )
        self.delivered += n_published_in
        self.delivered_egress += n_delivered_in
        self._bin("delivered", packets.t, top)
        self._delivered_hook(packets)

    def add_dropped(self, packets: Packets, drop_t: np.ndarray, station: int, code: np.ndarray) -> None:
        """Count the deliveries lost with dropped copies at ``station``, by cause ``code``."""
        own = packets.msg >= 0  # a retained copy lost on connect is not an owed delivery
        if not own.all():
            packets, drop_t, code = packets.take(own), np.asarray(drop_t)[own], np.asarray(code)[own]
        inw = self._in(packets.pub_t)
        lost = self.net.plan.leaves[packets.visit]
        for c in np.unique(code[inw]).tolist():
            self.lost[c] = self.lost.get(c, 0) + int(lost[inw & (code == c)].sum())
        self._dropped_hook(packets, drop_t, station, code)

    def _published_hook(self, packets: Packets) -> None:
        pass

    def _delivered_hook(self, packets: Packets) -> None:
        pass

    def _retained_hook(self, packets: Packets) -> None:
        pass

    def _dropped_hook(self, packets: Packets, drop_t: np.ndarray, station: int, code: np.ndarray) -> None:
        pass

    def counts(self) -> dict[str, int]:
        """Messages published, deliveries owed / made / lost by cause, in the window.

        Copies not owed (a clean-session subscriber was offline) are neither
        owed nor lost: published x fan-out = delivered + lost + not_owed.
        """
        not_owed = self.lost.get(K.NOT_OWED, 0)
        out = {
            "published": self.published,
            "expected_deliveries": self.expected - not_owed,
            "delivered": self.delivered,
            "egress_deliveries": self.delivered_egress,
            "not_owed": not_owed,
            "retained_deliveries": self.retained_deliveries,
        }
        for c, name in K.CAUSE_NAMES.items():
            if c != K.NOT_OWED:
                out[f"lost_{name}"] = self.lost.get(c, 0)
        return out

    def throughput_series(self) -> pd.DataFrame:
        """Published and delivered messages per second, per time bin (DataFrame)."""
        n = max(len(v) for v in self._series.values())
        pad = {k: np.concatenate([v, np.zeros(n - len(v), np.int64)]) for k, v in self._series.items()}
        return pd.DataFrame(
            {
                "time_s": np.arange(n) * self.series_bin_s,
                "published_per_s": pad["published"] / self.series_bin_s,
                "delivered_per_s": pad["delivered"] / self.series_bin_s,
            }
        )


class RecordSink(_Tally):
    """Keeps every delivery and drop; exact quantiles and DataFrames."""

    def __init__(self, network: Network, series_bin_s: float = 1.0) -> None:
        super().__init__(network, series_bin_s)
        self._delivered: list[Packets] = []
        self._retained: list[Packets] = []
        self._dropped: list[tuple[Packets, np.ndarray, int, np.ndarray]] = []

    def _delivered_hook(self, packets: Packets) -> None:
        self._delivered.append(packets)

    def _retained_hook(self, packets: Packets) -> None:
        self._retained.append(packets)

    def _dropped_hook(self, packets: Packets, drop_t: np.ndarray, station: int, code: np.ndarray) -> None:
        self._dropped.append((packets, np.asarray(drop_t, float), station, np.asarray(code)))

    def deliveries(self) -> pd.DataFrame:
        """One row per delivered copy: publish and delivery time, latency,
        publisher, subscriber, topic, size, hops, message id, and whether it
        is a retained copy sent on connect (not egress). Sorted by
        (delivery time, message, subscriber)."""
        pk = Packets.concat(self._delivered + self._retained)
        retained = pk.msg < 0
        pk = Packets(pk.t, np.where(retained, -pk.msg - 1, pk.msg), pk.visit, pk.size, pk.pub_t)
        cols = self.net.delivery_frame_columns(pk)
        df = pd.DataFrame(
            {
                "publish_time_s": pk.pub_t,
                "delivery_time_s": pk.t,
                "latency_s": pk.t - pk.pub_t,
                "publisher": _names(self.net.names["publisher"], cols["publisher"]),
                "subscriber": _names(self.net.names["subscriber"], self.net.plan.subscriber[pk.visit]),
                "topic": _names(self.net.names["topic"], cols["topic"]),
                "size_bytes": pk.size,
                "hops": cols["hops"],
                "msg": pk.msg,
                "retained": retained,
            }
        )
        return df.sort_values(["delivery_time_s", "msg", "subscriber"], kind="stable", ignore_index=True)

    def drops(self) -> pd.DataFrame:
        """One row per dropped copy: where, when, why, and how many deliveries it cost.
        Sorted by (drop time, message, place)."""
        if not self._dropped:
            pk, t, st, code = Packets.empty(), np.empty(0), np.empty(0, np.int64), np.empty(0, np.int64)
        else:
            pk = Packets.concat([d[0] for d in self._dropped])
            t = np.concatenate([d[1] for d in self._dropped])
            st = np.concatenate([np.full(len(d[0]), d[2]) for d in self._dropped])
            code = np.concatenate([d[3] for d in self._dropped])
        cols = self.net.delivery_frame_columns(pk)
        station_names = [s.name for s in self.net.stations]
        df = pd.DataFrame(
            {
                "publish_time_s": pk.pub_t,
                "drop_time_s": t,
                "publisher": _names(self.net.names["publisher"], cols["publisher"]),
                "topic": _names(self.net.names["topic"], cols["topic"]),
                "size_bytes": pk.size,
                "hops": cols["hops"],
                "place": _names(station_names, st),
                "cause": _names([K.CAUSE_NAMES.get(c, "?") for c in range(max(K.CAUSE_NAMES) + 1)], code),
                "lost_deliveries": self.net.plan.leaves[pk.visit],
                "msg": pk.msg,
            }
        )
        # place breaks ties: copies of one message dropped at two places at once
        return df.sort_values(["drop_time_s", "msg", "place"], kind="stable", ignore_index=True)

    def _window_latencies(self) -> np.ndarray:
        lat = [p.t[self._in(p.pub_t)] - p.pub_t[self._in(p.pub_t)] for p in self._delivered]
        return np.concatenate(lat) if lat else np.empty(0)

    def latency_stats(self, quantiles: Sequence[float] = (0.5, 0.9, 0.99)) -> dict[Any, float]:
        """Mean, quantiles and max latency of window messages, s (exact)."""
        lat = self._window_latencies()
        if len(lat) == 0:
            return {"mean": math.nan, "max": math.nan, **{q: math.nan for q in quantiles}}
        qs = np.quantile(lat, quantiles, method="inverted_cdf")
        return {"mean": float(lat.mean()), "max": float(lat.max()), **{q: float(v) for q, v in zip(quantiles, qs)}}

    def latency_ecdf(self) -> tuple[np.ndarray, np.ndarray]:
        """(latency_s sorted, cumulative fraction) of window messages."""
        lat = np.sort(self._window_latencies())
        return lat, np.arange(1, len(lat) + 1) / max(len(lat), 1)


def _names(table: Sequence[str], idx: Any) -> Any:
    idx = np.asarray(idx, dtype=np.int64)
    cats = list(table)
    if len(idx) and idx.min() < 0:
        cats = cats + [""]
        idx = np.where(idx < 0, len(cats) - 1, idx)
    return (
        pd.Categorical.from_codes(idx, categories=pd.Index(cats).astype(str), validate=False)
        if len(set(cats)) == len(cats)
        else np.asarray(cats, dtype=object)[idx]
    )


class LatencyHistogram:
    """Log-binned histogram of non-negative values (s), fixed memory.

    Bins are ``per_decade`` per factor of ten between ``low`` and ``high``;
    values below ``low`` (including zero) fall in bin 0, above ``high`` in the
    last bin. Exact count, sum, min and max are kept alongside.
    """

    def __init__(self, low: float = 1e-9, high: float = 1e5, per_decade: int = 200) -> None:
        self.low, self.per_decade = low, per_decade
        self.edges = np.logspace(math.log10(low), math.log10(high), int(round(math.log10(high / low) * per_decade)) + 1)
        self.counts = np.zeros(len(self.edges) + 1, dtype=np.int64)
        self.n = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    def add(self, values: np.ndarray) -> None:
        """Add values (s)."""
        if len(values) == 0:
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            x = values / self.low
            doubtful = np.empty(len(x), dtype=np.int64)
            k = _count_bins_by_table(x, x.view(np.int64), float(self.per_decade), _LOG10_TABLE, self.counts, doubtful)
            if k:  # the bins NumPy's log10 decides (near an edge, or not a positive normal number)
                _count_bins(np.log10(x[doubtful[:k]]), float(self.per_decade), self.counts)
        self.n += len(values)
        self.total += float(values.sum())
        self.min = min(self.min, float(values.min()))
        self.max = max(self.max, float(values.max()))

    def quantile(self, q: float) -> float:
        """Value below which a fraction ``q`` lies (bin geometric midpoint, clamped)."""
        if self.n == 0:
            return math.nan
        rank = max(1, math.ceil(q * self.n))
        b = int(np.searchsorted(np.cumsum(self.counts), rank))
        if b == 0:
            return self.min
        lo = self.edges[b - 1]
        hi = self.edges[b] if b < len(self.edges) else self.max
        return float(min(max(math.sqrt(lo * hi), self.min), self.max))

    def ecdf(self) -> tuple[np.ndarray, np.ndarray]:
        """(upper bin edges of non-empty bins, cumulative fraction)."""
        upper = np.concatenate([self.edges, [self.max]])
        frac = np.cumsum(self.counts) / max(self.n, 1)
        keep = self.counts > 0
        return np.minimum(upper[keep], self.max), frac[keep]


class StreamSink(_Tally):
    """Counters and histograms only: memory independent of run length in messages."""

    def __init__(self, network: Network, series_bin_s: float = 1.0) -> None:
        super().__init__(network, series_bin_s)
        self.hist = LatencyHistogram()

    def _delivered_hook(self, packets: Packets) -> None:
        self.hist.add(_latencies_in(packets.t, packets.pub_t, self.w0, self.w1))

    def latency_stats(self, quantiles: Sequence[float] = (0.5, 0.9, 0.99)) -> dict[Any, float]:
        """Mean and max exact; quantiles within the histogram's resolution."""
        if self.hist.n == 0:
            return {"mean": math.nan, "max": math.nan, **{q: math.nan for q in quantiles}}
        return {
            "mean": self.hist.total / self.hist.n,
            "max": self.hist.max,
            **{q: self.hist.quantile(q) for q in quantiles},
        }

    def latency_ecdf(self) -> tuple[np.ndarray, np.ndarray]:
        return self.hist.ecdf()


# --- compiled tallies (one pass each instead of a chain of NumPy temporaries) ---
# Each reproduces the NumPy expression in its docstring exactly: the same IEEE
# operations (division, product, floor, subtraction) element by element.


@njit(cache=True)
def _any_negative(x: np.ndarray) -> bool:
    """``(x < 0).any()`` without the mask."""
    for v in x:
        if v < 0:
            return True
    return False


@njit(cache=True)
def _latencies_in(t: np.ndarray, pub_t: np.ndarray, w0: float, w1: float) -> np.ndarray:
    """``t[inw] - pub_t[inw]`` with ``inw = (pub_t >= w0) & (pub_t < w1)``."""
    out = np.empty(t.shape[0])
    k = 0
    for i in range(t.shape[0]):
        if pub_t[i] >= w0 and pub_t[i] < w1:
            out[k] = t[i] - pub_t[i]
            k += 1
    return out[:k]


_BIN_LIMIT = 2.0**62  # beyond it (or not a number) a time has no bin, as NumPy's int64 cast gave none


@njit(cache=True)
def _delivered_counts(t: np.ndarray, pub_t: np.ndarray, w0: float, w1: float, bin_s: float) -> tuple[int, int, int]:
    """In one pass: entries of ``pub_t`` and of ``t`` in [w0, w1), and :func:`_last_bin` of ``t``."""
    n_pub = 0
    n_t = 0
    top = -1.0
    for i in range(t.shape[0]):
        x = t[i]
        if pub_t[i] >= w0 and pub_t[i] < w1:
            n_pub += 1
        if x >= w0 and x < w1:
            n_t += 1
        b = np.floor(x / bin_s)
        if b >= 0.0 and b < _BIN_LIMIT and b > top:
            top = b
    return n_pub, n_t, int(top)


@njit(cache=True)
def _last_bin(t: np.ndarray, bin_s: float) -> int:
    """Largest bin ``floor(t / bin_s)`` of the times with one (>= 0), or -1 if none."""
    top = -1.0
    for x in t:
        b = np.floor(x / bin_s)
        if b >= 0.0 and b < _BIN_LIMIT and b > top:
            top = b
    return int(top)


@njit(cache=True)
def _add_bins(t: np.ndarray, bin_s: float, counts: np.ndarray) -> None:
    """``counts[b] += 1`` for each ``b = floor(t / bin_s) >= 0`` (``counts`` long enough)."""
    for x in t:
        b = np.floor(x / bin_s)
        if b >= 0.0 and b < _BIN_LIMIT:
            counts[int(b)] += 1


_TABLE_BITS = 12
_LOG10_TABLE = np.log10(1.0 + np.arange(2**_TABLE_BITS + 1) / 2**_TABLE_BITS)
"""log10 at 4,097 even steps of the mantissa over [1, 2] (:func:`_count_bins_by_table`)."""
_LOG10_2 = float(np.log10(2.0))
_TABLE_MARGIN = 1e-4
"""Bins, about 150 times the table's worst error: a position nearer an edge goes to NumPy's log10."""


@njit(cache=True)
def _count_bins_by_table(
    x: np.ndarray, bits: np.ndarray, per_decade: float, table: np.ndarray, counts: np.ndarray, doubtful: np.ndarray
) -> int:
    """:func:`_count_bins` of ``log10(x)`` without a logarithm where the bin is certain.

    The decade ``log10(x)`` of a positive normal number is its binary exponent
    times log10(2) plus log10 of its mantissa, interpolated linearly in
    ``table`` (error below 4e-9 decades: 7e-7 bins at 200 per decade). Where
    the position ``log10(x) * per_decade`` is further than ``_TABLE_MARGIN``
    from a bin edge its bin is the one NumPy's log10 gives (whose error is a
    few units in the last place); the others (near an edge; zero, negative,
    subnormal, infinite, not a number) are listed in ``doubtful`` for the
    exact path. Returns how many.

    Parameters
    ----------
    x : numpy.ndarray
        Values over the histogram's lower bound (float64).
    bits : numpy.ndarray
        ``x`` viewed as int64.
    per_decade : float
        Bins per decade.
    table : numpy.ndarray
        ``log10(1 + k / 2**_TABLE_BITS)`` for k = 0 .. 2**_TABLE_BITS.
    counts : numpy.ndarray
        Bin counts (int64), incremented.
    doubtful : numpy.ndarray
        Output: indices of the values left to the exact path (int64, len(x)).
    """
    last = counts.shape[0] - 1
    shift = 52 - _TABLE_BITS
    low_mask = (1 << shift) - 1
    k = 0
    for i in range(x.shape[0]):
        b = bits[i]
        e = (b >> 52) & 0x7FF
        if b <= 0 or e == 0 or e == 0x7FF:
            doubtful[k] = i
            k += 1
            continue
        cell = (b >> shift) & ((1 << _TABLE_BITS) - 1)
        frac = (b & low_mask) / (low_mask + 1.0)
        d = (e - 1023) * _LOG10_2 + table[cell] + frac * (table[cell + 1] - table[cell])
        y = d * per_decade
        fl = np.floor(y)
        if y - fl < _TABLE_MARGIN or y - fl > 1.0 - _TABLE_MARGIN:
            doubtful[k] = i
            k += 1
            continue
        pos = fl + 1.0
        if pos < 0.0:
            counts[0] += 1
        elif pos >= last:
            counts[last] += 1
        else:
            counts[int(pos)] += 1
    return k


@njit(cache=True)
def _count_bins(decades: np.ndarray, per_decade: float, counts: np.ndarray) -> None:
    """Histogram bins of :meth:`LatencyHistogram.add`: ``pos = floor(decades *
    per_decade) + 1``, not a number and below 0 to bin 0, above the last edge
    to the last bin (``len(counts) - 1``), then ``counts[pos] += 1``."""
    last = counts.shape[0] - 1
    for d in decades:
        pos = np.floor(d * per_decade) + 1.0
        if not pos >= 0.0:  # not a number, -inf, negative
            counts[0] += 1
        elif pos >= last:
            counts[last] += 1
        else:
            counts[int(pos)] += 1
