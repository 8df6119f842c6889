"""CPU speed of a host: every CPU cost of a process placed on it is divided by
the host's ``speed`` (the calibration machine = 1.0).

The costs that scale are those the process's CPU spends: a broker's per
message, per match, per copy, per byte, per filter, wake-up, handshake and
batch costs; a relay's costs; a ZeroMQ socket's costs; a subscriber's
processing time and decoding costs; a publisher's encode costs (its
serialization's ``encode_cost_s`` and ``encode_cost_per_byte_s``). A disk's
time (``flow_to_disk_cost_s``, the disk stage) and background loads (given in
cores of the host) do not scale.
"""

from __future__ import annotations

import dataclasses

from ....sim.distributions import Constant, Distribution, Empirical, Exponential, Shifted, Uniform
from ...params.broker import BrokerParams
from ...params.client import PublisherParams, SubscriberParams
from ...params.relay import RelayParams
from ...params.zmq import ZmqSocketParams

__all__ = ["CPU_FIELDS", "NESTED_CPU_FIELDS", "CODEC_FIELDS", "scaled", "on_host"]

#: CPU cost fields of each parameter class (s, or s/byte).
CPU_FIELDS: dict[type, tuple[str, ...]] = {
    BrokerParams: (
        "ingress_cost_s",
        "match_cost_s",
        "delivery_cost_s",
        "per_byte_cost_s",
        "length_byte_cost_s",
        "filter_scan_cost_s",
        "idle_wakeup_cost_s",
        "ack_cost_s",
        "copy_ack_cost_s",
        "batch_fixed_cost_s",
        "connection_cost_s",
        "connection_wakeup_cost_s",
    ),
    RelayParams: ("relay_cost_s", "forward_cost_s", "control_cost_s"),
    ZmqSocketParams: ("send_cost_s", "copy_cost_s", "per_byte_cost_s", "idle_wakeup_cost_s", "batch_fixed_cost_s"),
    SubscriberParams: ("processing_s",),
}

#: CPU cost fields of a parameter class's nested parameter objects: field -> its cost fields.
NESTED_CPU_FIELDS: dict[type, dict[str, tuple[str, ...]]] = {
    BrokerParams: {"heap_trim": ("fault_cost_s",)},
}

#: CPU cost fields of the message format (``serialization``) a client's CPU runs.
CODEC_FIELDS: dict[type, tuple[str, ...]] = {
    PublisherParams: ("encode_cost_s", "encode_cost_per_byte_s"),
    SubscriberParams: ("decode_cost_s", "decode_cost_per_byte_s"),
}


def scaled(value, factor: float):
    """A cost (number or :class:`~pubsim.sim.distributions.Distribution`; None stays None) times ``factor``."""
    if value is None:
        return None
    if not isinstance(value, Distribution):
        return value * factor
    if isinstance(value, Constant):
        return Constant(value=value.value * factor)
    if isinstance(value, Exponential):
        return Exponential(mean_value=value.mean_value * factor)
    if isinstance(value, Uniform):
        return Uniform(low=value.low * factor, high=value.high * factor)
    if isinstance(value, Empirical):
        return Empirical(values=tuple(v * factor for v in value.values))
    if isinstance(value, Shifted):
        return Shifted(offset=value.offset * factor, base=scaled(value.base, factor))
    return dataclasses.replace(value, mean_value=value.mean_value * factor)  # mean-and-cv families keep their cv


def on_host(params, speed: float):
    """``params`` with every CPU cost divided by ``speed`` (the same object at speed 1)."""
    if speed == 1.0:
        return params
    changes = {n: scaled(getattr(params, n), 1.0 / speed) for n in CPU_FIELDS.get(type(params), ())}
    for name, fields in NESTED_CPU_FIELDS.get(type(params), {}).items():
        inner = getattr(params, name)
        if inner is not None:
            changes[name] = dataclasses.replace(inner, **{n: getattr(inner, n) / speed for n in fields})
    codec = getattr(params, "serialization", None)
    codec_names = CODEC_FIELDS.get(type(params), ())
    if codec is not None and codec_names:
        changes["serialization"] = dataclasses.replace(codec, **{n: getattr(codec, n) / speed for n in codec_names})
    return dataclasses.replace(params, **changes) if changes else params
