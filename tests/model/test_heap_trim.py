"""Pages a broker faults in again after its allocator trimmed its heap (models.params.heap)."""

import pytest

from pubsim.models.mechanisms.hosts.speed import on_host
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.heap import HeapTrimParams
from pubsim.models.params.mapping import from_mapping
from pubsim.sim.errors import ConfigError

MOSQUITTO = HeapTrimParams(fault_cost_s=2.6e-6)  # two live buffers, glibc's 128 KiB top pad, 4 KiB pages


@pytest.mark.parametrize(
    ("payload", "faults"),
    # counted on Mosquitto 2.0.11 per message (2026-12-08, perf page-faults; calibration/README.md)
    [(65536, 0), (98304, 16), (114688, 24), (126976, 30), (131072, 32), (163840, 48), (196608, 64), (262144, 96)]
    + [(393216, 160), (524288, 224), (64, 0), (16384, 0)],
)
def test_pages_follow_the_faults_counted_on_mosquitto(payload, faults):
    assert MOSQUITTO.pages(payload) == faults
    assert MOSQUITTO.cost_s(payload) == pytest.approx(faults * 2.6e-6)


def test_partial_pages_round_up_and_arrays_work():
    p = HeapTrimParams(live_buffers=3, top_pad_bytes=0, page_bytes=1000, fault_cost_s=1.0)
    assert list(p.pages([0, 1, 333, 334, 1000])) == [0, 1, 1, 2, 3]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"live_buffers": 0}, "broker.heap_trim.live_buffers"),
        ({"page_bytes": 0}, "broker.heap_trim.page_bytes"),
        ({"fault_cost_s": "-1us"}, "broker.heap_trim.fault_cost_s"),
        ({"top_pad_bytes": "lots"}, "broker.heap_trim.top_pad_bytes"),
        ({"pages": 3}, "broker.heap_trim.pages"),
    ],
)
def test_bad_fields_are_refused_naming_them(fields, field):
    with pytest.raises(ConfigError) as err:
        from_mapping(BrokerParams, {"heap_trim": fields}, "broker")
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_scenario_mapping_reads_sizes_and_durations():
    b = from_mapping(BrokerParams, {"heap_trim": {"top_pad_bytes": "128KiB", "fault_cost_s": "3us"}}, "broker")
    assert b.heap_trim.top_pad_bytes == 131072 and b.heap_trim.fault_cost_s == pytest.approx(3e-6)


def test_a_faster_host_faults_faster():
    fast = on_host(BrokerParams(heap_trim=MOSQUITTO), 2.0)
    assert fast.heap_trim.fault_cost_s == pytest.approx(1.3e-6)
    assert fast.heap_trim.live_buffers == 2
