"""The per-length-byte cost of an MQTT PUBLISH (``BrokerParams.length_byte_cost_s``).

Mosquitto 2.0 reads a PUBLISH's remaining-length field one byte per ``read``
system call (``lib/packet_mosq.c`` ``packet__read``): the broker pays a step
with the payload at 128 B and 16 KiB of remaining length.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.models.protocol import mqtt_framing, mqtt_length_bytes
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError

# remaining length = 2 + topic + payload (QoS 0); one byte below 128, two below 16,384, three below 2 MiB
BOUNDARIES = [(0, 1), (122, 1), (123, 2), (16_378, 2), (16_379, 3), (2_097_146, 3), (2_097_147, 4)]


@pytest.mark.parametrize("payload, expected", BOUNDARIES)
def test_length_bytes_at_the_varint_boundaries(payload, expected):
    """A 3-byte topic: remaining = 5 + payload; the field grows at 128, 16,384 and 2,097,152."""
    assert mqtt_length_bytes(payload, 3).item() == expected


def test_length_bytes_agree_with_the_framing_and_count_the_packet_id():
    """The PUBLISH framing is 1 + length bytes + 2 + topic (+ 2 for a packet id at QoS > 0)."""
    payload = np.array([10, 120, 121, 5000, 20000])
    assert np.array_equal(mqtt_framing(payload, 4) - 1 - 2 - 4, mqtt_length_bytes(payload, 4))
    assert mqtt_length_bytes(121, 4).item() == 1 and mqtt_length_bytes(121, 4, qos=1).item() == 2


def _star(length_byte_cost_s):
    broker = BrokerParams(ingress_cost_s=Constant(value=1e-5), length_byte_cost_s=length_byte_cost_s)
    pubs = {
        f"p{n}": PublisherParams(topics=(f"t/{n}",), rate_per_s=20.0, size_bytes=Constant(value=n))
        for n in (64, 1024, 20_000)
    }
    subs = {"s": SubscriberParams(subscriptions=("t/#",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=0.0, bandwidth_Bps=1e15))


def test_each_size_pays_its_extra_length_bytes():
    """Hand-computed: with links of no latency and 1e15 B/s (under 0.1 ns per hop), an unqueued
    message's latency is its demand:
    10 us + 3 us x (length bytes - 1) = 10, 13 and 16 us for 64 B, 1 KiB and 20 kB on 't/<n>'."""
    d = simulate(_star(3e-6), duration_s=2.0, seed=3).deliveries()
    lat = d.groupby("size_bytes")["latency_s"].min()
    assert lat.loc[64] == pytest.approx(10e-6, abs=1e-9)
    assert lat.loc[1024] == pytest.approx(13e-6, abs=1e-9)
    assert lat.loc[20_000] == pytest.approx(16e-6, abs=1e-9)


def test_without_the_cost_every_size_pays_the_same():
    d = simulate(_star(0.0), duration_s=2.0, seed=3).deliveries()
    assert d.groupby("size_bytes")["latency_s"].min().to_numpy() == pytest.approx([10e-6] * 3, abs=1e-9)


def test_negative_length_byte_cost_is_a_one_line_error():
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(BrokerParams(), length_byte_cost_s=-1e-6)
    assert err.value.field == "length_byte_cost_s"
