"""Request/reply with a window of W outstanding requests (closed loop):
W / RTT for deterministic times, saturation at 1 / service, Mean Value
Analysis for exponential servers, both drivers identical."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pubsim.models.mechanisms.patterns.reqrep import request_reply
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim import theory
from pubsim.sim.distributions import Constant, Exponential
from pubsim.sim.errors import ConfigError


def _client(window, think=0.0):
    return PublisherParams(topics=("x",), arrival="closed_loop", window_requests=window, think_time_s=think)


def _rr(service, windows, latency_s=2e-3):
    return request_reply(
        server=BrokerParams(ingress_cost_s=service),
        link=LinkParams(latency_s=latency_s),
        clients={f"c{i}": _client(w) for i, w in enumerate(windows)},
    )


def _replies_per_s(result, t0, t1):
    t = result.deliveries()["delivery_time_s"].to_numpy()
    return np.count_nonzero((t >= t0) & (t < t1)) / (t1 - t0)


@pytest.mark.parametrize("window", [1, 2, 4, 5, 8, 12])
def test_deterministic_window_over_rtt_until_the_server_saturates(window):
    """RTT0 = 2 x 2 ms + 1 ms; X = min(W / RTT0, 1 / D) exactly in steady state."""
    d_s, rtt0 = 1e-3, 5e-3
    r = simulate(_rr(Constant(value=d_s), [window]), duration_s=5, warmup_s=1, seed=1)
    expected = min(window / rtt0, 1 / d_s)
    assert abs(_replies_per_s(r, 1, 5) - expected) * 4 <= 1  # one reply at the window's edges
    lat = r.deliveries().query("publish_time_s >= 1")["latency_s"]
    # Little's law on the loop: RTT = W / X
    assert lat.mean() == pytest.approx(window / expected, rel=1e-3)
    if window * d_s <= rtt0:
        np.testing.assert_allclose(lat, rtt0, rtol=0, atol=1e-9)  # no request waits


@pytest.mark.parametrize("loss", [0.0, 0.02])
def test_closed_loop_source_remembers_only_unanswered_requests(loss):
    """A client's state is bounded by its window: at most W requests in flight and at most
    W lost for good (each closes a slot), however many requests were answered (issue 17)."""
    g = request_reply(
        server=BrokerParams(ingress_cost_s=Constant(value=1e-4)),
        link=LinkParams(latency_s=1e-3, loss_probability=loss),
        clients={"c0": _client(3)},
    )
    r = simulate(g, duration_s=2, seed=5, record="stream", drain=False)
    (src,) = [s for s in r.network.sources if getattr(s, "closed_loop", False)]
    assert src._sent > 30
    assert len(src._unanswered) <= 2 * src.window


@pytest.mark.parametrize("windows", [[4], [1, 1], [2, 3]])
def test_exponential_server_against_mva(windows):
    """N = sum W customers, one FCFS exponential server (D = 1 ms), 4 ms of delay (links)."""
    g = _rr(Exponential(mean_value=1e-3), windows)
    exact = theory.mva([1e-3], 4e-3, sum(windows))
    x, rtt = [], []
    for rep in range(6):
        r = simulate(g, duration_s=12, warmup_s=1, seed=77, replication=rep)
        x.append(_replies_per_s(r, 1, 12))
        rtt.append(r.deliveries().query("publish_time_s >= 1")["latency_s"].mean())
    for vals, want in ((np.array(x), exact["throughput_per_s"]), (np.array(rtt), exact["cycle_s"])):
        half = stats.t.ppf(0.995, len(vals) - 1) * vals.std(ddof=1) / np.sqrt(len(vals))
        assert abs(vals.mean() - want) <= max(half, 1e-3 * want), (vals.mean(), want, half)
        assert abs(vals.mean() - want) <= 0.03 * want


def test_mva_limits():
    one = theory.mva([2e-3, 1e-3], 5e-3, 1)
    assert one["throughput_per_s"] == pytest.approx(1 / 8e-3)
    many = theory.mva([2e-3, 1e-3], 5e-3, 400)
    assert many["throughput_per_s"] == pytest.approx(1 / 2e-3, rel=1e-6)  # bottleneck bound
    assert many["cycle_s"] == pytest.approx(400 / many["throughput_per_s"])
    with pytest.raises(ConfigError, match="customers"):
        theory.mva([1e-3], 0.0, 0)


@pytest.mark.parametrize("chunk", [None, 7])
def test_drivers_agree_on_closed_loops(chunk):
    g = _rr(Exponential(mean_value=8e-4), [3, 1])
    kw = {} if chunk is None else {"chunk_messages": chunk}
    fast = simulate(g, duration_s=1.0, warmup_s=0.1, seed=9, driver="batch", **kw)
    ref = simulate(g, duration_s=1.0, warmup_s=0.1, seed=9, driver="reference")
    for a, b in ((fast.deliveries(), ref.deliveries()), (fast.stations(), ref.stations())):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(fast.deliveries()) > 500


def test_zero_latency_loop_is_a_one_line_error():
    g = _rr(Constant(value=0.0), [1], latency_s=0.0)
    with pytest.raises(ConfigError, match="latency_s"):
        simulate(g, duration_s=0.1, seed=1)


def test_bad_client_is_a_one_line_error():
    with pytest.raises(ConfigError, match="arrival"):
        request_reply(
            server=BrokerParams(),
            link=LinkParams(latency_s=1e-3),
            clients={"c": PublisherParams(topics=("x",), rate_per_s=1.0)},
        )
    with pytest.raises(ConfigError, match="window_requests"):
        PublisherParams(topics=("x",), arrival="closed_loop", window_requests=0)


def test_lost_requests_close_window_slots_for_good():
    """No client timeout: with a lossy link every slot is lost in the end, and the report counts them."""
    from pubsim.models.mechanisms.patterns.reports import report

    g = request_reply(
        server=BrokerParams(ingress_cost_s=Constant(value=1e-4)),
        link=LinkParams(latency_s=1e-3, loss_probability=0.2),
        clients={"c": _client(3)},
    )
    r = simulate(g, duration_s=2.0, seed=5)
    assert r.summary()["published"] == len(r.deliveries()) + 3 == len(r.deliveries()) + len(r.drops())
    rows = report(r, g, {"kind": "request_reply"})
    assert rows["window_slots_lost"].tolist() == [3]
