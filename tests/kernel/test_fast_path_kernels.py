"""The compiled shortcuts of the fast path against the plain code they replace.

* :func:`pubsim.sim.kernels.fifo_run`'s single-loop forms (one server with no
  buffer limit; one server, drop-newest, a message limit, departures in a
  ring; with a CPU quota the ring one message at a time) against :func:`pubsim.sim.kernels.fifo_offer` with the general heap
  state, one message at a time.
* :func:`pubsim.sim.window.window_run`'s single loop (one server, no buffer
  limit) against :func:`pubsim.sim.window.window_offer` one message at a time;
  :func:`pubsim.sim.window.acked_hop` against the NumPy form it replaced.
* :func:`pubsim.sim.kernels.service_window_stats` against NumPy.
* :meth:`pubsim.sim.packets.Packets.sorted` and ``split_before`` against a
  full sort and a mask; ``Packets.interleave_shared`` (fan-out copies joined
  into one run) against sorting the parts as they are.
"""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.sim import kernels as K
from pubsim.sim import window as W
from pubsim.sim.disciplines import FifoDiscipline
from pubsim.sim.packets import Packets


def _heap_reference(d: FifoDiscipline, t, svc, size):
    """The same station stepped by fifo_offer with the 3-entry (heap) state."""
    fs, ist = d.fs.copy(), d.ist[:3].copy()
    free, hdep, hsize = d.free.copy(), np.empty(len(t) + 16), np.empty(len(t) + 16)
    rows = [K.fifo_offer(fs, ist, free, hdep, hsize, a, s, z) for a, s, z in zip(t, svc, size)]
    return np.array(rows), fs


@pytest.mark.parametrize("cap", [None, 1, 5, 40])
@pytest.mark.parametrize("idle_extra", [0.0, 0.3])
@pytest.mark.parametrize("quota", [np.inf, 0.6])  # a CPU quota: the per-message ring step
def test_fifo_single_loop_matches_heap_steps(cap, idle_extra, quota):
    rng = np.random.default_rng(cap or 0)
    n = 3000
    t = np.cumsum(rng.exponential(0.8, n))
    t[100:110] = t[100]  # simultaneous arrivals
    svc = rng.exponential(1.0, n)
    svc[::7] = 0.0
    size = np.full(n, 10.0)
    d = FifoDiscipline(capacity_messages=cap, idle_extra_s=idle_extra, cpu_quota_s=quota, cpu_period_s=1.0)
    ref, fs_ref = _heap_reference(d, t, svc, size)
    out = np.empty((3, n))  # rows: contiguous slices, the layout the station passes (one compile)
    code = np.empty(n, dtype=np.int64)
    for lo, hi in ((0, 1000), (1000, 1001), (1001, n)):  # state carried across calls
        i = K.fifo_run(
            d.fs, d.ist, d.free, d.hdep, d.hsize, t[lo:hi], svc[lo:hi], size[lo:hi], 0,
            out[0, lo:hi], out[1, lo:hi], out[2, lo:hi], code[lo:hi],
        )  # fmt: skip
        assert i == hi - lo
    np.testing.assert_array_equal(code, ref[:, 3].astype(np.int64))
    np.testing.assert_array_equal(out.T, ref[:, :3])
    for j in (K.WORK, K.SERVED, K.ADMIT_FLOOR):
        assert d.fs[j] == fs_ref[j]
    if cap is not None:
        assert (code == K.DROP_FULL).any()


def _window_state(w):
    fs = np.zeros(K.FS_LEN)
    fs[K.CAP_BYTES] = np.inf
    ist = np.array([0, -1, K.POLICY_DROP_NEWEST, 0], dtype=np.int64)
    return fs, ist, np.zeros(1), np.zeros(16), np.zeros(16), np.zeros(max(w, 1)), np.array([0, w]), np.zeros(2)


@pytest.mark.parametrize("w", [0, 1, 3, 20])
@pytest.mark.parametrize("consumer", [False, True])
def test_window_single_loop_matches_offer_steps(w, consumer):
    rng = np.random.default_rng(w)
    n = 3000
    t = np.cumsum(rng.exponential(0.5, n))
    t[200:210] = t[200]  # simultaneous arrivals
    svc = rng.exponential(0.3, n)
    size = np.full(n, 10.0)
    windowed = rng.random(n) < 0.7
    lost = rng.random(n) < 0.05
    delay = 1.0 + rng.exponential(0.2, n)
    extra = np.where(rng.random(n) < 0.1, 2.0 * rng.integers(1, 3, n), 0.0)  # whole resend timeouts
    processing = rng.exponential(0.4, n) if consumer else np.zeros(n)
    processing[::5] = 0.0
    ack_extra = np.where(rng.random(n) < 0.05, 2.0, 0.0)
    inputs = (windowed, lost, delay, extra, processing, ack_extra)
    ref_state = _window_state(w)
    ref = np.array(
        [
            W.window_offer(*ref_state, a, s, z, *(x[i] for x in inputs), 1.5)
            for i, (a, s, z) in enumerate(zip(t, svc, size))
        ]
    )
    state = _window_state(w)
    out = np.empty((4, n))  # rows: contiguous slices, as the QoS link passes them
    code = np.empty(n, dtype=np.int64)
    for lo, hi in ((0, 1000), (1000, 1001), (1001, n)):  # state carried across calls
        i = W.window_run(
            *state, t[lo:hi], svc[lo:hi], size[lo:hi], *(x[lo:hi] for x in inputs), 1.5, 0,
            out[0, lo:hi], out[1, lo:hi], out[2, lo:hi], out[3, lo:hi], code[lo:hi],
        )  # fmt: skip
        assert i == hi - lo
    np.testing.assert_array_equal(code, ref[:, 4].astype(np.int64))
    np.testing.assert_array_equal(out.T, ref[:, :4])
    for a, b in zip(state, ref_state):
        np.testing.assert_array_equal(a, b)
    assert (code == K.DROP_LOSS).any() and (extra[code == K.OK] > 0).any()


def _acked_hop_numpy(q, wire, bw, latency, ack_s, timeout, jitter, loss_u, p, f1, l1, d1, f2, l2, d2):
    """The QoS link's per-message arithmetic as NumPy array operations (its former form)."""
    data_s = wire / bw
    delay = latency + jitter
    lost = (loss_u < p) & (q == 0)
    one, two = q == 1, q == 2
    sends = np.where(q > 0, f1 + l1, 1)
    rel_sends = np.where(two, f2 + l2, 0)
    extra = np.where(one, (f1 - 1) * timeout, 0.0)
    extra = np.where(two, (f1 - 1 + l1 + f2 - 1) * timeout + 2 * (latency + ack_s), extra)
    ack_extra = np.where(one, l1 * timeout, np.where(two, l2 * timeout, 0.0))
    control = np.where(one, 1 + d1, 0) + np.where(two, 1 + d1 + rel_sends + 1 + d2, 0)
    resent = (sends - 1) + np.where(two, rel_sends - 1, 0)
    service = data_s * sends + ack_s * rel_sends
    return service, q > 0, lost, delay, extra, ack_extra, control, resent, np.where(one, d1, 0)


def test_acked_hop_matches_numpy_form():
    rng = np.random.default_rng(4)
    n = 5000
    q = rng.integers(0, 3, n)
    wire = rng.integers(20, 3000, n)
    f1, f2 = rng.geometric(0.7, n), rng.geometric(0.6, n)  # attempts until the first arrival
    d1, d2 = rng.geometric(0.8, n) - 1, rng.geometric(0.8, n) - 1
    l1, l2 = d1 + rng.integers(0, 2, n) * d1, d2 * 2
    args = (q, wire, 1.25e6, 3e-4, 7e-6, 0.013, rng.exponential(1e-4, n), rng.random(n), 0.05)
    args += (f1, l1, d1, f2, l2, d2)
    want = _acked_hop_numpy(*args)
    got = [np.empty(n), np.empty(n, bool), np.empty(n, bool)] + [np.empty(n) for _ in range(3)]
    got += [np.empty(n, np.int64) for _ in range(3)]
    service, windowed, lost, delay, extra, ack_extra, control, resent, dups = got
    W.acked_hop(*args, service, windowed, lost, delay, extra, ack_extra, control, resent, dups)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert lost.any() and (extra[q == 2] > 0).any() and (control > 2).any()


def test_service_window_stats_matches_numpy():
    rng = np.random.default_rng(5)
    n = 5000
    arrival = np.sort(rng.uniform(0, 10, n))
    admit = arrival + rng.exponential(0.1, n) * (rng.random(n) < 0.3)
    start = admit + rng.exponential(0.5, n) * (rng.random(n) < 0.5)
    end = start + rng.exponential(0.2, n)
    w0, w1 = 2.0, 8.0

    def ticks(a, b):
        x = np.clip(np.minimum(b, w1) - np.maximum(a, w0), 0.0, None)
        return int(np.rint(x * K.TICKS_PER_S).astype(np.int64).sum())

    inw = (start >= w0) & (start < w1)
    want = (int(inw.sum()), int((inw & (start == admit)).sum()), ticks(start, end), ticks(admit, start))
    got = K.service_window_stats(arrival, admit, start, end, w0, w1)
    assert got[:4] == want and got[4] == ticks(arrival, admit)
    mask = rng.random(n) < 0.5
    ina = (arrival >= w0) & (arrival < w1)
    assert K.window_counts(arrival, mask, w0, w1) == (int(ina.sum()), int((ina & mask).sum()))


def _packets(rng, n):
    t = np.sort(rng.integers(0, 12, n).astype(float))
    return Packets(t, rng.integers(0, 6, n), rng.integers(0, 4, n), np.zeros(n), t)


def test_sorted_equals_full_sort():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 60))
        t = rng.integers(0, 12, n).astype(float)  # many equal times
        key = rng.permutation(6 * n)[:n]  # unique (message, visit)
        p = Packets(t, key // 4, key % 4, np.zeros(n), t)
        got = p.sorted(4)
        want = p.take(np.lexsort((p.order_key(4), p.t)))
        for name in ("t", "msg", "visit"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def _fan_out(rng, n, k, n_visits, first_msg=0, ordered=False):
    """The k child parts of n parent packets that share every array but the visit
    (parents in time order; in message order among equal times if ``ordered``)."""
    t = np.sort(rng.integers(0, 8, n).astype(float))  # many equal times
    msg = first_msg + rng.permutation(10 * n)[:n]  # (message, visit) keys unique, as in a run
    if ordered:
        msg = msg[np.lexsort((msg, t))]
    parent = Packets(t, msg, np.zeros(n), rng.integers(1, 100, n), t)
    first = rng.integers(0, n_visits - k + 1, n)
    return [Packets(parent.t, parent.msg, first + j, parent.size, parent.pub_t) for j in range(k)]


def _same(a, b):
    for name in ("t", "msg", "visit", "size", "pub_t"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_interleaved_fan_out_sorts_like_the_parts():
    rng = np.random.default_rng(5)
    for _ in range(100):
        n_visits = 12
        parts = _fan_out(rng, int(rng.integers(1, 40)), int(rng.integers(1, 6)), n_visits)
        parts += _fan_out(rng, int(rng.integers(1, 40)), 2, n_visits, first_msg=1000)  # a second shared group
        parts += _fan_out(rng, int(rng.integers(1, 30)), 1, n_visits, first_msg=2000)  # and a part of its own
        parts = [parts[i] for i in rng.permutation(len(parts))]
        joined = Packets.interleave_shared(parts)
        assert sum(map(len, joined)) == sum(map(len, parts)) and len(joined) <= len(parts)
        _same(Packets.concat(joined).sorted(n_visits), Packets.concat(parts).sorted(n_visits))


def test_fan_out_copies_become_one_ordered_run():
    parts = _fan_out(np.random.default_rng(1), 500, 4, 8, ordered=True)
    (joined,) = Packets.interleave_shared(parts)
    assert joined.sorted(8) is joined  # nothing left to sort
    np.testing.assert_array_equal(joined.visit[:4], [p.visit[0] for p in parts])


@pytest.mark.parametrize("ordered", [True, False])
def test_split_before_equals_mask(ordered):
    rng = np.random.default_rng(9)
    p = _packets(rng, 200)
    if not ordered:
        p = p.take(rng.permutation(200))
    early, late = p.split_before(6.0)
    m = p.t < 6.0
    np.testing.assert_array_equal(early.msg, p.msg[m])
    np.testing.assert_array_equal(late.msg, p.msg[~m])
    np.testing.assert_array_equal(late.t, p.t[~m])
