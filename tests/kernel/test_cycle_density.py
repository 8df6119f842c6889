"""The optimistic solver's density rule judges the busiest member, not the
component's total (:meth:`pubsim.sim.optimistic.CycleSolver.dense`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from pubsim.sim.optimistic import CycleSolver


def _dense(by_member, bound, *, per_lookahead=10.0, lookahead_s=0.01):
    solver = SimpleNamespace(cycle_lookahead_s=lookahead_s, dense_arrivals=per_lookahead)
    return CycleSolver.dense(solver, [np.asarray(t, dtype=float) for t in by_member], bound)


def test_many_sparse_members_are_not_dense():
    # 8 members with 8 arrivals each in one lookahead: 64 in all, above 10, but no member above 10
    members = [np.linspace(0.0, 0.009, 8) for _ in range(8)]
    assert not _dense(members, 0.01)


def test_one_busy_member_is_dense():
    members = [np.linspace(0.0, 0.009, 8), np.linspace(0.0, 0.009, 11)]
    assert _dense(members, 0.01)


def test_rate_is_per_lookahead_over_the_window_span():
    # 11 arrivals at one member over 2 lookaheads: 5.5 per lookahead
    assert not _dense([np.linspace(0.0, 0.019, 11)], 0.02)
    # arrivals at or after the bound do not count; nothing early is never dense
    assert not _dense([np.full(50, 0.02)], 0.02)
    assert not _dense([np.array([])], 0.02)


def test_infinite_threshold_never_dense():
    assert not _dense([np.zeros(1000)], 0.01, per_lookahead=float("inf"))
