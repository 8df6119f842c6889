"""Mosquitto's reads per PUBLISH, counted on the real broker: the mechanism behind
``BrokerParams.length_byte_cost_s`` (one ``read`` per remaining-length byte)."""

from __future__ import annotations

import pytest

from pubsim.calibration.harness import procfs
from pubsim.calibration.harness.brokers import BrokerSpec, broker
from pubsim.calibration.harness.syscalls import publish_syscalls
from pubsim.models.protocol import mqtt_length_bytes
from tests.harness.test_harness_brokers import _require

IO_TEXT = """rchar: 1948
wchar: 323
syscr: 7
syscw: 5
read_bytes: 0
write_bytes: 4096
cancelled_write_bytes: 0
"""


def test_parse_io_reads_every_counter():
    io = procfs.parse_io(IO_TEXT)
    assert io["syscr"] == 7 and io["syscw"] == 5 and io["write_bytes"] == 4096 and len(io) == 7


def test_io_counters_of_a_missing_process_is_process_gone():
    with pytest.raises(procfs.ProcessGone):
        procfs.io_counters(2**22 + 17)


def test_mosquitto_reads_each_remaining_length_byte_on_its_own(tmp_path):
    """2 + remaining-length bytes reads per PUBLISH on a 9-byte topic: 3 up to 116 B of payload,
    4 from 117 B, 5 from 16,373 B (measured 2026-11-27: exactly these, over 2,000 PUBLISHes each),
    and one write per delivered copy of a small message."""
    _require("mosquitto")
    sizes = [116, 117, 16_372, 16_373]
    with broker(BrokerSpec(kind="mosquitto"), tmp_path) as b:
        rows = publish_syscalls(b.port, b.pid, sizes, n=200)
    for row in rows:
        expected = 2 + int(mqtt_length_bytes(row["payload_bytes"], 9))
        assert row["reads_per_publish"] == pytest.approx(expected, abs=0.05), row
    assert rows[0]["writes_per_publish"] == pytest.approx(1.0, abs=0.05)
