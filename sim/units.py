"""Parse and format human-readable quantities at the edges of the program.

Configuration files and the command line give durations, sizes and rates as
strings such as ``"2ms"``, ``"1KiB"`` or ``"100Mbit/s"``. The parsers here turn
them into SI values (seconds, bytes, bytes per second, events per second) once,
so that everything inside the simulator works with plain numbers. Bad input
raises :class:`pubsim.sim.errors.ConfigError` naming the field and the value.

Prefixes follow SI (k = 10^3, M = 10^6, ...; ``K`` is accepted as ``k``) and
IEC 80000-13 (Ki = 2^10, Mi = 2^20, ...). In sizes and bandwidths a lowercase
``b`` or ``bit`` means bits and an uppercase ``B`` means bytes (IEC 80000-13);
``bps`` is bits per second and ``Bps`` bytes per second. A lowercase ``m`` is
never a mega prefix: ``"10mbps"`` is rejected rather than guessed.

Numbers are converted with :class:`fractions.Fraction`, so ``"100us"`` is the
float nearest to 1e-4 s and ``"1.1kB"`` is exactly 1100 bytes.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from .errors import ConfigError

__all__ = [
    "parse_duration_s",
    "parse_size_bytes",
    "parse_durations_s",
    "parse_sizes_bytes",
    "parse_rate_Bps",
    "parse_rate_per_s",
    "format_duration_s",
    "format_rate_Bps",
]

# A decimal number with an optional exponent of at most three digits, so that
# Fraction never builds a huge integer from input like "1e999999999".
_QUANTITY = re.compile(
    r"^\s*(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?)"
    r"\s*(?P<unit>.*?)\s*$",
    re.DOTALL,
)

_DURATION_UNITS_S = {
    "": Fraction(1),
    "s": Fraction(1),
    "sec": Fraction(1),
    "ms": Fraction(1, 10**3),
    "us": Fraction(1, 10**6),
    "\u00b5s": Fraction(1, 10**6),
    "\u03bcs": Fraction(1, 10**6),
    "ns": Fraction(1, 10**9),
    "min": Fraction(60),
    "h": Fraction(3600),
}

_SI_PREFIXES = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
}
_IEC_PREFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_PREFIXES = {**_SI_PREFIXES, **_IEC_PREFIXES}

_BYTE_SYMBOLS = {"B": Fraction(1), "b": Fraction(1, 8), "bit": Fraction(1, 8)}
_WORD_SIZES_BYTES = {
    "": Fraction(1),
    "byte": Fraction(1),
    "bytes": Fraction(1),
    "bits": Fraction(1, 8),
}


def _size_units_bytes() -> dict[str, Fraction]:
    """Table unit symbol -> bytes, e.g. ``"KiB"`` -> 1024, ``"kbit"`` -> 125."""
    table = dict(_WORD_SIZES_BYTES)
    for prefix, factor in _PREFIXES.items():
        for symbol, size_bytes in _BYTE_SYMBOLS.items():
            table[prefix + symbol] = factor * size_bytes
    return table


def _rate_units_Bps() -> dict[str, Fraction]:
    """Table unit symbol -> bytes per second, e.g. ``"Mbit/s"`` -> 125000."""
    table = {"": Fraction(1)}
    for prefix, factor in _PREFIXES.items():
        for symbol, size_bytes in _BYTE_SYMBOLS.items():
            table[f"{prefix}{symbol}/s"] = factor * size_bytes
        table[f"{prefix}bps"] = factor * Fraction(1, 8)
        table[f"{prefix}Bps"] = Fraction(factor)
    return table


def _event_rate_units_per_s() -> dict[str, Fraction]:
    """Table unit -> events per second, e.g. ``"k/s"`` -> 1000, ``"/min"`` -> 1/60."""
    table = {"": Fraction(1)}
    for prefix in ("", "k", "K", "M", "G"):
        factor = _SI_PREFIXES[prefix]
        table[f"{prefix}Hz"] = Fraction(factor)
        for symbol, duration_s in _DURATION_UNITS_S.items():
            if symbol:
                table[f"{prefix}/{symbol}"] = factor / duration_s
    return table


_SIZE_UNITS_BYTES = _size_units_bytes()
#: The longest number accepted in a quantity such as ``36B`` (digits, sign, point and exponent).
MAX_NUMBER_CHARS = 100
#: The largest size accepted (bytes): sizes are summed in int64 arrays (payload + framing + overhead).
MAX_SIZE_BYTES = 2**53
_RATE_UNITS_BPS = _rate_units_Bps()
_EVENT_RATE_UNITS_PER_S = _event_rate_units_per_s()
_UNLIMITED_WORDS = {"inf", "infinity", "unlimited"}


def _is_real_number(value: object) -> bool:
    """True for int, float and numpy scalars, False for bool and everything else."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _split_quantity(value: str, field: str, units: dict[str, Fraction], expected: str) -> tuple[Fraction, Fraction]:
    """Split ``"2.5 ms"`` into an exact number and the factor of its unit.

    Parameters
    ----------
    value : str
        Text to parse; spaces inside the unit (``"Mbit / s"``) are ignored.
    field, expected : str
        Used in the :class:`ConfigError` raised for unreadable text.
    units : dict
        Unit symbol -> SI factor (a Fraction).

    Returns
    -------
    (Fraction, Fraction)
        The number and the SI value of one unit.
    """
    match = _QUANTITY.match(value)
    unit = "".join(match.group("unit").split()) if match else None
    if match is None or unit is None or unit not in units:
        raise ConfigError(field, value, expected)
    if len(match.group("number")) > MAX_NUMBER_CHARS:  # Fraction() of 5,000 digits raises ValueError (a fuzz finding)
        raise ConfigError(field, value, f"a number of at most {MAX_NUMBER_CHARS} characters before its unit")
    return Fraction(match.group("number")), units[unit]


def _exact(value: Any, field: str, units: dict[str, Fraction], expected: str) -> Fraction:
    """Exact SI value of a number or string; numbers are already in SI units."""
    if _is_real_number(value):
        if math.isnan(value) or math.isinf(value):
            raise ConfigError(field, value, expected)
        return Fraction(value) if isinstance(value, numbers.Rational) else Fraction(float(value))
    if not isinstance(value, str):
        raise ConfigError(field, value, expected)
    number, factor = _split_quantity(value, field, units, expected)
    return number * factor


def _non_negative(exact: Fraction, value: object, field: str) -> Fraction:
    """Return ``exact`` unchanged, or raise if it is below zero."""
    if exact < 0:
        raise ConfigError(field, value, "must be >= 0")
    return exact


def _finite_float(exact: Fraction, value: object, field: str, expected: str) -> float:
    """Nearest float to ``exact``; raise if it overflows to infinity."""
    try:
        return float(exact)
    except OverflowError:
        raise ConfigError(field, value, expected) from None


def parse_duration_s(value: Any, field: str = "duration") -> float:
    """Read a duration in seconds.

    Parameters
    ----------
    value : int, float or str
        A number (already seconds) or a number followed by one of ``ns``,
        ``us`` (also ``µs``), ``ms``, ``s``, ``min``, ``h``, with or without a
        space: ``"2ms"``, ``"2 ms"``, ``"1.5s"``, ``"3min"``.
    field : str
        Name of the field, used in error messages.

    Returns
    -------
    float
        Duration, s; finite and >= 0.

    Raises
    ------
    ConfigError
        If ``value`` is not a duration, is negative, or is not finite.
    """
    expected = "a duration >= 0 such as 2.5, '2ms', '100us', '1.5 s', '3min', '1h'"
    exact = _non_negative(_exact(value, field, _DURATION_UNITS_S, expected), value, field)
    return _finite_float(exact, value, field, expected)


def parse_size_bytes(value: Any, field: str = "size") -> int:
    """Read a size in whole bytes.

    Parameters
    ----------
    value : int, float or str
        A number of bytes, or a number followed by a unit: ``B``, ``kB``/``KB``
        (10^3 B), ``MB``, ``GB``, ``KiB`` (2^10 B), ``MiB``, ``GiB``, or a bit
        unit ``bit``/``b``, ``kbit``/``kb``, ``Mbit``, ... (1 bit = 1/8 B).
    field : str
        Name of the field, used in error messages.

    Returns
    -------
    int
        Size, bytes; >= 0.

    Raises
    ------
    ConfigError
        If ``value`` is not a size, is negative, or is not a whole number of
        bytes (e.g. ``"12bit"`` or ``0.5``).
    """
    expected = "a whole number of bytes >= 0 such as 36, '36B', '1KiB', '1.5MB', '8bit'"
    exact = _non_negative(_exact(value, field, _SIZE_UNITS_BYTES, expected), value, field)
    if exact.denominator != 1:
        raise ConfigError(field, value, f"a whole number of bytes, not {float(exact)!r} bytes")
    if exact > MAX_SIZE_BYTES:
        raise ConfigError(field, value, f"a size up to 2**53 bytes ({MAX_SIZE_BYTES:,} B, 8 PiB)")
    return int(exact)


def _real_array(values: Any) -> np.ndarray | None:
    """``values`` as a 1-d int or float array when every item is a plain real number, else None.

    Bools, text, nested lists and integers beyond int64 give None, so that the
    item-by-item reader sees (and names) them.
    """
    if isinstance(values, np.ndarray):
        arr = values
    else:
        if any(isinstance(v, (bool, np.bool_)) for v in values):
            return None
        try:
            arr = np.asarray(values)
        except (ValueError, TypeError, OverflowError):
            return None
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        return None
    return arr


def _read_list(
    values: Any, field: str, fast: Callable[[np.ndarray], tuple | None], read: Callable[[Any, str], Any]
) -> tuple:
    """Read a list with ``fast`` (whole arrays of numbers) or else ``read`` item by item (errors name ``field[i]``)."""
    arr = _real_array(values)
    out = fast(arr) if arr is not None else None
    if out is None:
        out = tuple(read(v, f"{field}[{i}]") for i, v in enumerate(values))
    return out


def _fast_durations(arr: np.ndarray) -> tuple | None:
    x = arr.astype(float)
    if not (np.all(np.isfinite(x)) and np.all(x >= 0)):
        return None
    return tuple((x + 0.0).tolist())  # + 0.0: -0.0 reads as 0.0, as parse_duration_s gives


def _fast_sizes(arr: np.ndarray) -> tuple | None:
    if arr.dtype.kind == "f" and not (np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr))):
        return None
    if not (np.all(arr >= 0) and np.all(arr <= MAX_SIZE_BYTES)):
        return None
    return tuple(arr.astype(np.int64).tolist())


def parse_durations_s(values: Any, field: str = "durations") -> tuple[float, ...]:
    """Read a list of durations in seconds, as :func:`parse_duration_s` reads each item.

    A list (or array) of plain numbers is checked as one array (a trace of
    millions of send times reads in milliseconds); any other list is read
    item by item, and a bad item raises a :class:`ConfigError` naming
    ``field[i]``.

    Returns
    -------
    tuple of float
        Durations, s; finite and >= 0.
    """
    return _read_list(values, field, _fast_durations, parse_duration_s)


def parse_sizes_bytes(values: Any, field: str = "sizes") -> tuple[int, ...]:
    """Read a list of sizes in whole bytes, as :func:`parse_size_bytes` reads each item.

    Plain numbers are checked as one array, anything else item by item (a
    bad item raises a :class:`ConfigError` naming ``field[i]``).

    Returns
    -------
    tuple of int
        Sizes, bytes; >= 0.
    """
    return _read_list(values, field, _fast_sizes, parse_size_bytes)


def parse_rate_Bps(value: Any, field: str = "bandwidth") -> float:
    """Read a bandwidth in bytes per second.

    Parameters
    ----------
    value : int, float or str
        A number of bytes per second; a size unit (see
        :func:`parse_size_bytes`) followed by ``/s`` (``"100Mbit/s"``,
        ``"10MB/s"``, ``"10MiB/s"``); ``bps``/``Bps`` with a prefix
        (``"100Mbps"`` = 100e6 bit/s = 12.5e6 B/s, ``"10MBps"`` = 10e6 B/s);
        or ``"inf"``/``"unlimited"`` (also ``math.inf``) for no limit.
    field : str
        Name of the field, used in error messages.

    Returns
    -------
    float
        Bandwidth, bytes/s; >= 0, possibly ``math.inf``.

    Raises
    ------
    ConfigError
        If ``value`` is not a bandwidth or is negative.
    """
    if _is_unlimited(value):
        return math.inf
    expected = "a bandwidth >= 0 such as 1e6 (bytes/s), '100Mbit/s', '100Mbps', '10MB/s', '10MiB/s' or 'unlimited'"
    exact = _non_negative(_exact(value, field, _RATE_UNITS_BPS, expected), value, field)
    return _finite_float(exact, value, field, expected)


def _is_unlimited(value: object) -> bool:
    """True for ``math.inf`` and the words ``inf``/``infinity``/``unlimited``."""
    if isinstance(value, str):
        return value.strip().lower() in _UNLIMITED_WORDS
    return _is_real_number(value) and value == math.inf


def parse_rate_per_s(value: Any, field: str = "rate") -> float:
    """Read an event rate in events per second.

    Parameters
    ----------
    value : int, float or str
        A number of events per second; a count over a duration unit
        (``"1000/s"``, ``"1k/s"``, ``"2.5/ms"``, ``"60/min"``, ``"5/h"``); or
        hertz (``"10Hz"``, ``"1kHz"``, ``"2MHz"``).
    field : str
        Name of the field, used in error messages.

    Returns
    -------
    float
        Rate, 1/s; finite and >= 0.

    Raises
    ------
    ConfigError
        If ``value`` is not a rate, is negative or is not finite.
    """
    expected = "a rate >= 0 such as 1000, '1000/s', '1k/s', '2.5/ms', '60/min', '10Hz', '1kHz'"
    exact = _non_negative(_exact(value, field, _EVENT_RATE_UNITS_PER_S, expected), value, field)
    return _finite_float(exact, value, field, expected)


# Formatting: (threshold, factor, symbol); the first row whose threshold is
# <= |x| is used, the last row catches everything smaller.
_DURATION_SCALE = (
    (3600.0, 3600.0, "h"),
    (60.0, 60.0, "min"),
    (1.0, 1.0, "s"),
    (1e-3, 1e-3, "ms"),
    (1e-6, 1e-6, "us"),
    (0.0, 1e-9, "ns"),
)
_BIT_RATE_SCALE = (
    (1e12, 1e12, "Tbit/s"),
    (1e9, 1e9, "Gbit/s"),
    (1e6, 1e6, "Mbit/s"),
    (1e3, 1e3, "kbit/s"),
    (0.0, 1.0, "bit/s"),
)


def _format_scaled(x: float, scale: Sequence[tuple[float, float, str]], digits: int) -> str:
    """Write ``x`` in the largest unit of ``scale`` not exceeding it.

    Parameters
    ----------
    x : float
        Value in the base unit of ``scale``.
    scale : tuple of (float, float, str)
        Rows (threshold, factor, symbol), largest first.
    digits : int
        Significant digits.

    Returns
    -------
    str
        For example ``"2.1 ms"``.
    """
    for threshold, factor, symbol in scale:  # noqa: B007 (factor and symbol are used after the loop)
        if abs(x) >= threshold:
            break
    return f"{_significant_text(x / factor, digits)} {symbol}"


def _significant_text(x: float, digits: int) -> str:
    """Shortest text of ``x`` rounded to ``digits`` significant digits.

    ``330.0`` is written ``"330"`` (not ``"3.3e+02"`` as ``format(x, ".2g")``
    would); exponents appear only for very large or small numbers.
    """
    text = repr(float(f"{x:.{digits}g}"))
    return text[:-2] if text.endswith(".0") else text


def format_duration_s(x: float, digits: int = 4) -> str:
    """Write a duration for people, e.g. ``0.0021`` -> ``"2.1 ms"``.

    Parameters
    ----------
    x : float
        Duration, s.
    digits : int
        Significant digits (default 4, so the relative rounding error is at
        most 5e-4).

    Returns
    -------
    str
        Number and unit (``ns``, ``us``, ``ms``, ``s``, ``min``, ``h``),
        readable by :func:`parse_duration_s` when ``x`` is finite and >= 0.
    """
    if not math.isfinite(x):
        return f"{x} s"
    if x == 0:
        return "0 s"
    return _format_scaled(float(x), _DURATION_SCALE, digits)


def format_rate_Bps(x: float, digits: int = 4) -> str:
    """Write a bandwidth in bits per second, e.g. ``12.5e6`` -> ``"100 Mbit/s"``.

    Parameters
    ----------
    x : float
        Bandwidth, bytes/s (converted to bit/s as 8 * x).
    digits : int
        Significant digits (default 4).

    Returns
    -------
    str
        Number and unit (``bit/s``, ``kbit/s``, ``Mbit/s``, ``Gbit/s``,
        ``Tbit/s``), or ``"unlimited"`` for ``math.inf``; readable by
        :func:`parse_rate_Bps` when ``x`` >= 0.
    """
    if x == math.inf:
        return "unlimited"
    if math.isnan(x):
        return "nan bit/s"
    return _format_scaled(8.0 * float(x), _BIT_RATE_SCALE, digits)
