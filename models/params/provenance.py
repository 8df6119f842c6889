"""Where a parameter value comes from.

Every parameter set carries a :class:`Provenance`; summaries and the
``pubsim run`` table show it, so that nobody mistakes an assumption for a
measurement.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ...sim.errors import ConfigError
from .accuracy import parse_accuracy

__all__ = ["Source", "Provenance", "ASSUMED", "parse_provenance"]


class Source(enum.Enum):
    """Kind of evidence behind a value."""

    MEASURED = "measured"  # measured with pubsim's harness, data file named
    PUBLICATION = "publication"  # taken from a named publication
    ASSUMPTION = "assumption"  # a stated modelling assumption
    PLACEHOLDER = "placeholder"  # a stand-in awaiting calibration: do not trust


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Source, reference, date and free-text note of a parameter set.

    Parameters
    ----------
    source : Source
        Kind of evidence.
    reference : str
        Data file, publication or person stating the assumption.
    date : str
        ISO date the value was measured, published or stated ("" if unknown).
    note : str
        Anything a user should know before trusting the value.
    accuracy : dict or None
        How accurate the calibrated model was on held-out data and the range
        of configurations it was fitted on (:mod:`pubsim.models.params.accuracy`);
        None: no validation.
    """

    source: Source
    reference: str
    date: str = ""
    note: str = ""
    accuracy: dict | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.source, Source):
            raise ConfigError("provenance.source", self.source, f"one of {[s.value for s in Source]}")

    @property
    def is_placeholder(self) -> bool:
        return self.source is Source.PLACEHOLDER

    def __str__(self) -> str:
        text = f"{self.source.value}: {self.reference}"
        if self.date:
            text += f" ({self.date})"
        if self.note:
            text += f" - {self.note}"
        if self.is_placeholder:
            text = "PLACEHOLDER, NOT CALIBRATED - " + text
        return text


ASSUMED = Provenance(source=Source.ASSUMPTION, reference="pubsim default", note="no provenance given for this value")


def parse_provenance(spec: Any, field: str = "provenance") -> Provenance:
    """Read a provenance mapping ``{source, reference, date, note[, accuracy]}``."""
    if spec is None:
        return ASSUMED
    if isinstance(spec, Provenance):
        return spec
    if not isinstance(spec, dict):
        raise ConfigError(field, spec, "a mapping with source, reference, date, note")
    unknown = set(spec) - {"source", "reference", "date", "note", "accuracy"}
    if unknown:
        raise ConfigError(f"{field}.{sorted(unknown)[0]}", spec[sorted(unknown)[0]], "no such field")
    try:
        source = Source(str(spec.get("source", "")).lower())
    except ValueError:
        raise ConfigError(f"{field}.source", spec.get("source"), f"one of {[s.value for s in Source]}") from None
    return Provenance(
        source=source,
        reference=str(spec.get("reference", "")),
        date=str(spec.get("date", "")),
        note=str(spec.get("note", "")),
        accuracy=parse_accuracy(spec.get("accuracy"), f"{field}.accuracy"),
    )
