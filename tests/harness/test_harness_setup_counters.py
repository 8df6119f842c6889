"""The broker's counters of a run leave its set-up out (issue 18: measure the broker, not the harness).

While the clients connect, every publisher sends a probe on each of its
topics every 20 ms until all subscribers have seen one from every publisher
(:mod:`pubsim.calibration.harness.loadgen`). With many publishers on many
topics that is thousands of PUBLISHes per run that are not the run's
messages; :func:`~pubsim.calibration.harness.loadgen.run_load`'s
``on_start`` is where the harness reads the broker's counters instead.
"""

from __future__ import annotations

import time

import pytest

from pubsim.calibration.harness import procfs
from pubsim.calibration.harness.brokers import BrokerSpec, broker
from pubsim.calibration.harness.loadgen import LoadSpec, run_load
from tests.harness.test_harness_brokers import _require


def test_on_start_leaves_the_probe_rounds_out_of_the_broker_counters(tmp_path):
    """16 publishers on 16 topics: 256 probes per 20 ms round during the set-up.

    Counted from ``on_start`` (called once, before the common start) the
    broker's reads are the run's: 3 per PUBLISH of 64 B (command byte, one
    length byte, the rest) plus each client's flush and disconnect (at most
    4 reads per client). Counted from before the set-up they include at
    least one probe round (768 reads more)."""
    _require("mosquitto")
    calls = []
    with broker(BrokerSpec(kind="mosquitto"), tmp_path) as b:
        spec = LoadSpec(
            protocol="mqtt",
            pub_port=b.pub_port,
            rate_per_s=800.0,
            duration_s=1.0,
            publishers=16,
            subscribers=16,
            topics=16,
            fanout=1,
            payload_bytes=64,
        )

        def started():  # the probes have stopped; give the broker time to read the last ones
            time.sleep(0.3)
            calls.append((time.monotonic_ns(), procfs.io_counters(b.pid)["syscr"]))

        first = procfs.io_counters(b.pid)["syscr"]
        result = run_load(spec, on_start=started)
        last = procfs.io_counters(b.pid)["syscr"]
    assert len(calls) == 1
    (t_call, at_start), sent = calls[0], int(result.sent.sum())
    assert t_call < result.t0_ns
    assert sent == pytest.approx(800, abs=20)
    assert 3.0 <= (last - at_start) / sent <= 3.0 + 4 * 32 / sent
    assert at_start - first >= 3 * 256
