"""Polling: a client fetching a sensor's value at an interval (SYSTEMS.md §2).

The sensor produces samples at its own times (every ``sample_interval_s``
with a random phase, or from a trace); the client sends a request every
``poll_interval_s``; the request reaches the sensor at its *read time* and
returns the latest sample taken at or before it; the reply arrives after a
further delay. When the two intervals differ, samples are lost (never
fetched: polling slower than sampling) or duplicated (fetched again:
polling faster). Everything is arithmetic on the two time series
(``numpy.searchsorted``).

Closed forms for constant intervals with independent uniform phases
(:func:`expected_lost_fraction`, :func:`expected_duplicate_fraction`): with
poll interval P and sample interval S, every read interval of length P
contains at least one sample when P >= S, so consecutive polls never
return the same sample and, in the long run, a fraction ``1 - S/P`` of the
samples is never fetched; when P <= S every sample interval of length S
contains a read, so no sample is lost and a fraction ``1 - P/S`` of the
polls return a sample already fetched.

Read times come from a fixed one-way delay (an assumption, labelled in the
parameters) or from a simulation: the delivery times of the poll requests
at the sensor (:func:`read_times_from_deliveries`), which include queueing
at the links and the broker.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ....sim.errors import ConfigError

__all__ = [
    "constant_times",
    "poll_records",
    "poll_summary",
    "expected_lost_fraction",
    "expected_duplicate_fraction",
    "read_times_from_deliveries",
]


def constant_times(interval_s, until_s, rng, start_s=0.0):
    """``start + phase + k x interval`` below ``until_s``, phase uniform in one interval."""
    first = start_s + rng.random() * interval_s
    n = max(int(np.ceil((until_s - first) / interval_s)), 0)
    t = first + np.arange(n) * interval_s
    return t[t < until_s]


def poll_records(sample_times_s, poll_times_s, read_times_s, reply_times_s):
    """One row per poll: which sample it fetched, how old, whether new.

    Parameters
    ----------
    sample_times_s : array
        Sensor sample times, sorted, s.
    poll_times_s, read_times_s, reply_times_s : array
        Per poll: request sent, value read at the sensor, reply received, s.

    Returns
    -------
    pandas.DataFrame
        ``poll``, ``poll_time_s``, ``read_time_s``, ``reply_time_s``,
        ``latency_s`` (reply - poll), ``sample`` (index, -1 = none yet),
        ``sample_time_s``, ``age_s`` (reply - sample time), ``duplicate``
        (sample already fetched by an earlier read), ``skipped`` (samples
        taken since the previously fetched one and never fetched).
    """
    samples = np.asarray(sample_times_s, dtype=float)
    if np.any(np.diff(samples) < 0):
        raise ConfigError("sample_times_s", "unsorted", "sample times in order")
    read = np.asarray(read_times_s, dtype=float)
    order = np.argsort(read, kind="stable")
    idx = np.searchsorted(samples, read, side="right") - 1  # latest sample at or before the read
    fetched = idx[order]
    best = np.maximum.accumulate(np.concatenate([[-1], fetched]))[:-1]  # latest fetched by earlier reads
    dup_sorted = (fetched <= best) & (fetched >= 0)
    skipped_sorted = np.where((fetched > best) & (best >= 0), fetched - best - 1, 0)
    duplicate = np.empty_like(dup_sorted)
    skipped = np.empty_like(skipped_sorted)
    duplicate[order], skipped[order] = dup_sorted, skipped_sorted
    sample_t = np.where(idx >= 0, samples[np.maximum(idx, 0)], np.nan)
    reply = np.asarray(reply_times_s, dtype=float)
    return pd.DataFrame(
        {
            "poll": np.arange(len(read)),
            "poll_time_s": np.asarray(poll_times_s, dtype=float),
            "read_time_s": read,
            "reply_time_s": reply,
            "latency_s": reply - np.asarray(poll_times_s, dtype=float),
            "sample": idx,
            "sample_time_s": sample_t,
            "age_s": reply - sample_t,
            "duplicate": duplicate,
            "skipped": skipped,
        }
    )


def poll_summary(records, sample_times_s):
    """Lost and duplicated samples between the first and the last fetched sample.

    ``lost_fraction``: samples in that span never fetched / samples in the
    span; ``duplicate_fraction``: polls returning an already fetched sample
    / polls that returned a sample.
    """
    got = records[records["sample"] >= 0]
    if got.empty:
        return {
            "polls": len(records),
            "samples": 0,
            "fetched": 0,
            "lost": 0,
            "duplicated_polls": 0,
            "lost_fraction": float("nan"),
            "duplicate_fraction": float("nan"),
        }
    lo, hi = int(got["sample"].min()), int(got["sample"].max())
    span = hi - lo + 1
    fetched = int(got["sample"].nunique())
    dup = int(got["duplicate"].sum())
    return {
        "polls": len(records),
        "samples": span,
        "fetched": fetched,
        "lost": span - fetched,
        "duplicated_polls": dup,
        "lost_fraction": (span - fetched) / span,
        "duplicate_fraction": dup / len(got),
        "latency_mean_s": float(got["latency_s"].mean()),
        "age_mean_s": float(got["age_s"].mean()),
    }


def expected_lost_fraction(poll_interval_s, sample_interval_s):
    """Long-run fraction of samples never fetched, constant intervals: ``max(0, 1 - S/P)``."""
    return max(0.0, 1.0 - sample_interval_s / poll_interval_s)


def expected_duplicate_fraction(poll_interval_s, sample_interval_s):
    """Long-run fraction of polls returning an already fetched sample: ``max(0, 1 - P/S)``."""
    return max(0.0, 1.0 - poll_interval_s / sample_interval_s)


def read_times_from_deliveries(deliveries, poller, sensor):
    """Poll (publish) times and read (delivery) times of ``poller``'s requests at ``sensor``,
    from a simulation's delivery frame, in publish order; undelivered polls are absent."""
    d = deliveries[(deliveries["publisher"] == poller) & (deliveries["subscriber"] == sensor)]
    d = d.sort_values("msg", kind="stable")
    return d["publish_time_s"].to_numpy(), d["delivery_time_s"].to_numpy()
