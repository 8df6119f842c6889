"""Tests of sim.units: parsing and formatting of durations, sizes and rates."""

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pubsim.sim.errors import ConfigError
from pubsim.sim.units import (
    format_duration_s,
    format_rate_Bps,
    parse_duration_s,
    parse_durations_s,
    parse_rate_Bps,
    parse_rate_per_s,
    parse_size_bytes,
    parse_sizes_bytes,
)


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("2ms", 2e-3),
        ("2 ms", 2e-3),
        ("1.5s", 1.5),
        ("100us", 1e-4),
        ("100\u00b5s", 1e-4),
        ("100\u03bcs", 1e-4),
        ("250ns", 250e-9),
        ("3min", 180.0),
        ("1h", 3600.0),
        ("10 s", 10.0),
        ("10sec", 10.0),
        (" 2ms ", 2e-3),
        ("0", 0.0),
        ("2", 2.0),
        (".5s", 0.5),
        ("1e-3s", 1e-3),
        (2, 2.0),
        (0.25, 0.25),
        (np.float64(0.5), 0.5),
        (np.int64(3), 3.0),
    ],
)
def test_parse_duration_exact(text, seconds):
    assert parse_duration_s(text) == seconds
    assert isinstance(parse_duration_s(text), float)


@pytest.mark.parametrize(
    "text, size_bytes",
    [
        ("36B", 36),
        ("36 B", 36),
        ("1KiB", 1024),
        ("1kB", 1000),
        ("1KB", 1000),
        ("1MiB", 2**20),
        ("1MB", 10**6),
        ("2GiB", 2 * 2**30),
        ("1GB", 10**9),
        ("8bit", 1),
        ("8b", 1),
        ("1kbit", 125),
        ("1kb", 125),
        ("1Mbit", 125_000),
        ("1.5KiB", 1536),
        ("1.1kB", 1100),
        ("0.1kB", 100),
        ("64 bytes", 64),
        (0, 0),
        (1500, 1500),
        (2.0, 2),
        ("1500", 1500),
        (np.int64(7), 7),
    ],
)
def test_parse_size_exact(text, size_bytes):
    value = parse_size_bytes(text)
    assert value == size_bytes
    assert type(value) is int


@pytest.mark.parametrize(
    "text, rate_Bps",
    [
        ("100Mbit/s", 12.5e6),
        ("100Mbps", 12.5e6),
        ("100 Mbit/s", 12.5e6),
        ("100 Mbit / s", 12.5e6),
        ("1Gbit/s", 125e6),
        ("1Gbps", 125e6),
        ("10MB/s", 10e6),
        ("10MBps", 10e6),
        ("10MiB/s", 10 * 2**20),
        ("1kbit/s", 125.0),
        ("1kbps", 125.0),
        ("8bit/s", 1.0),
        ("1B/s", 1.0),
        ("1000", 1000.0),
        (1000, 1000.0),
        (0, 0.0),
        ("inf", math.inf),
        ("unlimited", math.inf),
        ("Unlimited", math.inf),
        (math.inf, math.inf),
    ],
)
def test_parse_rate_Bps_exact(text, rate_Bps):
    assert parse_rate_Bps(text) == rate_Bps


def test_bits_and_bytes_differ_by_eight():
    assert parse_rate_Bps("1MB/s") == 8 * parse_rate_Bps("1Mb/s")
    assert parse_rate_Bps("1MBps") == 8 * parse_rate_Bps("1Mbps")
    assert parse_size_bytes("1kB") == 8 * parse_size_bytes("1kbit")


@pytest.mark.parametrize(
    "text, rate_per_s",
    [
        ("1000/s", 1000.0),
        ("1k/s", 1000.0),
        ("2.5/ms", 2500.0),
        ("60/min", 1.0),
        ("10Hz", 10.0),
        ("1kHz", 1000.0),
        ("10 Hz", 10.0),
        ("3600/h", 1.0),
        ("1/us", 1e6),
        ("5", 5.0),
        (5, 5.0),
        (0.5, 0.5),
        (0, 0.0),
    ],
)
def test_parse_rate_per_s_exact(text, rate_per_s):
    assert parse_rate_per_s(text) == rate_per_s


def _raises_naming(field, value):
    """pytest.raises for a ConfigError whose message names field and value."""
    return pytest.raises(ConfigError, match=re.escape(f"{field}: {value!r} is invalid"))


@pytest.mark.parametrize(
    "bad",
    [
        "fast",
        "2 parsecs",
        "",
        "ms",
        "2 m s s",
        None,
        True,
        False,
        [2],
        "1e9999s",
        math.nan,
        math.inf,
        "inf",
        "2MS",
        "2 ks",
    ],
)
def test_parse_duration_rejects_garbage(bad):
    with _raises_naming("link.latency", bad):
        parse_duration_s(bad, field="link.latency")


@pytest.mark.parametrize("bad", [-1, -0.5, "-2ms", "-1 s"])
def test_parse_duration_rejects_negative(bad):
    with _raises_naming("duration", bad) as info:
        parse_duration_s(bad)
    assert info.value.field == "duration"
    assert info.value.value == bad


@pytest.mark.parametrize("bad", ["12bit", "1bit", 0.5, "0.5B", "1.0001kB"])
def test_parse_size_rejects_fractional_bytes(bad):
    with _raises_naming("payload", bad):
        parse_size_bytes(bad, field="payload")


@pytest.mark.parametrize("bad", ["big", "1kiB", "1 parsec", "", None, True, -1, "-1KiB", "1MB/s", math.inf, "1mB"])
def test_parse_size_rejects_garbage(bad):
    with _raises_naming("size", bad):
        parse_size_bytes(bad)


@pytest.mark.parametrize("bad", [2**53 + 1, 10**30, "1e30B", "9EB"])
def test_parse_size_refuses_sizes_int64_arrays_cannot_sum(bad):
    """Found by the fuzzer: overhead_bytes = 10**30 overflowed a C long inside a link's service time."""
    with _raises_naming("size", bad):
        parse_size_bytes(bad)


@pytest.mark.parametrize(
    "parse, text",
    [(parse_size_bytes, "B"), (parse_duration_s, "s"), (parse_rate_Bps, "B/s"), (parse_rate_per_s, "/s")],
)
def test_a_number_of_thousands_of_digits_is_refused_not_converted(parse, text):
    """Found by the fuzzer: 'const(1000...0)' with 5,001 digits raised Fraction's ValueError."""
    with pytest.raises(ConfigError) as e:
        parse("1" + "0" * 5000 + text, "f")
    assert e.value.field == "f" and "at most 100 characters" in str(e.value) and len(str(e.value)) < 600


def test_parse_size_accepts_the_bound():
    assert parse_size_bytes(2**53) == 2**53 and parse_size_bytes("8PiB") == 2**53


@pytest.mark.parametrize(
    "bad", ["fast", "100Mbit", "10mbps", "", None, True, -1, "-1Mbit/s", "1Mbit/ms", math.nan, "-inf"]
)
def test_parse_rate_Bps_rejects_garbage(bad):
    with _raises_naming("links.l1.bandwidth", bad):
        parse_rate_Bps(bad, field="links.l1.bandwidth")


@pytest.mark.parametrize(
    "bad", ["often", "10", "-1/s", -3, "1/parsec", "", None, True, math.inf, "inf", "1 Hz Hz", "1m/s"]
)
def test_parse_rate_per_s_rejects_garbage(bad):
    if bad == "10":
        assert parse_rate_per_s(bad, field="publisher.rate") == 10.0
        return
    with _raises_naming("publisher.rate", bad):
        parse_rate_per_s(bad, field="publisher.rate")


def test_error_message_is_one_line():
    with pytest.raises(ConfigError) as info:
        parse_duration_s("2 parsecs", field="d")
    assert "\n" not in str(info.value)
    assert info.value.expected


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0.0021, "2.1 ms"),
        (0.0, "0 s"),
        (1.5, "1.5 s"),
        (2.5e-7, "250 ns"),
        (1e-4, "100 us"),
        (90.0, "1.5 min"),
        (7200.0, "2 h"),
        (0.001, "1 ms"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration_s(seconds) == text


@pytest.mark.parametrize(
    "rate_Bps, text",
    [
        (12.5e6, "100 Mbit/s"),
        (125e6, "1 Gbit/s"),
        (125.0, "1 kbit/s"),
        (1.0, "8 bit/s"),
        (0.0, "0 bit/s"),
        (math.inf, "unlimited"),
        (1.25e12, "10 Tbit/s"),
    ],
)
def test_format_rate_Bps(rate_Bps, text):
    assert format_rate_Bps(rate_Bps) == text


def test_format_digits():
    assert format_duration_s(1 / 3, digits=2) == "330 ms"
    assert format_duration_s(1 / 3, digits=6) == "333.333 ms"


@pytest.mark.parametrize("text", ["2.1 ms", "100 us", "1.5 min", "250 ns", "3 h"])
def test_duration_text_round_trip(text):
    assert format_duration_s(parse_duration_s(text)) == text


@pytest.mark.parametrize("text", ["100 Mbit/s", "1 Gbit/s", "1 kbit/s", "unlimited"])
def test_rate_text_round_trip(text):
    assert format_rate_Bps(parse_rate_Bps(text)) == text


_durations_s = st.floats(min_value=0.0, max_value=1e12, allow_nan=False, allow_infinity=False)
_rates_Bps = st.floats(min_value=0.0, max_value=1e15, allow_nan=False, allow_infinity=False)


@given(_durations_s)
def test_duration_format_parse_property(x):
    assert math.isclose(parse_duration_s(format_duration_s(x)), x, rel_tol=5e-4, abs_tol=1e-300)


@given(_durations_s, st.integers(min_value=1, max_value=17))
def test_duration_format_precision_property(x, digits):
    y = parse_duration_s(format_duration_s(x, digits=digits))
    assert math.isclose(y, x, rel_tol=max(0.5 * 10.0 ** (1 - digits), 4e-16), abs_tol=1e-300)


@given(_rates_Bps)
def test_rate_format_parse_property(x):
    assert math.isclose(parse_rate_Bps(format_rate_Bps(x)), x, rel_tol=5e-4, abs_tol=1e-300)


@given(st.integers(min_value=0, max_value=2**53), st.sampled_from(["", "B", " B", " bytes"]))
def test_integer_sizes_are_exact(n, unit):
    assert parse_size_bytes(f"{n}{unit}") == n


@given(st.integers(min_value=0, max_value=2**40))
def test_kibibytes_are_exact(n):
    assert parse_size_bytes(f"{n}KiB") == 1024 * n
    assert parse_size_bytes(f"{8 * n}bit") == n


_ITEMS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.booleans(),
    st.sampled_from(["2ms", "1KiB", "x", "-1", "3"]),
)


def _item_by_item(parse, values, field):
    out = []
    for i, v in enumerate(values):
        try:
            out.append(parse(v, f"{field}[{i}]"))
        except ConfigError as err:
            return str(err)
    return tuple(out)


def _listed(parse_list, values, field):
    try:
        return parse_list(values, field)
    except ConfigError as err:
        return str(err)


@pytest.mark.parametrize(
    "parse_list, parse", [(parse_durations_s, parse_duration_s), (parse_sizes_bytes, parse_size_bytes)]
)
@given(values=st.lists(_ITEMS, max_size=6), as_array=st.booleans())
def test_list_readers_read_every_list_as_its_items_read_one_by_one(parse_list, parse, values, as_array):
    """Arrays of numbers take the vectorised path, anything else the item reader: same values, same error."""
    if as_array:
        try:
            values = np.asarray(values)
        except (ValueError, OverflowError):
            return
        if values.dtype.kind not in "iufb":
            return
    want = _item_by_item(parse, list(values), "f")
    got = _listed(parse_list, values, "f")
    assert got == want
    if isinstance(got, tuple):
        assert [type(x) for x in got] == [type(x) for x in want]
        assert [math.copysign(1, x) for x in got] == [math.copysign(1, x) for x in want]  # no -0.0


def test_list_readers_name_the_bad_item():
    with pytest.raises(ConfigError) as err:
        parse_durations_s(np.array([0.0, 1.0, -2.0]), "schedule_time_s")
    assert err.value.field == "schedule_time_s[2]"
    with pytest.raises(ConfigError) as err:
        parse_sizes_bytes([1, 2.5], "schedule_size_bytes")
    assert err.value.field == "schedule_size_bytes[1]"
    assert parse_sizes_bytes(np.array([2**53], dtype=np.uint64), "s") == (2**53,)
    with pytest.raises(ConfigError):
        parse_sizes_bytes(np.array([2**53 + 2], dtype=np.uint64), "s")
