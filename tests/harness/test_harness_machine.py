"""The machine reference recorded with every campaign (issue 18)."""

import math

from pubsim.calibration.harness.machine import loopback_round_trips_per_s, machine_reference


def test_loopback_ping_pong_counts_round_trips():
    rate = loopback_round_trips_per_s(0.05)
    # a round trip is two loopback writes and two wake-ups: between 100 and 10 million per second on any machine
    assert math.isfinite(rate) and 1e2 < rate < 1e7


def test_machine_reference_is_the_median_of_its_samples():
    ref = machine_reference(repeats=3, duration_s=0.03)
    assert len(ref["samples"]) == 3
    assert ref["loopback_round_trips_per_s"] == sorted(ref["samples"])[1]
    assert "ping-pong" in ref["method"]
