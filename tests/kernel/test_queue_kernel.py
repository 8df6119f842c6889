"""The compiled event-driven queue (sim.queue_kernel behind QueueDiscipline)
gives exactly what the Python reference (EventQueueDiscipline) gives:
departures, drops with causes, wake-up times and held messages, call by
call, on random arrivals, priorities, sizes, capacities, overflow policies
and chunk boundaries."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.sim import kernels as K
from pubsim.sim.disciplines import EventQueueDiscipline, Overflow, QueueDiscipline, Served
from pubsim.sim.packets import Packets

POLICIES = (
    Overflow.DROP_NEWEST,
    Overflow.REJECT,
    Overflow.DROP_OLDEST,
    Overflow.RING,
    Overflow.UPDATE,
    Overflow.FLOW_TO_DISK,
)


def _settings(rng, overflow):
    return {
        "servers": int(rng.integers(1, 4)),
        "capacity_messages": None if rng.random() < 0.25 else int(rng.integers(1, 9)),
        "capacity_bytes": None if rng.random() < 0.5 else float(rng.integers(100, 2000)),
        "overflow": overflow,
        "idle_extra_s": float(rng.choice([0.0, 0.25, 1e-3])),
        "disk_cost_s": float(rng.choice([0.0, 0.5, 3e-3])),
    }


def _load(rng, n):
    """Arrivals, service times, sizes, priorities and keys; a grid (many ties) or continuous."""
    if rng.random() < 0.5:
        t = np.cumsum(rng.choice([0.0, 0.25, 0.5, 1.0], n))
        service = rng.choice([0.0, 0.25, 0.5, 1.0, 1.5], n)
    else:
        t = np.cumsum(rng.exponential(1.0, n))
        service = rng.exponential(rng.uniform(0.5, 2.0), n)
    levels = int(rng.integers(1, 9))
    prio = rng.integers(-2, levels, n)
    key = rng.integers(0, int(rng.integers(1, 12)), n)
    size = rng.integers(1, 600, n)
    pk = Packets(t, np.arange(n), rng.integers(0, 50, n), size, t - rng.uniform(0, 1, n))
    return pk, service, (size + rng.integers(0, 100, n)).astype(float), prio, key


def _calls(rng, pk):
    """Chunk boundaries: (first, last, horizon) with every arrival of a chunk before its horizon."""
    n = len(pk)
    cuts = np.sort(rng.choice(np.arange(1, n), size=int(rng.integers(0, min(n - 1, 12) + 1)), replace=False))
    bounds = [0, *cuts.tolist(), n]
    calls = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        nxt = pk.t[b] if b < n else np.inf
        last = pk.t[b - 1]
        if nxt > last and rng.random() < 0.7:
            horizon = float(rng.uniform(last, nxt)) if np.isfinite(nxt) else last + rng.exponential(3.0)
        else:
            horizon = float(nxt) if np.isfinite(nxt) else last
        if horizon <= last:  # drivers give arrivals strictly before the horizon
            horizon = float(nxt)
        calls.append((a, b, horizon))
    return calls


def _fields(served: Served):
    p, d = served.packets, served.dropped
    return {
        "served": [p.t, p.msg, p.visit, p.size, p.pub_t],
        "times": [served.admit, served.start, served.depart],
        "dropped": [d.t, d.msg, d.visit, d.size, d.pub_t],
        "drops": [served.drop_t, served.drop_code],
    }


def _same(a: Served, b: Served, where):
    fa, fb = _fields(a), _fields(b)
    for name in fa:
        for x, y in zip(fa[name], fb[name]):
            assert x.dtype == y.dtype, (where, name)
            assert np.array_equal(x, y), (where, name, x, y)


def _empty_call(d, horizon):
    return d.run(Packets.empty(), np.empty(0), np.empty(0), horizon, np.empty(0, np.int64), np.empty(0, np.int64))


def _compare(seed, overflow):
    rng = np.random.default_rng(seed)
    settings = _settings(rng, overflow)
    ref, fast = EventQueueDiscipline(**settings), QueueDiscipline(**settings)
    pk, service, size, prio, key = _load(rng, int(rng.integers(2, 120)))
    if rng.random() < 0.2:
        prio = None
    key = key if overflow == Overflow.UPDATE else None
    causes = set()
    for c, (a, b, horizon) in enumerate(_calls(rng, pk)):
        args = (
            pk.take(slice(a, b)),
            service[a:b],
            size[a:b],
            horizon,
            None if prio is None else prio[a:b],
            None if key is None else key[a:b],
        )
        want, got = ref.run(*args), fast.run(*args)
        _same(want, got, (seed, overflow, c))
        causes.update(want.drop_code.tolist())
        assert fast.next_wake() == ref.next_wake(), (seed, c)
        assert fast.held_visits().tolist() == ref.held_visits().tolist(), (seed, c)
        wake = ref.next_wake()
        if wake is not None and wake < (pk.t[b] if b < len(pk) else np.inf) and rng.random() < 0.5:
            _same(_empty_call(ref, wake), _empty_call(fast, wake), (seed, overflow, c, "wake"))
    _same(_empty_call(ref, np.inf), _empty_call(fast, np.inf), (seed, overflow, "drain"))
    assert fast.held_visits().tolist() == ref.held_visits().tolist() == []
    return causes


@pytest.mark.parametrize("overflow", POLICIES)
def test_kernel_matches_the_python_reference(overflow):
    causes = set()
    for seed in range(150):
        causes |= _compare(seed, overflow)
    expected = {
        Overflow.DROP_NEWEST: {K.DROP_FULL, K.DROP_BYTES},
        Overflow.REJECT: {K.DROP_REJECTED},
        Overflow.DROP_OLDEST: {K.DROP_OLDEST, K.DROP_FULL, K.DROP_BYTES},  # full of messages in service
        Overflow.RING: {K.DROP_OLDEST, K.DROP_FULL, K.DROP_BYTES},
        Overflow.UPDATE: {K.DROP_REPLACED, K.DROP_FULL, K.DROP_BYTES},
        Overflow.FLOW_TO_DISK: set(),
    }[overflow]
    assert causes == expected  # the random cases reach every drop path of the policy


def test_one_message_at_a_time_matches_batches():
    """The reference driver's way (one arrival per call, wake-ups in between) gives the fast path's results."""
    rng = np.random.default_rng(7)
    pk, service, size, prio, key = _load(rng, 300)
    settings = {"servers": 2, "capacity_messages": 5, "overflow": Overflow.RING}
    whole = QueueDiscipline(**settings).run(pk, service, size, np.inf, prio)
    one = QueueDiscipline(**settings)
    parts = []
    for i in range(len(pk)):
        nxt = pk.t[i + 1] if i + 1 < len(pk) else np.inf
        parts.append(one.run(pk.take(slice(i, i + 1)), service[i : i + 1], size[i : i + 1], pk.t[i], prio[i : i + 1]))
        while (wake := one.next_wake()) is not None and wake < nxt:
            parts.append(_empty_call(one, wake))
    parts.append(_empty_call(one, np.inf))
    start = np.concatenate([p.start for p in parts])
    assert np.array_equal(np.sort(start), np.sort(whole.start))
    assert np.array_equal(np.concatenate([p.packets.msg for p in parts]), whole.packets.msg)
    assert np.array_equal(np.concatenate([p.dropped.msg for p in parts]), whole.dropped.msg)


def test_update_keys_must_be_non_negative_integers():
    d = QueueDiscipline(overflow=Overflow.UPDATE)
    pk = Packets([0.0], [0], [0], [10], [0.0])
    with pytest.raises(ValueError, match="non-negative integers"):
        d.run(pk, np.ones(1), np.ones(1), 1.0, None, np.array([-1]))
