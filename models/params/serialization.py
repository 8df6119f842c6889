"""Serialization as a model stage: wire size and CPU cost per message format.

A format changes two things (SYSTEMS.md §1: per-message cost of many
middlewares is dominated by (de)serialization; §6: string vs binary):

* the wire size: ``size_ratio`` = encoded size / binary size; the
  publisher's payload size is multiplied by it at the source, so every link
  and every per-byte broker cost sees the encoded size;
* CPU time: encoding at the publisher, ``encode_cost_s +
  encode_cost_per_byte_s x encoded size``, a FIFO station (the publisher's
  CPU) before its uplink; decoding at the subscriber, ``decode_cost_s +
  decode_cost_per_byte_s x encoded size``, added to its processing time.

``serialization=None`` on a client (the default) leaves it exactly as
without this stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...sim.errors import ConfigError
from .. import presets
from .mapping import READERS, check_fields, from_mapping
from .provenance import ASSUMED, Provenance

__all__ = ["SerializationParams", "FORMATS", "parse_serialization", "link_ceiling_per_s"]

FORMATS = ("binary", "text", "json", "xml")


@dataclass(frozen=True, kw_only=True)
class SerializationParams:
    """A message format.

    Parameters
    ----------
    format : str
        ``binary``, ``text``, ``json`` or ``xml`` (a label; the numbers below
        make the difference).
    size_ratio : float
        Encoded size / binary size (> 0); e.g. 5 for text vs binary, an
        assumption taken as the example of SYSTEMS.md §6.
    encode_cost_s, encode_cost_per_byte_s : float
        Publisher CPU per message, s, and per encoded byte, s/byte.
    decode_cost_s, decode_cost_per_byte_s : float
        Subscriber CPU per message, s, and per encoded byte, s/byte.
    provenance : Provenance
    """

    format: str = field(default="binary", metadata={"unit": "choice", "choices": FORMATS})
    size_ratio: float = field(default=1.0, metadata={"unit": "float"})
    encode_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    encode_cost_per_byte_s: float = field(default=0.0, metadata={"unit": "float"})
    decode_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    decode_cost_per_byte_s: float = field(default=0.0, metadata={"unit": "float"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.size_ratio > 0:
            raise ConfigError("size_ratio", self.size_ratio, "a ratio > 0 (encoded / binary size)")

    def encode_s(self, encoded_bytes: float) -> float:
        """Publisher CPU time for messages of ``encoded_bytes``, s."""
        return self.encode_cost_s + self.encode_cost_per_byte_s * encoded_bytes

    def decode_s(self, encoded_bytes: float) -> float:
        """Subscriber CPU time for messages of ``encoded_bytes``, s."""
        return self.decode_cost_s + self.decode_cost_per_byte_s * encoded_bytes

    @property
    def has_encode(self) -> bool:
        return self.encode_cost_s > 0 or self.encode_cost_per_byte_s > 0

    @property
    def has_decode(self) -> bool:
        return self.decode_cost_s > 0 or self.decode_cost_per_byte_s > 0


def parse_serialization(value: Any, path: str = "serialization") -> SerializationParams | None:
    """A :class:`SerializationParams` from an instance, a preset name
    (``text``), or a mapping (optionally with ``preset``); None stays None."""

    if value is None or isinstance(value, SerializationParams):
        return value
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, dict):
        raise ConfigError(path, value, "a serialization preset name or a mapping of SerializationParams fields")
    try:
        spec = presets.apply("serialization", value)
    except ConfigError as err:
        field_name = f"{path}.preset" if err.field == "serialization.preset" else f"{path}.{err.field}"
        raise ConfigError(field_name, err.value, err.expected) from None
    return from_mapping(SerializationParams, spec, path)


READERS["serialization"] = parse_serialization


def link_ceiling_per_s(
    binary_bytes: float, bandwidth_Bps: float, *, size_ratio: float = 1.0, overhead_bytes: float = 0.0
) -> float:
    """Messages per second a link can carry: ``bandwidth / (binary x ratio + overhead)``.

    SYSTEMS.md §6: a 100 Mbit/s link carries 12,500 binary messages of 1 kB
    per second; with text 5x larger (assumed ratio), 2,500.
    """
    return bandwidth_Bps / (binary_bytes * size_ratio + overhead_bytes)
