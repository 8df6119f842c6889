"""One in-memory form of a load: a time-sorted table of publications.

A :class:`Trace` wraps a pandas DataFrame with the columns

============  ==========  ===============================================
column        dtype       meaning
============  ==========  ===============================================
t_s           float64     seconds from the start of the trace, sorted
publisher     category    the client that publishes (device, gateway, ...)
topic         category    topic of the publication
size_bytes    int64       application payload, bytes (>= 0)
qos           int8        optional: MQTT QoS 0, 1 or 2
priority      int8        optional: message priority (higher first)
retain        bool        optional: MQTT retain flag
connection    category    optional: client connection (pcap readers)
============  ==========  ===============================================

plus two scalars: ``t0_of_day_s``, the time of day (seconds after midnight,
UTC for real traces) of ``t_s = 0``, which the diurnal summaries and the
unbiased resampler need, and ``origin_epoch_s``, the absolute epoch time of
``t_s = 0`` when known.

Times, sizes and topic/publisher codes are NumPy arrays; categorical columns
keep one string per distinct value, so millions of messages cost no Python
object each. Every constructor validates: a missing or unknown column, a time
that is not finite, negative or out of order, a negative or fractional size
raise a one-line :class:`~pubsim.sim.errors.ConfigError` naming the row and value.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ...sim.errors import ConfigError
from ...sim.units import MAX_SIZE_BYTES
from ..params.client import PublisherParams

__all__ = ["Trace", "REQUIRED", "OPTIONAL", "MAX_INFLATION"]

REQUIRED = ("t_s", "publisher", "topic", "size_bytes")
OPTIONAL = {"qos": "int8", "priority": "int8", "retain": "bool", "connection": "category"}
_META_KEY = b"pubsim.trace"
_CSV_MAGIC = "# pubsim-trace "
DAY_S = 86400.0


class Trace:
    """A validated, time-sorted load.

    Parameters
    ----------
    frame : pandas.DataFrame
        Columns as in the module docstring (extra optional ones allowed).
    t0_of_day_s : float
        Time of day of ``t_s = 0``, s after midnight.
    origin_epoch_s : float or None
        Epoch time of ``t_s = 0`` when the trace was recorded.
    where : str
        Name used in error messages (a file name, a reader).
    sort : bool
        Sort by time (stable) instead of rejecting unsorted input.
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        *,
        t0_of_day_s: float = 0.0,
        origin_epoch_s=None,
        where: str = "trace",
        sort: bool = False,
        _row_offset: int = 0,
    ):
        frame = _coerce(frame, where, _row_offset)
        if sort:
            order = np.argsort(frame["t_s"].to_numpy(), kind="stable")
            if np.any(order[1:] < order[:-1]):
                frame = frame.iloc[order].reset_index(drop=True)
        _validate(frame, where, _row_offset)
        self.frame = frame
        t0 = float(t0_of_day_s)
        if not np.isfinite(t0):
            raise ConfigError(f"{where}.t0_of_day_s", t0_of_day_s, "a finite time of day in s")
        self.t0_of_day_s = t0 % DAY_S
        self.origin_epoch_s = None if origin_epoch_s is None else float(origin_epoch_s)
        self.publisher_t0_of_day_s = None  # per-publisher start of day (resampled copies); not saved

    # ----------------------------------------------------------------- building
    @classmethod
    def from_arrays(
        cls,
        t_s,
        publisher,
        topic,
        size_bytes,
        *,
        publisher_names=None,
        topic_names=None,
        qos=None,
        priority=None,
        retain=None,
        connection=None,
        t0_of_day_s=0.0,
        origin_epoch_s=None,
        sort=True,
        where="trace",
    ):
        """Build from arrays without a Python object per message.

        ``publisher`` and ``topic`` are either arrays of strings or integer
        codes into ``publisher_names`` / ``topic_names``.
        """
        data = {
            "t_s": np.asarray(t_s, dtype=float),
            "publisher": _categorical(publisher, publisher_names),
            "topic": _categorical(topic, topic_names),
            "size_bytes": np.asarray(size_bytes),
        }
        for name, values in (("qos", qos), ("priority", priority), ("retain", retain)):
            if values is not None:
                data[name] = np.asarray(values)
        if connection is not None:
            data["connection"] = _categorical(connection, None)
        n = len(data["t_s"])
        for name, values in data.items():
            if len(values) != n:
                raise ConfigError(f"{where}.{name}", f"{len(values)} values", f"{n} values, one per t_s")
        if sort and n > 1 and np.any(data["t_s"][1:] < data["t_s"][:-1]):
            order = np.argsort(data["t_s"], kind="stable")
            data = {k: (v.take(order) if isinstance(v, pd.Categorical) else v[order]) for k, v in data.items()}
        return cls(pd.DataFrame(data, copy=False), t0_of_day_s=t0_of_day_s, origin_epoch_s=origin_epoch_s, where=where)

    @classmethod
    def concat(cls, traces, *, t0_of_day_s=None, where="trace"):
        """Superpose traces (same time origin), merged in time order."""
        traces = list(traces)
        if not traces:
            raise ConfigError(where, "[]", "at least one trace")
        frames = [t.frame for t in traces]
        cols = set(frames[0].columns)
        if any(set(f.columns) != cols for f in frames):
            raise ConfigError(where, "traces with different columns", "the same columns in every trace")
        pubs = pd.api.types.union_categoricals([f["publisher"] for f in frames])
        tops = pd.api.types.union_categoricals([f["topic"] for f in frames])
        out = {"t_s": np.concatenate([f["t_s"].to_numpy() for f in frames])}
        out["publisher"] = pubs
        out["topic"] = tops
        for c in frames[0].columns:
            if c not in out:
                if c == "connection":
                    out[c] = pd.api.types.union_categoricals([f[c] for f in frames])
                else:
                    out[c] = np.concatenate([f[c].to_numpy() for f in frames])
        order = np.argsort(out["t_s"], kind="stable")
        frame = pd.DataFrame({k: (v[order] if isinstance(v, np.ndarray) else v.take(order)) for k, v in out.items()})
        t0 = traces[0].t0_of_day_s if t0_of_day_s is None else t0_of_day_s
        return cls(frame, t0_of_day_s=t0, origin_epoch_s=traces[0].origin_epoch_s, where=where)

    # ----------------------------------------------------------------- access
    def __len__(self):
        return len(self.frame)

    def __repr__(self):
        return (
            f"Trace({len(self)} messages, {self.frame['publisher'].nunique()} publishers, "
            f"{self.span_s:.6g} s, t0_of_day_s={self.t0_of_day_s:.6g})"
        )

    def __eq__(self, other):
        if not isinstance(other, Trace):
            return NotImplemented
        return (
            self.t0_of_day_s == other.t0_of_day_s
            and self.frame.shape == other.frame.shape
            and self.frame.astype({c: str for c in ("publisher", "topic")}).equals(
                other.frame.astype({c: str for c in ("publisher", "topic")})
            )
        )

    @property
    def t_s(self) -> np.ndarray:
        return self.frame["t_s"].to_numpy()

    @property
    def size_bytes(self) -> np.ndarray:
        return self.frame["size_bytes"].to_numpy()

    @property
    def publishers(self) -> list:
        """Publisher names (the categories of the ``publisher`` column)."""
        return [str(c) for c in self.frame["publisher"].cat.categories]

    @property
    def span_s(self) -> float:
        t = self.t_s
        return float(t[-1] - t[0]) if len(t) else 0.0

    def copy_with(self, frame=None, **meta):
        """A new trace with ``frame`` and/or changed metadata."""
        return Trace(
            self.frame if frame is None else frame,
            t0_of_day_s=meta.get("t0_of_day_s", self.t0_of_day_s),
            origin_epoch_s=meta.get("origin_epoch_s", self.origin_epoch_s),
        )

    def window(self, start_s, end_s):
        """Messages in ``[start_s, end_s)``, times shifted so that ``start_s`` becomes 0."""
        t = self.t_s
        lo, hi = np.searchsorted(t, [start_s, end_s], side="left")
        frame = self.frame.iloc[lo:hi].reset_index(drop=True).copy()
        frame["t_s"] = frame["t_s"] - start_s
        origin = None if self.origin_epoch_s is None else self.origin_epoch_s + start_s
        return Trace(frame, t0_of_day_s=self.t0_of_day_s + start_s, origin_epoch_s=origin)

    # ----------------------------------------------------------------- I/O
    def save(self, path):
        """Write ``.parquet`` (or ``.pq``) or ``.csv`` (``.csv.gz``), chosen by the suffix."""
        path = Path(path)
        meta = {"t0_of_day_s": self.t0_of_day_s, "origin_epoch_s": self.origin_epoch_s, "version": 1}
        kind = _kind(path)
        if kind == "parquet":
            import pyarrow as pa  # optional heavy dependency: pyarrow, only for parquet files
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(self.frame, preserve_index=False)
            table = table.replace_schema_metadata(
                {**(table.schema.metadata or {}), _META_KEY: json.dumps(meta).encode()}
            )
            pq.write_table(table, path)
        else:
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "wt", newline="") as fh:
                fh.write(_CSV_MAGIC + json.dumps(meta) + "\n")
                self.frame.to_csv(fh, index=False)
        return path

    @classmethod
    def load(cls, path):
        """Read a file written by :meth:`save` (or any file with the same columns).

        Raises
        ------
        ConfigError
            Unknown suffix, a file that is not Parquet / CSV (corrupt,
            truncated gzip, not UTF-8, bad metadata line, a ``.gz`` inflating
            to more than :data:`MAX_INFLATION` times its size), missing or
            unknown column, or a bad value (the message names the row and,
            for CSV, the line).
        """
        path = Path(path)
        kind = _kind(path)
        if not path.exists():
            raise ConfigError(str(path), "missing", "an existing trace file")
        frame, meta, offset = _read_parquet(path) if kind == "parquet" else _read_csv(path)
        t0, origin = _meta_times(meta, path)
        return cls(frame, t0_of_day_s=t0, origin_epoch_s=origin, where=str(path), _row_offset=offset)

    # ----------------------------------------------------------------- engine
    def to_publishers(self, **params):
        """One schedule publisher per trace publisher.

        Parameters
        ----------
        **params
            Extra :class:`~pubsim.models.params.client.PublisherParams` fields for every
            publisher (``provenance``, ``priority``, ...).

        Returns
        -------
        dict of str -> PublisherParams
            ``arrival="schedule"``; topics in order of first use. A trace
            with a ``priority`` column gives each publisher its priority
            (it must be constant per publisher: the engine has one per client).
        """
        frame = self.frame
        codes = frame["publisher"].cat.codes.to_numpy()
        names = frame["publisher"].cat.categories
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=len(names))
        bounds = np.concatenate([[0], np.cumsum(counts)])
        t = self.t_s[order]
        size = self.size_bytes[order].astype(np.int64)
        tcodes = frame["topic"].cat.codes.to_numpy()[order]
        tnames = np.asarray(frame["topic"].cat.categories, dtype=object)
        prio = frame["priority"].to_numpy()[order] if "priority" in frame and "priority" not in params else None
        out = {}
        for i, name in enumerate(names):
            lo, hi = bounds[i], bounds[i + 1]
            if hi == lo:
                continue
            tc = tcodes[lo:hi]
            uniq, first = np.unique(tc, return_index=True)
            topics = tuple(str(x) for x in tnames[uniq[np.argsort(first)]])
            extra = dict(params)
            if prio is not None:
                p = prio[lo:hi]
                if np.any(p != p[0]):
                    raise ConfigError(
                        f"trace.priority[{name}]",
                        sorted(set(p.tolist())),
                        "one priority per publisher (split the publisher)",
                    )
                extra["priority"] = int(p[0])
            out[str(name)] = PublisherParams(
                topics=topics,
                arrival="schedule",
                schedule_time_s=tuple(t[lo:hi].tolist()),
                schedule_size_bytes=tuple(size[lo:hi].tolist()),
                schedule_topic=tuple(tnames[tc].tolist()),
                **extra,
            )
        return out

    # ----------------------------------------------------------------- summary
    def summary(self, quantiles=(0.0, 0.5, 0.9, 0.99, 1.0)) -> dict:
        """Devices, messages, span, mean rate, rate by hour of day, size and gap quantiles.

        ``rate_by_hour_per_s[h]`` is the number of messages whose time of day
        falls in hour ``h`` divided by the seconds of that hour the trace
        covers (None for hours it does not cover). Gaps are the times between
        consecutive messages of the same publisher.
        """
        t = self.t_s
        n = len(t)
        out = {
            "devices": int(self.frame["publisher"].nunique()),
            "topics": int(self.frame["topic"].nunique()),
            "messages": n,
            "span_s": self.span_s,
            "t0_of_day_s": self.t0_of_day_s,
            "origin_epoch_s": self.origin_epoch_s,
        }
        out["mean_rate_per_s"] = n / out["span_s"] if out["span_s"] > 0 else float("nan")
        qs = np.asarray(quantiles, dtype=float)
        qnames = [_qname(q) for q in qs]
        if n:
            sizes = self.size_bytes
            out["size_bytes"] = {"mean": float(sizes.mean()), **dict(zip(qnames, np.quantile(sizes, qs).tolist()))}
            out["bytes_total"] = int(sizes.sum())
            out["rate_by_hour_per_s"] = _hourly_rate(t, self.t0_of_day_s)
        else:
            out["size_bytes"], out["bytes_total"], out["rate_by_hour_per_s"] = {}, 0, [None] * 24
        gaps = self.gaps_s()
        out["gap_s"] = (
            {"mean": float(gaps.mean()), **dict(zip(qnames, np.quantile(gaps, qs).tolist()))} if len(gaps) else {}
        )
        for col in ("qos", "retain", "priority"):
            if col in self.frame:
                vc = self.frame[col].value_counts().sort_index()
                out[f"{col}_counts"] = {str(k): int(v) for k, v in vc.items()}
        return out

    def gaps_s(self) -> np.ndarray:
        """Times between consecutive messages of the same publisher, s."""
        codes = self.frame["publisher"].cat.codes.to_numpy()
        if len(codes) < 2:
            return np.empty(0)
        order = np.argsort(codes, kind="stable")
        t = self.t_s[order]
        c = codes[order]
        same = c[1:] == c[:-1]
        return np.diff(t)[same]


# --------------------------------------------------------------------------- reading saved traces

MAX_INFLATION = 200
"""A ``.csv.gz`` may inflate to ``max(MAX_INFLATION * its size, 256 MiB)`` characters; more is a gzip bomb."""
_MIN_INFLATED = 256 << 20
_MAX_META_CHARS = 1 << 16


class _CappedText:
    """A text file whose reads stop with a ConfigError past ``cap`` characters (pandas reads in chunks)."""

    def __init__(self, fh, cap, path):
        self._fh, self._left, self._cap, self._path = fh, cap, cap, path

    def read(self, n=-1):
        n = self._left + 1 if n is None or n < 0 else min(n, self._left + 1)
        text = self._fh.read(n)
        self._left -= len(text)
        if self._left < 0:
            raise ConfigError(
                self._path, f"more than {self._cap} characters inflated", "a gzip'd CSV trace, not a bomb"
            )
        return text


def _read_parquet(path):
    """(frame, metadata dict, row offset 0) of a Parquet trace."""
    import pyarrow.parquet as pq  # optional heavy dependency: pyarrow, only for parquet files

    try:
        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(_META_KEY)
        meta = json.loads(raw) if raw else {}
        frame = table.to_pandas()
    except Exception as exc:  # pyarrow and its pandas metadata raise many types for a corrupt file
        raise ConfigError(str(path), type(exc).__name__, f"a Parquet trace ({exc})") from None
    return frame, meta, 0


def _read_csv(path):
    """(frame, metadata dict, line offset of row 0) of a CSV(.gz) trace."""
    gz = path.name.endswith(".gz")
    cap = max(MAX_INFLATION * path.stat().st_size, _MIN_INFLATED) if gz else None
    meta, offset = {}, 0
    try:
        with gzip.open(path, "rt", newline="") if gz else open(path, newline="") as fh:
            first = fh.readline(_MAX_META_CHARS)
            if first.startswith(_CSV_MAGIC):
                meta = json.loads(first[len(_CSV_MAGIC) :])
                offset = 1
            else:
                fh.seek(0)
            frame = pd.read_csv(
                _CappedText(fh, cap, str(path)) if gz else fh,
                dtype={"publisher": str, "topic": str, "connection": str},
                keep_default_na=False,
                na_values={"t_s": [""], "size_bytes": [""]},
            )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, ConfigError):
            raise
        # ValueError covers bad JSON metadata and bytes that are not UTF-8; OSError, EOFError and
        # zlib.error a gzip file that is corrupt or cut short
        raise ConfigError(str(path), type(exc).__name__, f"a CSV trace ({exc})") from None
    return frame, meta, offset + 2  # header line + 1-based lines


def _finite_number(value):
    """True for an int or float that is finite as a float (no bool, no integer beyond 64 bits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) < 2**63 if isinstance(value, int) else math.isfinite(value)


def _meta_times(meta, path):
    """``(t0_of_day_s, origin_epoch_s)`` from a saved trace's metadata, checked."""
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}.metadata", type(meta).__name__, "a JSON object")
    t0, origin = meta.get("t0_of_day_s", 0.0), meta.get("origin_epoch_s")
    for name, value in (("t0_of_day_s", t0), ("origin_epoch_s", origin)):
        if value is None and name == "origin_epoch_s":
            continue
        if not _finite_number(value):
            raise ConfigError(f"{path}.metadata.{name}", value, "a finite number of seconds")
    return t0, origin


# --------------------------------------------------------------------------- helpers


def _qname(q):
    return {0.0: "min", 1.0: "max"}.get(float(q), f"p{100 * q:g}")


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    raise ConfigError(str(path), path.suffix, "a .parquet, .pq, .csv or .csv.gz file")


def _categorical(values, names):
    if names is not None:
        codes = np.asarray(values)
        if codes.dtype.kind not in "iu":
            raise ConfigError("codes", codes.dtype, "integer codes when names are given")
        if len(codes) and (codes.min() < 0 or codes.max() >= len(names)):
            bad = int(codes[(codes < 0) | (codes >= len(names))][0])
            raise ConfigError("codes", bad, f"a code in [0, {len(names)})")
        return pd.Categorical.from_codes(
            codes.astype(np.int32, copy=False), categories=pd.Index([str(x) for x in names])
        )
    return pd.Categorical(np.asarray(values).astype(str) if not isinstance(values, pd.Categorical) else values)


def _err_row(where, i, offset, column):
    place = f"{where} row {i}"
    if offset:
        place += f" (line {i + offset})"
    return f"{place}: {column}"


def _coerce(frame, where, offset):
    if not isinstance(frame, pd.DataFrame):
        raise ConfigError(where, type(frame).__name__, "a pandas DataFrame")
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(
            f"{where}.columns",
            list(frame.columns),
            f"columns {list(REQUIRED)} (missing {missing[0]!r}); optional {list(OPTIONAL)}",
        )
    unknown = [c for c in frame.columns if c not in REQUIRED and c not in OPTIONAL]
    if unknown:
        raise ConfigError(f"{where}.columns", unknown[0], f"one of {list(REQUIRED) + list(OPTIONAL)}")
    out = {}
    n = len(frame)
    t = frame["t_s"]
    if not pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t):
        num = pd.to_numeric(t, errors="coerce")
        bad = np.flatnonzero(num.isna().to_numpy() & ~t.isna().to_numpy())
        if len(bad):
            raise ConfigError(_err_row(where, int(bad[0]), offset, "t_s"), t.iloc[bad[0]], "a number of seconds")
        t = num
    out["t_s"] = t.to_numpy(dtype=float, na_value=np.nan)
    for col in ("publisher", "topic") + (("connection",) if "connection" in frame else ()):
        s = frame[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            if s.isna().any():
                i = int(np.flatnonzero(s.isna().to_numpy())[0])
                raise ConfigError(_err_row(where, i, offset, col), None, "a non-empty name")
            if not all(isinstance(c, str) for c in s.cat.categories):
                s = s.cat.rename_categories([str(c) for c in s.cat.categories])
            out[col] = s.array
        else:
            arr = s.to_numpy(dtype=object)
            isna = pd.isna(arr)
            if isna.any():
                i = int(np.flatnonzero(isna)[0])
                raise ConfigError(_err_row(where, i, offset, col), arr[i], "a non-empty name")
            out[col] = pd.Categorical(arr.astype(str))
        cats = out[col].categories
        if len(cats) and (cats == "").any():
            codes = out[col].codes
            i = int(np.flatnonzero(codes == cats.get_loc(""))[0])
            raise ConfigError(_err_row(where, i, offset, col), "", "a non-empty name")
    size = frame["size_bytes"]
    sz = (
        pd.to_numeric(size, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if not pd.api.types.is_integer_dtype(size)
        else size.to_numpy()
    )
    if sz.dtype.kind == "u" and len(sz) and sz.max() > MAX_SIZE_BYTES:
        sz = sz.astype(float)  # beyond int64: reported below as out of range
    if sz.dtype.kind == "f":
        bad = ~np.isfinite(sz) | (sz != np.round(sz)) | (np.abs(sz) > MAX_SIZE_BYTES)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ConfigError(_err_row(where, i, offset, "size_bytes"), size.iloc[i], "a whole number of bytes >= 0")
    out["size_bytes"] = sz.astype(np.int64)
    for col in ("qos", "priority"):
        if col in frame:
            v = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            lo, hi = (0, 2) if col == "qos" else (-128, 127)
            bad = ~np.isfinite(v) | (v != np.round(v)) | (v < lo) | (v > hi)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ConfigError(_err_row(where, i, offset, col), frame[col].iloc[i], f"an integer in [{lo}, {hi}]")
            out[col] = v.astype(np.int8)
    if "retain" in frame:
        r = frame["retain"]
        if r.dtype == bool:
            out["retain"] = r.to_numpy()
        else:
            text = r.astype(str).str.lower()
            ok = text.isin(["true", "false", "1", "0"]).to_numpy()
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                raise ConfigError(_err_row(where, i, offset, "retain"), r.iloc[i], "true or false")
            out["retain"] = text.isin(["true", "1"]).to_numpy()
    cols = [c for c in (*REQUIRED, *OPTIONAL) if c in out]
    result = pd.DataFrame({c: out[c] for c in cols}, copy=False)
    if len(result) != n:  # pragma: no cover - defensive
        raise ConfigError(where, len(result), f"{n} rows")
    return result


def _validate(frame, where, offset):
    t = frame["t_s"].to_numpy()
    bad = ~np.isfinite(t) | (t < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ConfigError(_err_row(where, i, offset, "t_s"), float(t[i]), "a finite time >= 0 s")
    if len(t) > 1:
        down = np.flatnonzero(t[1:] < t[:-1])
        if len(down):
            i = int(down[0]) + 1
            raise ConfigError(
                _err_row(where, i, offset, "t_s"), float(t[i]), f"times in order (row {i - 1} has {float(t[i - 1])!r})"
            )
    s = frame["size_bytes"].to_numpy()
    neg = np.flatnonzero(s < 0)
    if len(neg):
        i = int(neg[0])
        raise ConfigError(_err_row(where, i, offset, "size_bytes"), int(s[i]), "a whole number of bytes >= 0")


def _hourly_rate(t, t0_of_day_s):
    """Messages per second by hour of day over the hours the trace covers."""
    absolute = t + t0_of_day_s
    hours = ((absolute % DAY_S) // 3600).astype(np.int64) % 24
    counts = np.bincount(hours, minlength=24)
    start, end = absolute[0], absolute[-1]

    def covered(x, h):  # seconds of hour h in [0, x)
        days, rest = np.divmod(x, DAY_S)
        return days * 3600.0 + np.clip(rest - h * 3600.0, 0.0, 3600.0)

    out = []
    for h in range(24):
        cov = covered(end, h) - covered(start, h)
        out.append(float(counts[h] / cov) if cov > 0 else (None if counts[h] == 0 else float("inf")))
    return out
