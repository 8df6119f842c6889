"""What a paper run gives back, and where finished points are kept.

The library never writes files: a run reads and records finished points
through a *store* (``get(key) -> dict or None``, ``put(key, record)``) and
returns tables and figures; ``pubsim paper run`` gives it a store of JSON
files in the output folder (so a second run skips what is done) and writes
the tables as CSV and the figures as PNG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["PaperResult", "MemoryStore", "Counter", "plain"]


@dataclass(kw_only=True)
class PaperResult:
    """Predicted tables and figures of one paper folder.

    Attributes
    ----------
    tables : dict of str -> pandas.DataFrame
        By file stem (``throughput_scaleup`` -> ``tables/throughput_scaleup.csv``).
    figures : dict of str -> matplotlib.figure.Figure
        By file stem (``figures/<stem>.png``).
    headline : list of str
        Lines the command prints: the predicted headline numbers.
    profiles : dict of str -> dict
        Broker profiles calibrated from the folder's evidence (preset mapping
        with its ``evidence`` record), by broker kind.
    ran, skipped : int
        Points simulated now, and points found finished in the store.
    """

    tables: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    headline: list = field(default_factory=list)
    profiles: dict = field(default_factory=dict)
    ran: int = 0
    skipped: int = 0


class MemoryStore:
    """A store of finished points in a dict (tests, notebooks)."""

    def __init__(self):
        self.records = {}

    def get(self, key):
        return self.records.get(key)

    def put(self, key, record):
        self.records[key] = record


@dataclass
class Counter:
    """Points run and skipped (carried into :class:`PaperResult`)."""

    ran: int = 0
    skipped: int = 0

    def cached(self, store, key, compute):
        """The stored record of ``key``, else ``compute()`` stored under it."""
        rec = store.get(key)
        if rec is not None:
            self.skipped += 1
            return rec
        rec = plain(compute())
        store.put(key, rec)
        self.ran += 1
        return rec


def plain(record):
    """A record with plain JSON values (numpy scalars as Python numbers, NaN as None)."""
    out = {}
    for k, v in record.items():
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[str(k)] = v
    return out
