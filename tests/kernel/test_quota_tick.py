"""The CPU quota checked at the scheduler's ticks (sim.kernels.set_quota_tick): hand timelines,
the deficit repaid over whole periods, the long-run capacity unchanged, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models.params.broker import BrokerParams
from pubsim.sim import kernels as K
from pubsim.sim.errors import ConfigError


def _fs(tick_s, quota=1.0, period=10.0):
    fs = np.zeros(K.FS_LEN)
    fs[[K.CAP_BYTES, K.QUOTA, K.PERIOD]] = np.inf, quota, period
    K.set_throttle_window(fs, 0.0, np.inf)
    if tick_s:
        K.set_quota_tick(fs, tick_s)
    return fs


def _serve(fs, starts_and_work):
    """Finish times of services that start at ``start`` or, if None, when the last one ended."""
    out, last = [], 0.0
    for start, work in starts_and_work:
        last = K.quota_finish(fs, last if start is None else start, work)
        out.append(last)
    return out


def test_exact_quota_throttles_at_once():
    # quota 1 per 10: 3 of work from 0 runs 0-1, 10-11, 20-21
    fs = _fs(0.0)
    assert _serve(fs, [(0.0, 3.0)]) == [21.0]
    assert fs[K.THR_N] == 2


def test_a_busy_server_runs_to_the_tick_and_repays_the_deficit():
    # tick 4: 3 of work from 0 ends at 3, before the first tick (2 over the quota); the next
    # service, after a gap, is a wake-up: checked, it waits out periods 0-2 (deficit 2, then 1)
    # and runs at 30-30.5
    fs = _fs(4.0)
    assert _serve(fs, [(0.0, 3.0), (5.0, 0.5)]) == [3.0, 30.5]
    assert fs[K.THR_N] == 3
    # 6 of work from 0: the tick at 4 finds the quota spent (4 used): throttled until the deficit
    # is repaid (periods 0-3), then the other 2 at 40-42
    fs = _fs(4.0)
    assert _serve(fs, [(0.0, 6.0)]) == [42.0]
    assert fs[K.THR_N] == 4


def test_work_without_a_break_is_checked_only_at_ticks():
    # 1.5 used by 1.5; the next service starts when it ends (no break, no check): runs 1.5-2.5;
    # started 0.1 later it is a wake-up with the quota spent: throttled to 10, runs 10-11
    assert _serve(_fs(4.0), [(0.0, 1.5), (None, 1.0)]) == [1.5, 2.5]
    assert _serve(_fs(4.0), [(0.0, 1.5), (1.6, 1.0)]) == [1.5, 11.0]


def test_a_period_boundary_while_running_repays_first():
    # from 9: 4 of work runs 9-10 in period 0 (1 used, its quota), then on to the tick at 12
    # (2 used of period 1's 1): throttled through period 1 and period 2 (deficit 1), 30-31
    fs = _fs(4.0)
    assert _serve(fs, [(9.0, 4.0)]) == [31.0]


def test_long_run_capacity_is_the_quota():
    # back-to-back work for 100 periods: CPU per period averages the quota either way
    rng = np.random.default_rng(1)
    work = rng.exponential(0.3, 2000)
    for tick in (0.0, 4.0):
        fs = _fs(tick)
        end = _serve(fs, [(0.0, work[0])] + [(None, w) for w in work[1:]])[-1]
        assert work.sum() / end == pytest.approx(0.1, rel=0.02)


def test_bad_tick():
    with pytest.raises(ConfigError) as err:
        BrokerParams(cpu_tick_s=0.004, workers=2)
    assert err.value.field == "cpu_tick_s" and "\n" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        BrokerParams(cpu_tick_s=-1.0)
    assert err.value.field == "cpu_tick_s"
    assert BrokerParams(cpu_tick_s="4 ms").cpu_tick_s == pytest.approx(0.004)


def test_a_start_on_a_tick_far_into_the_run_moves_on():
    # t / tick rounds down at some multiples of the tick: the next tick is then t itself
    fs = _fs(0.004, quota=0.002, period=0.01)
    for k in range(4000, 6000):
        t = k * 0.004
        assert K.quota_finish(fs, t, 1e-6) > t
