"""Asymmetric request/reply: reply size, server processing time, serialization
of both directions, and a client timeout with resend (W/RTT oracle, hand
timelines, both drivers identical, bad values named)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.models.mechanisms.patterns.reqrep import client_counts, request_reply
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.patterns import ReplyParams
from pubsim.models.params.serialization import SerializationParams
from pubsim.run import simulate
from pubsim.scenario import parse_scenario
from pubsim.sim.distributions import Constant, Exponential, Uniform
from pubsim.sim.errors import ConfigError

LAT, BW = 2e-3, 1e6  # one-way latency, s; bandwidth, B/s (no framing: protocol "none")
BROKER_S, SERVER_S = 1e-3, 2e-3
REQ_B, REPLY_B = 100, 10_000


def client(**kw):
    return PublisherParams(topics=("x",), arrival="closed_loop", size_bytes=Constant(value=REQ_B), **kw)


def rr(reply, link=None, reply_processing=None, **client_kw):
    return request_reply(
        server=BrokerParams(ingress_cost_s=Constant(value=BROKER_S)),
        link=link or LinkParams(latency_s=LAT, bandwidth_Bps=BW),
        clients={"c": client(**client_kw)},
        reply=reply,
        reply_processing=reply_processing,
    )


def test_one_outstanding_request_gives_one_over_rtt():
    """RTT = request on the uplink (100 B / 1 MB/s + 2 ms) + broker 1 ms + server 2 ms
    + the larger reply on the downlink (10 kB / 1 MB/s + 2 ms) = 17.1 ms; X = 1 / RTT."""
    rtt = REQ_B / BW + LAT + BROKER_S + SERVER_S + REPLY_B / BW + LAT
    g = rr(ReplyParams(size_bytes=Constant(value=REPLY_B), server_s=Constant(value=SERVER_S)))
    r = simulate(g, duration_s=3.0, warmup_s=0.5, seed=1)
    d = r.deliveries()
    np.testing.assert_allclose(d.latency_s, rtt, rtol=0, atol=1e-9)
    assert (d.size_bytes == REPLY_B).all()
    t = d.delivery_time_s.to_numpy()
    x = np.count_nonzero((t >= 0.5) & (t < 3.0)) / 2.5
    assert abs(x - 1 / rtt) * 2.5 <= 1  # one reply at the window's edges
    st = r.stations().set_index("station")
    assert st.loc["server:broker", "role"] == "server"


def test_window_over_rtt_with_server_time():
    """W = 3 requests outstanding, no queueing (3 x 3 ms of work < RTT): X = 3 / RTT."""
    rtt = REQ_B / BW + LAT + BROKER_S + SERVER_S + REPLY_B / BW + LAT
    g = rr(ReplyParams(size_bytes=Constant(value=REPLY_B), server_s=Constant(value=SERVER_S)), window_requests=3)
    r = simulate(g, duration_s=3.0, warmup_s=0.5, seed=1)
    t = r.deliveries().delivery_time_s.to_numpy()
    x = np.count_nonzero((t >= 0.5) & (t < 3.0)) / 2.5
    # the downlink serializes 10 ms per reply: 3 replies per 17.1 ms need 30 ms, so the link caps X at 100/s
    assert x == pytest.approx(min(3 / rtt, BW / REPLY_B), rel=0.02)


def test_serialization_of_both_directions_on_a_hand_timeline():
    """Client encodes the request (0.5 ms + 1 us/B x 200 B), server decodes it (0.3 ms +
    1 us/B x 200 B) and encodes the reply (0.1 ms + 2 us/B x 3,000 B: 1,000 B x ratio 3),
    client decodes the reply (0.2 ms + 1 us/B x 3,000 B)."""
    enc = SerializationParams(size_ratio=2.0, encode_cost_s=5e-4, encode_cost_per_byte_s=1e-6)
    srv = SerializationParams(
        size_ratio=3.0, decode_cost_s=3e-4, decode_cost_per_byte_s=1e-6, encode_cost_s=1e-4, encode_cost_per_byte_s=2e-6
    )
    dec = SubscriberParams(
        subscriptions=("x",), serialization=SerializationParams(decode_cost_s=2e-4, decode_cost_per_byte_s=1e-6)
    )
    g = rr(
        ReplyParams(size_bytes=Constant(value=1000), server_s=Constant(value=SERVER_S), serialization=srv),
        reply_processing=dec,
        serialization=enc,
    )
    r = simulate(g, duration_s=0.5, seed=1)
    req = 2 * REQ_B
    rtt = (
        (5e-4 + 1e-6 * req)
        + (req / BW + LAT)
        + BROKER_S
        + (SERVER_S + 3e-4 + 1e-6 * req + 1e-4 + 2e-6 * 3000)
        + (3000 / BW + LAT)
        + (2e-4 + 1e-6 * 3000)
    )
    np.testing.assert_allclose(r.deliveries().latency_s, rtt, rtol=0, atol=1e-9)


def test_defaults_keep_the_symmetric_model():
    """``reply=None`` builds no server stage; a ReplyParams with defaults adds a
    zero-time stage and changes no time or size."""
    plain = simulate(rr(None), duration_s=0.5, seed=3)
    assert not (plain.stations().role == "server").any()
    staged = simulate(rr(ReplyParams()), duration_s=0.5, seed=3)
    cols = ["msg", "publish_time_s", "delivery_time_s", "size_bytes"]
    pd.testing.assert_frame_equal(plain.deliveries()[cols], staged.deliveries()[cols], check_exact=True)


# --------------------------------------------------------------------------
# Timeout and resend
# --------------------------------------------------------------------------


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_timeout_and_resend_on_a_hand_timeline(driver):
    """The server takes 30 ms per request (FIFO), the client times out after 21 ms;
    each copy needs 2 ms up, 1 ms at the broker, its server turn and 2 ms back.

    Copy A of request 0 at 0 ms: server 3-33, reply 35 ms (answers request 0).
    Timeout at 21 ms: copy B, server 33-63, reply 65 ms (late). B's timeout at 42 ms:
    answered at 35 ms, nothing. Request 1 (copy C) at 35 ms: server 63-93, reply
    95 ms. Its timeouts at 56 and 77 ms find it unanswered: copies D (server 93-123,
    reply 125 ms, late) and E (server 123-153, reply 155 ms, late). E's timeout at
    98 ms: answered at 95 ms. Request 2 at 95 ms: server 153-183, reply 185 ms; its
    timeout (116 ms) falls after the 100 ms of publishing."""
    g = request_reply(
        server=BrokerParams(ingress_cost_s=Constant(value=1e-3)),
        link=LinkParams(latency_s=2e-3),
        clients={"c": client(request_timeout_s=21e-3)},
        reply=ReplyParams(server_s=Constant(value=30e-3)),
    )
    r = simulate(g, duration_s=0.1, seed=1, driver=driver)
    d = r.deliveries().sort_values("delivery_time_s")
    np.testing.assert_allclose(d.delivery_time_s, [0.035, 0.065, 0.095, 0.125, 0.155, 0.185], atol=1e-9)
    np.testing.assert_allclose(d.publish_time_s, [0.0, 0.021, 0.035, 0.056, 0.077, 0.095], atol=1e-9)
    c = client_counts(r.network).set_index("client").loc["c"]
    assert (c.requests, c.resends, c.late_replies) == (3, 3, 3)


def test_timeouts_recover_from_losses():
    """On a lossy link a window of 1 stalls for good without a timeout; with one, the
    client keeps going, resending what was lost."""
    lossy = LinkParams(latency_s=1e-3, loss_probability=0.2)
    reply = ReplyParams(server_s=Constant(value=1e-3))
    stuck = simulate(rr(reply, link=lossy), duration_s=2.0, seed=4)
    going = simulate(rr(reply, link=lossy, request_timeout_s=10e-3), duration_s=2.0, seed=4)
    assert len(stuck.deliveries()) < 30
    c = client_counts(going.network).iloc[0]
    assert c.requests > 200 and c.resends > 0.1 * c.requests
    assert len(going.deliveries()) >= c.requests - 1  # every request but the last answered


def test_batch_equals_reference_with_reply_distributions_and_timeouts():
    g = request_reply(
        server=BrokerParams(ingress_cost_s=Exponential(mean_value=2e-4)),
        link=LinkParams(latency_s=1e-3, bandwidth_Bps=5e6, loss_probability=0.05),
        clients={
            "c0": PublisherParams(topics=("x",), arrival="closed_loop", window_requests=3, request_timeout_s=8e-3),
            "c1": PublisherParams(topics=("x",), arrival="closed_loop", window_requests=1, think_time_s=1e-3),
        },
        reply=ReplyParams(
            size_bytes=Uniform(low=100, high=5000), server_s=Exponential(mean_value=1e-3), workers=2, queue_messages=3
        ),
    )
    fast = simulate(g, duration_s=1.0, warmup_s=0.05, seed=11, driver="batch")
    ref = simulate(g, duration_s=1.0, warmup_s=0.05, seed=11, driver="reference")
    for a, b in zip(
        (fast.deliveries(), fast.drops(), fast.stations()), (ref.deliveries(), ref.drops(), ref.stations())
    ):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    pd.testing.assert_frame_equal(client_counts(fast.network), client_counts(ref.network))
    assert client_counts(fast.network).resends.sum() > 0 and len(fast.deliveries()) > 200


# --------------------------------------------------------------------------
# Scenario syntax and bad values
# --------------------------------------------------------------------------


def test_scenario_syntax_for_the_server_reply():
    spec = {
        "run": {"duration": "1s"},
        "topology": {
            "builder": "star",
            "broker": {"reply": {"size_bytes": "20kB", "server_s": "2ms"}},
            "publishers": [{"name": "c", "topics": ["x"], "arrival": "closed_loop", "request_timeout_s": "50ms"}],
            "subscribers": [{"name": "c.reply", "subscriptions": ["x"]}],
        },
    }
    g = parse_scenario(spec).topology
    reply = g.nodes["broker"]["params"].reply
    assert reply.size_bytes.mean == 20_000 and reply.server_s.mean == pytest.approx(2e-3)
    assert g.nodes["c"]["params"].request_timeout_s == pytest.approx(0.05)


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: ReplyParams(size_bytes="-5B"), "size_bytes"),
        (lambda: ReplyParams(server_s="-1ms"), "server_s"),
        (lambda: ReplyParams(workers=0), "workers"),
        (lambda: client(request_timeout_s=-1.0), "request_timeout_s"),
    ],
)
def test_bad_values_are_named(make, field):
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.field == field and "\n" not in str(err.value)
