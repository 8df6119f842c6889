"""Who pays a link's jitter (``LinkParams.jitter_on``): every packet, or only a
packet that finds the receiver idle (the others are read with the packet before them).

Hand-computed timelines on both drivers, the kernel rule itself, the lookahead
and the refused or rejected settings. The engines' agreement on the mode is in
``test_drivers_agree.py`` (case ``idle-receiver-bursts``), ``test_cycles.py``
(compiled cycle) and the compiled closed loop case.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.mapping import from_mapping
from pubsim.run import simulate
from pubsim.sim import kernels as K
from pubsim.sim.distributions import Constant, Distribution, Exponential, Shifted
from pubsim.sim.errors import ConfigError

US = 1e-6


@dataclass(frozen=True, kw_only=True)
class InOrder(Distribution):
    """Test-only: its values in order, again and again (draws one can predict)."""

    values: tuple = field(default=(0.0,))

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def scv(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.resize(np.asarray(self.values, dtype=float), n)


def _three_packets(jitter_on, driver):
    """Packets published at 0, 0 and 1 ms over an uplink of 10 us latency whose jitter draws
    are 2, 5 and 7 us (no bandwidth limit, a broker and a downlink that take no time)."""
    up = LinkParams(latency_s=10 * US, jitter_s=InOrder(values=(2 * US, 5 * US, 7 * US)), jitter_on=jitter_on)
    pub = PublisherParams(
        topics=("a",),
        arrival="schedule",
        schedule_time_s=(0.0, 0.0, 1e-3),
        schedule_size_bytes=(100,) * 3,
        schedule_topic=("a",) * 3,
    )
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=0.0)),
        publishers={"p": pub},
        subscribers={"s": SubscriberParams(subscriptions=("a",))},
        link={"p": up, "s": LinkParams()},
        protocol="none",
    )
    r = simulate(g, duration_s=0.01, seed=1, driver=driver)
    d = r.deliveries().sort_values("msg")
    return [round(t / US, 6) for t in d["delivery_time_s"]]


@pytest.mark.parametrize("driver", ["batch", "reference"])
def test_a_packet_arriving_while_the_receiver_wakes_is_read_with_the_one_before(driver):
    # idle receiver: packet 1 reaches the far end at 10 us, receiver idle: 10 + 2 = 12 us.
    # Packet 2 reaches it at 10 us < 12 us (still waking): read with packet 1, at 12 us;
    # its draw (5 us) is taken and unused. Packet 3 at 1010 us finds it idle: + its own
    # draw, the third (7 us): 1017 us.
    assert _three_packets("idle_receiver", driver) == [12.0, 12.0, 1017.0]
    # every packet (the default, as before): packet 2 pays its own draw, kept in order:
    # max(10 + 5, 12) = 15 us; packet 3 as above.
    assert _three_packets("every_packet", driver) == [12.0, 15.0, 1017.0]


def test_kernel_rule():
    depart = np.array([0.0, 0.0, 1e-3, 1e-3])
    latency = 10 * US
    delay = latency + np.array([2, 5, 7, 1]) * US
    lost = np.array([False, False, False, True])

    def run(idle):
        last, code, out = np.zeros(1), np.zeros(4, dtype=np.int64), np.empty(4)
        K.propagate(last, depart, code, delay, lost, out, latency, idle)
        return [round(x / US, 6) for x in out[:3]], code[3], last[0]

    idle, code, last = run(True)
    assert idle == [12.0, 12.0, 1017.0] and code == K.DROP_LOSS and last == pytest.approx(1017 * US)
    assert run(False)[0] == [12.0, 15.0, 1017.0]
    # exactly at the previous arrival: the receiver is idle and the packet pays its draw
    assert K.ordered_arrival(2.0, 1.0, 1.5, 3.0, True) == 3.5
    assert K.ordered_arrival(2.0, 1.0, 1.5, 3.0 + 1e-9, True) == 3.0 + 1e-9


def test_default_is_every_packet_and_old_mappings_load():
    assert LinkParams().jitter_on == "every_packet" and not LinkParams().idle_receiver
    old = from_mapping(LinkParams, {"latency_s": "20us", "jitter_s": "gamma(30us, cv=1)"}, "link.old")
    assert old.jitter_on == "every_packet"
    new = from_mapping(LinkParams, {"latency_s": "20us", "jitter_on": "idle_receiver"}, "link.new")
    assert new.idle_receiver


def test_a_bad_mode_is_a_config_error_naming_field_and_value():
    with pytest.raises(ConfigError) as err:
        LinkParams(jitter_on="sometimes")
    assert err.value.field == "jitter_on" and err.value.value == "sometimes"
    assert "every_packet" in err.value.expected and "idle_receiver" in err.value.expected
    with pytest.raises(ConfigError) as err:
        from_mapping(LinkParams, {"jitter_on": "always"}, "link.lan")
    assert err.value.field == "link.lan.jitter_on" and err.value.value == "always"


def test_lookahead_of_an_idle_receiver_link_counts_no_jitter():
    """A packet read with the one before it can arrive less than latency + the jitter's least value
    after it was sent: the link's lookahead is its latency alone."""
    jitter = Shifted(offset=5 * US, base=Exponential(mean_value=5 * US))
    pubs = {"p": PublisherParams(topics=("a",), rate_per_s=10.0)}
    subs = {"s": SubscriberParams(subscriptions=("a",))}
    for mode, look in (("every_packet", 15 * US), ("idle_receiver", 10 * US)):
        link = LinkParams(latency_s=10 * US, jitter_s=jitter, jitter_on=mode)
        net = build_network(T.star(broker=BrokerParams(), publishers=pubs, subscribers=subs, link=link), seed=0)
        st = next(s for s in net.stations if s.name == "link:p->broker")
        assert st.lookahead_s == pytest.approx(look), mode


def test_bursts_share_the_receivers_wake_up():
    """The driver-agreement case's bursts: with idle receivers the median latency of bursty
    publishers is lower than when every message draws its jitter (the largest of k draws)."""
    from tests.oracles.test_drivers_agree import idle_receiver_bursts

    idle = idle_receiver_bursts()
    every = idle_receiver_bursts()
    for _, _, data in every.edges(data=True):
        data[T.PARAMS] = dataclasses.replace(data[T.PARAMS], jitter_on="every_packet")
    runs = {name: simulate(g, duration_s=0.3, seed=11) for name, g in (("idle", idle), ("every", every))}

    def p50(name, pub):
        d = runs[name].deliveries()
        return d.loc[d["publisher"] == pub, "latency_s"].median()

    # bursts of 4 and 7 no longer wait for the largest of 4 or 7 draws (about 13 % lower here)
    assert p50("idle", "p4") < 0.95 * p50("every", "p4") and p50("idle", "p7") < 0.92 * p50("every", "p7")
