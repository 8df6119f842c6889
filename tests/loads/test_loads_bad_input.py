"""Bad input to the trace readers never crashes, hangs or eats memory (issue 17).

Every file here is made by the test in tmp_path: bad records of each kind
(counted per reason and skipped), gzip files cut short or bit-flipped, pcap
length fields claiming gigabytes (never allocated), MQTT remaining lengths
of four 0xFF bytes, and random byte mutations of small valid files, which
either parse (with a skip summary) or raise one ConfigError.
"""

from __future__ import annotations

import argparse
import gzip
import json
import struct
import tempfile
import tracemalloc
from pathlib import Path

import dpkt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pubsim.models.loads import trace as trace_module
from pubsim.models.loads.cli import add_commands
from pubsim.models.loads.readers import MAX_FRAME_BYTES, read_campusiot, read_mqtt_pcap
from pubsim.models.loads.trace import Trace
from pubsim.sim.errors import ConfigError
from tests.loads.test_loads_readers import BROKER, A, PcapWriter, mqtt_connect, mqtt_publish

T0_MS = 1_687_511_428_896
MiB = 1 << 20


def _good(i):
    return json.dumps({"devEUI": "AA01", "_timestamp": T0_MS + 1000 * i, "fCnt": i, "data": "00ff"})


def _ndjson(tmp_path, lines, name="t.ndjson.gz"):
    path = tmp_path / name
    with gzip.open(path, "wb") as fh:
        fh.write(("\n".join(lines) + "\n").encode("utf-8", errors="surrogateescape"))
    return path


@pytest.fixture
def peak_bytes():
    """Peak Python allocation (tracemalloc) during the calls made inside the ``with`` block."""

    class Peak:
        value = 0

        def __enter__(self):
            tracemalloc.start()
            return self

        def __exit__(self, *exc):
            self.value = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()

    return Peak()


# --------------------------------------------------------------------------- CampusIoT: one bad record of each kind


def _rec(**raw):
    """A JSON object line from raw JSON value texts (NaN, 1e400, ... pass through as written)."""
    raw = {"devEUI": '"aa"', **raw}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in raw.items()) + "}"


TS = str(T0_MS)
BAD_RECORDS = {
    # _timestamp
    "ts beyond 64 bits": (_rec(_timestamp=str(2**70)), "_timestamp out of range"),
    "ts beyond 2**53": (_rec(_timestamp=str(2**53 + 2)), "_timestamp out of range"),
    "ts negative": (_rec(_timestamp="-5"), "_timestamp out of range"),
    "ts NaN": (_rec(_timestamp="NaN"), "_timestamp not finite"),
    "ts Infinity": (_rec(_timestamp="Infinity"), "_timestamp not finite"),
    "ts -Infinity": (_rec(_timestamp="-Infinity"), "_timestamp not finite"),
    "ts 1e400": (_rec(_timestamp="1e400"), "_timestamp not finite"),
    "ts string": (_rec(_timestamp=f'"{TS}"'), "no numeric _timestamp"),
    "ts bool": (_rec(_timestamp="true"), "no numeric _timestamp"),
    "ts list": (_rec(_timestamp="[1]"), "no numeric _timestamp"),
    "ts missing": (_rec(), "no numeric _timestamp"),
    # fCnt
    "fCnt beyond 64 bits": (_rec(_timestamp=TS, fCnt=str(2**65)), "fCnt out of range"),
    "fCnt beyond 32 bits": (_rec(_timestamp=TS, fCnt=str(2**32)), "fCnt out of range"),
    "fCnt negative": (_rec(_timestamp=TS, fCnt="-1"), "fCnt out of range"),
    "fCnt NaN": (_rec(_timestamp=TS, fCnt="NaN"), "fCnt not finite"),
    "fCnt Infinity": (_rec(_timestamp=TS, fCnt="Infinity"), "fCnt not finite"),
    "fCnt fraction": (_rec(_timestamp=TS, fCnt="1.5"), "fCnt not an integer"),
    "fCnt string": (_rec(_timestamp=TS, fCnt='"12"'), "fCnt not an integer"),
    "fCnt bool": (_rec(_timestamp=TS, fCnt="true"), "fCnt not an integer"),
    # payload
    "size beyond 64 bits": (_rec(_timestamp=TS, payload_size=str(2**80)), "payload_size out of range"),
    "size negative": (_rec(_timestamp=TS, payload_size="-3"), "payload_size out of range"),
    "size NaN": (_rec(_timestamp=TS, payload_size="NaN"), "payload_size not finite"),
    "size Infinity": (_rec(_timestamp=TS, payload_size="Infinity"), "payload_size not finite"),
    "size string": (_rec(_timestamp=TS, payload_size='"abc"'), "undecodable payload"),
    "size list": (_rec(_timestamp=TS, payload_size="[1]"), "undecodable payload"),
    "data number": (_rec(_timestamp=TS, data="12"), "undecodable payload"),
    "data not base64": (_rec(_timestamp=TS, data='"###"'), "undecodable payload"),
    # device, JSON itself
    "devEUI number": (_rec(devEUI="5", _timestamp=TS), "no devEUI"),
    "not JSON": ("{not json", "not JSON"),
    "integer of 5000 digits": (_rec(_timestamp="9" * 5000), "not JSON"),
    "nested 100000 deep": ("[" * 100_000 + "]" * 100_000, "not JSON"),
    "not an object": ("[1, 2]", "not a JSON object"),
    "undecodable bytes": (_rec(devEUI='"\udcff"', _timestamp="NaN"), "_timestamp not finite"),  # byte 0xff
}


@pytest.mark.parametrize("kind", list(BAD_RECORDS))
def test_each_bad_record_kind_is_counted_and_skipped(tmp_path, kind):
    bad, reason = BAD_RECORDS[kind]
    trace, s = read_campusiot(_ndjson(tmp_path, [_good(0), bad, _good(1)]))
    assert len(trace) == 2 and s.records == 2 and s.lines == 3
    assert s.bad_lines == 1 and dict(s.bad_reasons) == {reason: 1}
    (lineno, why, detail), *_ = s.bad_examples
    assert (lineno, why) == (2, reason)
    assert len(detail) <= 100  # values shortened: a 5000-digit integer is not printed whole
    assert s.devices["aa01"]["frames"] == 2 and s.devices["aa01"]["lost"] == 0
    assert f"line 2 ({reason}" in s.first_skipped()


def test_many_bad_kinds_in_one_file_are_counted_per_reason(tmp_path):
    lines = [_good(i) for i in range(3)] + [bad for bad, _ in BAD_RECORDS.values()]
    _, s = read_campusiot(_ndjson(tmp_path, lines))
    expected = {}
    for _, reason in BAD_RECORDS.values():
        expected[reason] = expected.get(reason, 0) + 1
    assert dict(s.bad_reasons) == expected
    assert s.bad_lines == len(BAD_RECORDS) and s.records == 3
    assert len(s.bad_examples) == 5 and [e[0] for e in s.bad_examples] == [4, 5, 6, 7, 8]


def test_a_line_over_the_cap_is_skipped_without_holding_it(tmp_path, peak_bytes):
    """A gzip member inflating to 64 MiB of one line costs a few MiB, not 64."""
    path = tmp_path / "bomb.ndjson.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write((_good(0) + "\n").encode())
        fh.write(b'{"devEUI": "aa", "pad": "')
        chunk = b" " * MiB
        for _ in range(64):
            fh.write(chunk)
        fh.write(b'"}\n' + (_good(1) + "\n").encode())
    assert path.stat().st_size < MiB
    with peak_bytes:
        trace, s = read_campusiot(path)
    assert len(trace) == 2 and dict(s.bad_reasons) == {"line too long": 1}
    assert s.bad_examples[0][:2] == (2, "line too long") and s.bad_examples[0][2].startswith(
        f"{64 * MiB + 28} bytes"
    )  # with its 28 other bytes and line end
    assert peak_bytes.value < 16 * MiB, peak_bytes.value


def test_max_line_bytes_is_checked_and_used(tmp_path):
    path = _ndjson(tmp_path, [_good(0), _good(1)])
    with pytest.raises(ConfigError, match="max_line_bytes"):
        read_campusiot(path, max_line_bytes=0)
    with pytest.raises(ConfigError, match="2 bad of 2 lines"):
        read_campusiot(path, max_line_bytes=20)


def test_line_numbers_follow_universal_newlines(tmp_path):
    path = tmp_path / "crlf.ndjson"
    path.write_bytes((_good(0) + "\r\n" + "{bad\r" + _good(1) + "\n").encode())
    trace, s = read_campusiot(path)
    assert len(trace) == 2 and s.bad_examples[0][:2] == (2, "not JSON")


# --------------------------------------------------------------------------- CampusIoT: broken files


def test_truncated_gzip_keeps_the_lines_before_the_cut(tmp_path):
    data = _ndjson(tmp_path, [_good(i) for i in range(2000)]).read_bytes()
    cut = tmp_path / "cut.ndjson.gz"
    cut.write_bytes(data[: len(data) // 2])
    trace, s = read_campusiot(cut)
    assert 0 < len(trace) < 2000
    assert s.bad_lines == 0 and dict(s.bad_reasons) == {"file truncated (EOFError)": 1}
    cut.write_bytes(data[:12])  # inside the gzip header
    with pytest.raises(ConfigError, match="cut.ndjson.gz"):
        read_campusiot(cut)


def test_bit_flipped_gzip(tmp_path):
    data = bytearray(_ndjson(tmp_path, [_good(i) for i in range(50)]).read_bytes())
    crc = tmp_path / "crc.ndjson.gz"
    flipped = bytearray(data)
    flipped[-6] ^= 0x10  # the CRC-32 trailer: every line reads, then the check fails
    crc.write_bytes(bytes(flipped))
    trace, s = read_campusiot(crc)
    assert len(trace) == 50 and dict(s.bad_reasons) == {"corrupt gzip data (BadGzipFile)": 1}
    body = tmp_path / "body.ndjson.gz"
    for at in range(12, len(data) - 8, 7):  # every 7th byte of the deflate stream
        flipped = bytearray(data)
        flipped[at] ^= 0xFF
        body.write_bytes(bytes(flipped))
        try:
            trace, s = read_campusiot(body)
        except ConfigError as exc:
            assert "body.ndjson.gz" in str(exc) and "\n" not in str(exc)
        else:
            assert len(trace) == s.records <= 50


def test_a_file_that_is_not_gzip_is_one_config_error(tmp_path):
    path = tmp_path / "plain.ndjson.gz"
    path.write_bytes(b"hello, I am not gzip\n")
    with pytest.raises(ConfigError, match=r"(?i)plain\.ndjson\.gz.*unreadable.*not a gzipped file"):
        read_campusiot(path)


# --------------------------------------------------------------------------- pcap: corrupt length fields


def _pcap(tmp_path, name="s.pcap", ng=False, n=6):
    path = tmp_path / name
    w = PcapWriter(path, ng=ng)
    w.frame(A, BROKER, flags=dpkt.tcp.TH_SYN)
    w.frame(A, BROKER, mqtt_connect())
    for i in range(n):
        w.frame(A, BROKER, mqtt_publish("s/t", bytes(i + 1)))
    w.close()
    return path


def _record_offsets(data):
    """Offsets of the record headers of a classic little-endian pcap."""
    out, pos = [], 24
    while pos + 16 <= len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return out


def test_pcap_record_length_claiming_2_gib_is_never_allocated(tmp_path, peak_bytes):
    path = _pcap(tmp_path)
    data = bytearray(path.read_bytes())
    at = _record_offsets(data)[4]  # the third PUBLISH
    struct.pack_into("<II", data, at + 8, 2**31, 2**31)  # caplen, len
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(bytes(data))
    with peak_bytes:
        trace, s = read_mqtt_pcap(bad)
    assert peak_bytes.value < 8 * MiB, peak_bytes.value
    assert len(trace) == 2  # the PUBLISH packets before the corrupt record
    assert dict(s.frame_reasons) == {"record length above max_frame_bytes": 1}
    assert s.frame_examples[0][0] == 5 and str(2**31) in s.frame_examples[0][2]
    assert "record 5 (record length above max_frame_bytes" in s.first_skipped()


def test_pcapng_block_length_claiming_2_gib_is_never_allocated(tmp_path, peak_bytes):
    path = _pcap(tmp_path, "s.pcapng", ng=True)
    data = bytearray(path.read_bytes())
    blocks, pos = [], 0
    while pos + 8 <= len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        blocks.append((pos, btype))
        pos += blen
    epbs = [p for p, t in blocks if t == 6]
    struct.pack_into("<I", data, epbs[4] + 4, 2**31)  # the third PUBLISH
    bad = tmp_path / "bad.pcapng"
    bad.write_bytes(bytes(data))
    with peak_bytes:
        trace, s = read_mqtt_pcap(bad)
    assert peak_bytes.value < 8 * MiB, peak_bytes.value
    assert len(trace) == 2 and dict(s.frame_reasons) == {"record length above max_frame_bytes": 1}
    struct.pack_into("<I", data, 4, 2**31)  # the section header block itself
    bad.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"bad\.pcapng.*not a capture.*length field claims 2147483620 bytes"):
        read_mqtt_pcap(bad)


def test_max_frame_bytes_bounds_records(tmp_path):
    path = _pcap(tmp_path)
    trace, s = read_mqtt_pcap(path, max_frame_bytes=64)  # 54 bytes of headers + 8 + payload
    assert s.packets == 8 and dict(s.frame_reasons) == {"frame above max_frame_bytes": 4}  # CONNECT, 3 PUBLISH
    assert len(trace) == 0  # the skipped CONNECT left a hole in the TCP stream: the rest waits for it
    assert MAX_FRAME_BYTES == 256 * 1024
    with pytest.raises(ConfigError, match="max_frame_bytes"):
        read_mqtt_pcap(path, max_frame_bytes=-1)


def test_pcap_headers_cut_short_or_corrupt_are_one_config_error(tmp_path):
    data = bytearray(_pcap(tmp_path).read_bytes())
    bad = tmp_path / "head.pcap"
    bad.write_bytes(bytes(data[:10]))
    with pytest.raises(ConfigError, match=r"head\.pcap.*not a capture"):
        read_mqtt_pcap(bad)
    struct.pack_into("<I", data, 20, 4242)  # link type
    bad.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"head\.pcap.*link type 4242"):
        read_mqtt_pcap(bad)


def test_corrupt_frame_timestamp_never_rejects_the_capture(tmp_path):
    data = bytearray(_pcap(tmp_path).read_bytes())
    offsets = _record_offsets(data)
    struct.pack_into("<I", data, offsets[5], 1000)  # tv_sec of a PUBLISH far before the first record
    bad = tmp_path / "ts.pcap"
    bad.write_bytes(bytes(data))
    trace, _ = read_mqtt_pcap(bad)
    assert len(trace) == 6 and trace.t_s[0] == 0.0 and trace.origin_epoch_s == pytest.approx(1000.0, abs=1)


# --------------------------------------------------------------------------- MQTT remaining length


def test_mqtt_remaining_length_of_four_ff_bytes(tmp_path, peak_bytes):
    path = tmp_path / "ff.pcap"
    w = PcapWriter(path)
    w.frame(A, BROKER, flags=dpkt.tcp.TH_SYN)
    w.frame(A, BROKER, mqtt_connect())
    w.frame(A, BROKER, mqtt_publish("s/ok", bytes(3)))
    w.frame(A, BROKER, b"\x30\xff\xff\xff\xff" + bytes(20))  # a fifth length byte would be needed
    w.frame(A, BROKER, mqtt_publish("s/after", bytes(4)))
    w.frame(A, BROKER, b"\x30\xff\xff\xff\x7f" + bytes(20))  # 256 MiB claimed, 20 bytes present
    w.frame(A, BROKER, mqtt_publish("s/end", bytes(5)))
    w.frame(A, BROKER, b"\x30\xff\xff\xff\x03" + bytes(30))  # 8 MiB: allowed, but the capture ends first
    w.close()
    with peak_bytes:
        trace, s = read_mqtt_pcap(path)
    assert peak_bytes.value < 8 * MiB, peak_bytes.value
    assert list(trace.frame["topic"].astype(str)) == ["s/ok", "s/after", "s/end"]
    assert s.malformed == 2
    assert dict(s.malformed_reasons) == {
        "remaining length longer than 4 bytes": 1,
        "remaining length above max_packet_bytes": 1,
    }
    assert s.malformed_examples[0][2].startswith("30ffffffff")
    assert s.pending_bytes == 35  # the truncated packet: only what the file holds


# --------------------------------------------------------------------------- saved traces


def test_saved_trace_corruption_is_one_config_error(tmp_path):
    t = Trace.from_arrays([0.0, 1.0], ["a", "b"], ["t", "t"], [1, 2])
    path = t.save(tmp_path / "t.csv.gz")
    data = bytearray(path.read_bytes())
    data[-6] ^= 0x01  # CRC
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"t\.csv\.gz"):
        Trace.load(path)
    path.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(ConfigError, match=r"t\.csv\.gz"):
        Trace.load(path)
    csv = tmp_path / "m.csv"
    for meta, match in (
        ("{bad", "JSONDecodeError"),
        ("[]", "metadata"),
        ('{"t0_of_day_s": "x"}', "t0_of_day_s"),
        ('{"origin_epoch_s": NaN}', "origin_epoch_s"),
        (f'{{"t0_of_day_s": {2**70}}}', "t0_of_day_s"),
    ):
        csv.write_text(f"# pubsim-trace {meta}\nt_s,publisher,topic,size_bytes\n0.5,a,t,10\n")
        with pytest.raises(ConfigError, match=match):
            Trace.load(csv)
    csv.write_text("t_s,publisher,topic,size_bytes\n0.5,a,t,99999999999999999999999\n")
    with pytest.raises(ConfigError, match="size_bytes"):
        Trace.load(csv)
    csv.write_bytes(b"t_s,publisher,topic,size_bytes\n0.5,\xff\xfe,t,10\n")
    with pytest.raises(ConfigError, match="m.csv"):
        Trace.load(csv)


def test_saved_trace_gzip_bomb_is_refused(tmp_path, monkeypatch, peak_bytes):
    monkeypatch.setattr(trace_module, "_MIN_INFLATED", 4 * MiB)
    path = tmp_path / "bomb.csv.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"t_s,publisher,topic,size_bytes\n")
        for _ in range(32):
            fh.write(b"0.5,a,t,10\n" * (MiB // 11))
    with peak_bytes, pytest.raises(ConfigError, match="bomb.csv.gz.*characters inflated"):
        Trace.load(path)
    assert peak_bytes.value < 64 * MiB


# --------------------------------------------------------------------------- the trace commands


def test_inspect_prints_the_skip_summary(tmp_path, capsys):
    lines = [_good(i) for i in range(3)] + [BAD_RECORDS["ts NaN"][0], BAD_RECORDS["fCnt beyond 64 bits"][0]]
    path = _ndjson(tmp_path, lines)
    parser = argparse.ArgumentParser(prog="pubsim")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["trace", "inspect", str(path)])
    assert args.func(args, None) == 0
    out = capsys.readouterr().out
    assert "2 bad lines skipped (_timestamp not finite: 1, fCnt out of range: 1)" in out
    assert "first skipped: line 4 (_timestamp not finite: _timestamp=nan); line 5 (fCnt out of range" in out


# --------------------------------------------------------------------------- random mutations

_BASE = {}


def _base_files():
    """A small valid gzip NDJSON trace and a small valid pcap, made once."""
    if not _BASE:
        tmp = Path(tempfile.mkdtemp(prefix="pubsim-mut-"))
        _BASE["ndjson"] = _ndjson(tmp, [_good(i) for i in range(12)]).read_bytes()
        _BASE["pcap"] = _pcap(tmp, n=8).read_bytes()
        _BASE["pcapng"] = _pcap(tmp, "s.pcapng", ng=True, n=8).read_bytes()
    return _BASE


_mutations = st.tuples(
    st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=6),
    st.one_of(st.none(), st.floats(0, 1)),
)


def _mutate(data, mutation):
    flips, cut = mutation
    out = bytearray(data)
    for where, xor in flips:
        out[int(where * len(out))] ^= xor
    return bytes(out[: int(cut * len(out))] if cut is not None else out)


@pytest.mark.parametrize("kind", ["ndjson", "pcap", "pcapng"])
@given(mutation=_mutations)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_mutations_parse_or_raise_config_error(tmp_path, kind, mutation):
    path = tmp_path / {"ndjson": "m.ndjson.gz", "pcap": "m.pcap", "pcapng": "m.pcapng"}[kind]
    path.write_bytes(_mutate(_base_files()[kind], mutation))
    read = read_campusiot if kind == "ndjson" else read_mqtt_pcap
    try:
        trace, summary = read(path)
    except ConfigError as exc:
        assert "\n" not in str(exc) and path.name in str(exc)
    else:
        assert len(trace) == (summary.records if kind == "ndjson" else summary.publishes)
        str(summary)
        summary.first_skipped()
        json.dumps(summary.as_dict(), default=str)
