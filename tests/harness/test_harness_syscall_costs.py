"""The C microbenchmark of an event-loop pass's system calls compiles, runs and reports each call."""

from __future__ import annotations

import shutil

import pytest

from pubsim.calibration.harness.syscall_costs import NAMES, measure_syscall_costs
from pubsim.sim.errors import ConfigError


def test_every_call_has_a_cost_between_a_nanosecond_and_a_millisecond():
    if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
        pytest.skip("no C compiler (apt-get install gcc)")
    costs = measure_syscall_costs(calls=500, rounds=3)
    assert sorted(costs) == sorted(NAMES)
    assert all(1e-9 < v < 1e-3 for v in costs.values()), costs


@pytest.mark.parametrize("field, value", [("calls", 0), ("rounds", -1), ("calls", 2.5)])
def test_bad_counts_are_one_line_errors(field, value):
    with pytest.raises(ConfigError) as err:
        measure_syscall_costs(**{field: value})
    assert err.value.field == field
