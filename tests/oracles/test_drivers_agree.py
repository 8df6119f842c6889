"""The fast path and the SimPy reference driver give identical records.

"Identical" means equal DataFrames: every delivery and drop, with the same
float times to the last bit, and the same station statistics.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.assembly.build import build_network
from pubsim.models.params.bridge import BridgeParams
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.disk import DiskParams
from pubsim.models.params.heap import HeapTrimParams
from pubsim.models.params.host import HostParams
from pubsim.models.params.idle import IdleExitParams, WakeCurveParams
from pubsim.models.params.io import IoParams
from pubsim.models.params.link import LinkParams
from pubsim.models.params.overload import OverloadParams
from pubsim.models.params.relay import RelayParams
from pubsim.models.params.serialization import SerializationParams
from pubsim.models.params.store import StoreParams
from pubsim.models.params.zmq import ZmqSocketParams
from pubsim.run import simulate
from pubsim.scenario import load_scenario
from pubsim.sim.closed_kernel import eligible
from pubsim.sim.distributions import Constant, Exponential, LogNormal, Sporadic, Uniform
from tests import ROOT

LAN = LinkParams(latency_s=2e-4, bandwidth_Bps=12.5e6, overhead_bytes=40)


def merged_star():
    """20 Poisson publishers over 4 topics merging into one broker, wildcard subscribers."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=40e-6), delivery_cost_s=Exponential(mean_value=10e-6), queue_messages=20
    )
    pubs = {
        f"p{i}": PublisherParams(topics=(f"s/{i % 4}",), rate_per_s=900.0, size_bytes=Uniform(low=20, high=2000))
        for i in range(20)
    }
    subs = {
        "all": SubscriberParams(subscriptions=("s/#",)),
        "one": SubscriberParams(subscriptions=("s/1",), processing_s=Exponential(mean_value=1e-4), buffer_messages=5),
        "plus": SubscriberParams(subscriptions=("+/2", "s/3")),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


def simultaneous_star():
    """Publishers emitting at exactly the same instants: ties everywhere."""
    times = tuple(i * 1e-3 for i in range(200))
    pub = {
        f"p{i}": PublisherParams(
            topics=("t",),
            arrival="schedule",
            schedule_time_s=times,
            schedule_size_bytes=(100,) * 200,
            schedule_topic=("t",) * 200,
        )
        for i in range(5)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("t",)) for i in range(3)}
    broker = BrokerParams(ingress_cost_s=Constant(value=150e-6), queue_messages=3)
    return T.star(broker=broker, publishers=pub, subscribers=subs, link=LinkParams(latency_s=1e-4))


def policy_star(overflow, workers):
    broker = BrokerParams(
        workers=workers,
        ingress_cost_s=LogNormal(mean_value=2e-4, cv=1.5),
        queue_messages=4,
        overflow=overflow,
        client_queue_messages=3,
        idle_wakeup_cost_s=3e-5,
    )
    pubs = {
        f"p{i}": PublisherParams(topics=("a/b",), rate_per_s=2000.0 * workers, size_bytes=Constant(value=64))
        for i in range(3)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("a/+",)) for i in range(2)}
    link = LinkParams(latency_s=1e-4, bandwidth_Bps=2e6, jitter_s=Exponential(mean_value=5e-5), loss_probability=0.02)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


def priority_star():
    """YAMI4-like priorities at a broker that drops the oldest waiting message."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=3e-4), scheduling="priority", queue_messages=6, overflow="drop_oldest"
    )
    pubs = {
        f"p{prio}": PublisherParams(topics=("q",), rate_per_s=1500.0, priority=prio, size_bytes=Constant(value=1024))
        for prio in (0, 1, 2)
    }
    subs = {"slow": SubscriberParams(subscriptions=("q",), processing_s=Constant(value=2e-4))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


def priority_link_star(overflow, queue_bytes=None):
    """YAMI4 priority channels: per-topic priorities, slow lossy downlinks with a small queue
    (4 messages, or ``queue_bytes`` bytes)."""
    pubs = {
        "mixed": PublisherParams(
            topics=("c/0", "c/1", "c/2"),
            topic_priorities=(0, 2, 1),
            rate_per_s=2500.0,
            size_bytes=Uniform(low=50, high=400),
        ),
        "flood": PublisherParams(topics=("m/x",), rate_per_s=2000.0, size_bytes=Constant(value=200)),
    }
    subs = {
        "all": SubscriberParams(subscriptions=("#",)),
        "cmd": SubscriberParams(subscriptions=("c/+",), processing_s=Exponential(mean_value=1e-4), buffer_messages=4),
    }
    down = LinkParams(
        latency_s=1e-4,
        bandwidth_Bps=1e6,
        jitter_s=Exponential(mean_value=5e-5),
        loss_probability=0.02,
        queue_messages=4 if queue_bytes is None else None,
        queue_bytes=queue_bytes,
        scheduling="priority",
        overflow=overflow,
    )
    links = {"mixed": LAN, "flood": LAN, "all": down, "cmd": down}
    return T.star(
        broker=BrokerParams(ingress_cost_s=Exponential(mean_value=5e-5)), publishers=pubs, subscribers=subs, link=links
    )


def client_queue_star(client_overflow, overflow="drop_newest"):
    """AMQP/Qpid-like broker: priority per-subscriber queues with x-max-priority and an overflow policy."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=1e-4),
        queue_messages=5,
        overflow=overflow,
        client_queue_messages=3,
        client_scheduling="priority",
        client_overflow=client_overflow,
        max_priority=1,
        flow_to_disk_cost_s=2e-4,
    )
    pubs = {
        f"p{prio}": PublisherParams(
            topics=(f"q/{prio}",), rate_per_s=2000.0, priority=prio, size_bytes=Constant(value=300)
        )
        for prio in (0, 1, 5)
    }
    subs = {"s": SubscriberParams(subscriptions=("q/#",))}
    link = LinkParams(latency_s=1e-4, bandwidth_Bps=2e6)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


def two_way_chain(forwarding):
    """Three brokers, publishers at both ends: copies flow both ways (a cycle of stations)."""
    brokers = {
        f"b{i}": BrokerParams(
            ingress_cost_s=Exponential(mean_value=1e-4), delivery_cost_s=Constant(value=2e-5), queue_messages=50
        )
        for i in range(3)
    }
    pubs = {
        "left": ("b0", PublisherParams(topics=("x/1", "x/2"), rate_per_s=1500.0, size_bytes=Constant(value=32))),
        "right": (
            "b2",
            PublisherParams(topics=("x/1",), rate_per_s=1500.0, arrival="constant", size_bytes=Constant(value=32)),
        ),
    }
    subs = {
        "s0": ("b0", SubscriberParams(subscriptions=("x/1",))),
        "s1": ("b1", SubscriberParams(subscriptions=("x/#",))),
        "s2": ("b2", SubscriberParams(subscriptions=("x/2",))),
    }
    bridge = LinkParams(latency_s=5e-4, bandwidth_Bps=1e6)
    return T.chain(brokers=brokers, bridge=bridge, link=LAN, publishers=pubs, subscribers=subs, forwarding=forwarding)


def qos_star():
    """Mixed QoS 0/1/2 on lossy links: windows, resends, consumers that ack after processing."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=1e-4),
        ack_cost_s=5e-6,
        copy_ack_cost_s=2e-6,
        max_inflight_messages=4,
        retry_timeout_s=2e-3,
        client_queue_messages=30,
    )
    pubs = {
        f"p{q}": PublisherParams(
            topics=(f"q/{q}",),
            rate_per_s=1500.0,
            qos=q,
            inflight_messages=3,
            retry_timeout_s=3e-3,
            size_bytes=Uniform(low=20, high=400),
        )
        for q in (0, 1, 2)
    }
    subs = {
        "s0": SubscriberParams(subscriptions=("q/#",), processing_s=Exponential(mean_value=1e-4), buffer_messages=8),
        "s1": SubscriberParams(subscriptions=("q/#",), qos=1, processing_s=Exponential(mean_value=2e-4)),
        "s2": SubscriberParams(subscriptions=("q/1", "q/2"), qos=2, inflight_messages=2),
    }
    link = LinkParams(latency_s=2e-4, bandwidth_Bps=2e6, jitter_s=Exponential(mean_value=5e-5), loss_probability=0.05)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


def qos_chain():
    """QoS 1 across a bridge (windowed bridge link) in a two-way chain."""
    g = two_way_chain("subscription")
    for n in ("left", "right"):
        p = g.nodes[n][T.PARAMS]
        g.nodes[n][T.PARAMS] = PublisherParams(
            topics=p.topics,
            rate_per_s=p.rate_per_s,
            arrival=p.arrival,
            size_bytes=p.size_bytes,
            qos=1,
            inflight_messages=5,
        )
    return g


def churn_star():
    """Subscribers that come and go: clean and persistent sessions, a fixed schedule, QoS 0 and 1."""
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=1e-4), client_queue_messages=40)
    pubs = {f"p{q}": PublisherParams(topics=("c/x",), rate_per_s=2000.0, qos=q) for q in (0, 1)}
    pubs["dies"] = PublisherParams(
        topics=("c/y", "c/z"),
        rate_per_s=1000.0,
        retain=True,
        offline_s=((0.1, 0.12), (0.2, 0.25)),
        will_topic="c/will",
        will_size_bytes=10,
        will_delay_s=1e-3,
    )
    subs = {
        "clean": SubscriberParams(subscriptions=("c/#",), churn_online_mean_s=0.03, churn_offline_mean_s=0.02),
        "keep": SubscriberParams(
            subscriptions=("c/#",),
            qos=1,
            clean_session=False,
            churn_online_mean_s=0.04,
            churn_offline_mean_s=0.03,
            processing_s=Exponential(mean_value=1e-4),
        ),
        "fixed": SubscriberParams(subscriptions=("c/x",), online_s=((0.0, 0.1), (0.15, 0.3))),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


def relay_chain():
    """ILDM relays in front of the brokers of a two-way chain (SYSTEMS.md §3), per-hop QoS 1."""
    from pubsim.models.params.relay import RelayParams

    g = two_way_chain("subscription")
    for i in range(3):
        g.nodes[f"b{i}"][T.RELAY] = RelayParams(
            relay_cost_s=Exponential(mean_value=2e-4),
            forward_cost_s=Constant(value=1e-5),
            control_cost_s=Constant(value=4e-6),
            hop_qos=1,
            queue_messages=3 if i == 1 else None,
        )
    return T.validate(g)


def batching_star():
    """A broker batching what is queued (ZeroMQ-like), finite buffer, back-pressure."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=2e-5),
        delivery_cost_s=Constant(value=5e-6),
        batch_max_messages=8,
        batch_fixed_cost_s=6e-5,
        queue_messages=10,
        overflow="backpressure",
        idle_wakeup_cost_s=1e-5,
    )
    pubs = {
        f"p{i}": PublisherParams(topics=(f"s/{i % 2}",), rate_per_s=6000.0, size_bytes=Constant(value=64))
        for i in range(4)
    }
    subs = {
        "all": SubscriberParams(subscriptions=("s/#",), buffer_messages=4, processing_s=Exponential(mean_value=2e-5))
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


def brokerless_mixed():
    """ZeroMQ direct PUB/SUB: sender-side fan-out, prefix filters, HWM drops, batching."""
    from tests.mechanisms.brokerless.test_brokerless import _mixed

    return _mixed(16)


def restart_with_disk():
    """Persistent and transient flows, a disk stage, broker restarts with a durable queue."""
    from pubsim.models.params.disk import DiskParams
    from tests.mechanisms.persistence.test_restart import _random

    g = _random(True)
    p = g.nodes["broker"][T.PARAMS]
    g.nodes["broker"][T.PARAMS] = BrokerParams(
        **{
            **{f: getattr(p, f) for f in p.__dataclass_fields__},
            "disk": DiskParams(sync_latency_s=3e-4, batch_max_messages=4),
        }
    )
    return g


def restart_priority_update():
    """A restarting broker whose ingress and priority per-subscriber queues replace by flow (update)."""
    import dataclasses

    g = client_queue_star("update", "update")
    p = g.nodes["broker"][T.PARAMS]
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(p, restart_at_s=(0.1, 0.2), restart_downtime_s=0.01)
    return g


CASES = {
    "churn": (churn_star, 0.4),
    "qos-mixed-lossy": (qos_star, 0.4),
    "qos-chain": (qos_chain, 0.4),
    "merged-star": (merged_star, 0.5),
    "simultaneous": (simultaneous_star, 0.3),
    "drop-newest-2-workers": (lambda: policy_star("drop_newest", 2), 0.4),
    "drop-oldest": (lambda: policy_star("drop_oldest", 1), 0.4),
    "backpressure": (lambda: policy_star("backpressure", 1), 0.4),
    "priority-drop-oldest": (priority_star, 0.4),
    "priority-link-drop-newest": (lambda: priority_link_star("drop_newest"), 0.3),
    "priority-link-reject": (lambda: priority_link_star("reject"), 0.3),
    "priority-link-ring": (lambda: priority_link_star("ring"), 0.3),
    "priority-link-update": (lambda: priority_link_star("update"), 0.3),
    "priority-link-drop-oldest-bytes": (lambda: priority_link_star("drop_oldest", queue_bytes=900), 0.3),
    "priority-link-update-bytes": (lambda: priority_link_star("update", queue_bytes=900), 0.3),
    "priority-link-reject-bytes": (lambda: priority_link_star("reject", queue_bytes=900), 0.3),
    "client-queue-flow-to-disk": (lambda: client_queue_star("flow_to_disk"), 0.3),
    "client-queue-update-broker-reject": (lambda: client_queue_star("update", "reject"), 0.3),
    "client-queue-ring-broker-update": (lambda: client_queue_star("ring", "update"), 0.3),
    "chain-flood": (lambda: two_way_chain("flood"), 0.4),
    "chain-subscription": (lambda: two_way_chain("subscription"), 0.4),
    "relay-chain": (relay_chain, 0.4),
    "batching-broker": (lambda: batching_star(), 0.3),
    "brokerless-zmq": (lambda: brokerless_mixed(), 0.3),
    "restart-persistent-disk": (lambda: restart_with_disk(), 0.3),
    "restart-priority-update": (restart_priority_update, 0.3),
}


def codec_push_pull():
    """Text serialization (encode station, 5x sizes, decode) and round-robin PUSH to 3 pullers."""
    from pubsim.models.params.serialization import SerializationParams

    codec = SerializationParams(
        format="text",
        size_ratio=5.0,
        encode_cost_s=2e-5,
        encode_cost_per_byte_s=1e-8,
        decode_cost_s=1e-5,
        decode_cost_per_byte_s=2e-8,
    )
    pubs = {
        f"push{i}": PublisherParams(
            topics=("w/0", "w/1", "w/2"),
            topic_choice="round_robin",
            rate_per_s=1500.0,
            size_bytes=Uniform(low=50, high=400),
            serialization=codec,
        )
        for i in range(2)
    }
    subs = {
        f"pull{j}": SubscriberParams(subscriptions=(f"w/{j}",), serialization=codec, buffer_messages=4)
        for j in range(3)
    }
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=1e-4), queue_messages=10)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


CASES["serialization-round-robin"] = (codec_push_pull, 0.4)


def request_reply_with_background():
    """Two closed-loop clients (windows 3 and 1) sharing a server with open-loop Poisson traffic."""
    pubs = {
        "c0": PublisherParams(topics=("rr/c0",), arrival="closed_loop", window_requests=3),
        "c1": PublisherParams(topics=("rr/c1",), arrival="closed_loop", window_requests=1, think_time_s=1e-3),
        "bg": PublisherParams(topics=("bg",), rate_per_s=400.0, size_bytes=Constant(value=200)),
    }
    subs = {
        "c0.reply": SubscriberParams(subscriptions=("rr/c0",)),
        "c1.reply": SubscriberParams(subscriptions=("rr/c1",), processing_s=Exponential(mean_value=2e-4)),
        "sink": SubscriberParams(subscriptions=("bg",)),
    }
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=6e-4), queue_messages=5)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


CASES["request-reply"] = (request_reply_with_background, 0.5)


def yami4_frames():
    """YAMI4 frame channels: frames by priority behind a 16 KiB send window, a sleeping reader
    that backs frames up into its queue (a 40-message limit drops the newest), an idle one."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=5e-5),
        client_scheduling="priority",
        client_queue_messages=40,
        client_frame_bytes=4096,
        client_send_window_bytes=16384,
    )
    pubs = {
        "mixed": PublisherParams(
            topics=("c/0", "c/1", "c/2"),
            topic_priorities=(0, 2, 1),
            rate_per_s=300.0,
            size_bytes=Uniform(low=100, high=12000),
        ),
        "bulk": PublisherParams(topics=("m/x",), rate_per_s=200.0, size_bytes=Constant(value=5000)),
    }
    subs = {
        "sleepy": SubscriberParams(subscriptions=("#",), processing_s=Exponential(mean_value=2.5e-3)),
        "idle": SubscriberParams(subscriptions=("c/+",)),
    }
    down = LinkParams(latency_s=1e-4, bandwidth_Bps=4e6)
    return T.star(
        broker=broker, publishers=pubs, subscribers=subs, link={"mixed": LAN, "bulk": LAN, **dict.fromkeys(subs, down)}
    )


CASES["yami4-frames"] = (yami4_frames, 0.5)


def bridge_qos_chain():
    """Bridges as clients of both brokers with per-hop QoS (issue 14): publishers at
    QoS 2 and 1, bridge b0-b1 at QoS 1 and b1-b2 at QoS 2 on lossy links (resends),
    an ILDM node at b2 only (node -> plain broker and plain broker -> node hops,
    the node paying the acks of the hop that brought a copy)."""
    g = two_way_chain("subscription")
    for b in ("b0", "b1", "b2"):
        g.nodes[b][T.PARAMS] = dataclasses.replace(g.nodes[b][T.PARAMS], ack_cost_s=5e-6, retry_timeout_s=3e-3)
    for p, q in (("left", 2), ("right", 1)):
        g.nodes[p][T.PARAMS] = dataclasses.replace(g.nodes[p][T.PARAMS], qos=q)
    lossy = LinkParams(latency_s=5e-4, bandwidth_Bps=1e6, loss_probability=0.05)
    for (a, b), q in ((("b0", "b1"), 1), (("b1", "b2"), 2)):
        g.edges[a, b][T.PARAMS] = lossy
        g.edges[a, b][T.BRIDGE] = BridgeParams(local=a, qos=q)
    g.nodes["b2"][T.RELAY] = RelayParams(
        relay_cost_s=Exponential(mean_value=1e-4),
        forward_cost_s=Constant(value=1e-5),
        control_cost_s=Constant(value=4e-6),
        hop_qos=1,
    )
    return T.validate(g)


CASES["bridge-qos"] = (bridge_qos_chain, 0.4)


def persistent_stores(store):
    """Persistent producers on a product store: a sync producer, a confirms window of 4, transactions of 3,
    an open-loop persistent publisher, a preloaded backlog read back beyond memory, transient background."""
    disk = DiskParams(
        sync_latency_s=1e-3, bandwidth_Bps=200e6, batch_max_messages=16, read_bandwidth_Bps=250e6, op_latency_s=1e-4
    )
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=5e-5), disk=disk, store=store)
    size = Uniform(low=50_000, high=300_000)
    loop = {"arrival": "closed_loop", "persistent": True, "size_bytes": size}
    pubs = {
        "sync": PublisherParams(topics=("p/sync",), send_mode="sync", **loop),
        "conf": PublisherParams(topics=("p/conf",), send_mode="confirms", window_requests=4, **loop),
        "tx": PublisherParams(topics=("p/tx",), send_mode="transactions", transaction_messages=3, **loop),
        "open": PublisherParams(topics=("p/open",), rate_per_s=150.0, persistent=True, size_bytes=size),
        "stored": PublisherParams(
            topics=("p/stored",), rate_per_s=3000.0, persistent=True, preloaded=True, size_bytes=size
        ),
        "bg": PublisherParams(topics=("bg",), rate_per_s=500.0, size_bytes=Constant(value=200)),
    }
    subs = {
        "ledger": SubscriberParams(subscriptions=("p/#",)),
        "slow": SubscriberParams(subscriptions=("p/open", "bg"), processing_s=Exponential(mean_value=1e-3)),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


CASES["store-kahadb-like"] = (
    lambda: persistent_stores(
        StoreParams(
            message_ops=1,
            overhead_bytes=300,
            batch_max_bytes=1_000_000,
            ack_bytes=100,
            ack_ops=1,
            memory_bytes=20_000_000,
        )
    ),
    0.4,
)
CASES["store-artemis-like"] = (
    lambda: persistent_stores(
        StoreParams(
            message_ops=1,
            sync_delay_s=5e-4,
            large_message_bytes=102_400,
            large_message_ops=2,
            ack_bytes=50,
            ack_ops=2,
            memory_bytes=0,
            write_cost_per_byte_s=5e-10,
        )
    ),
    0.4,
)
CASES["store-sync-per-message"] = (
    lambda: persistent_stores(StoreParams(message_ops=2, sync="message", memory_bytes=5_000_000, read_ops=2)),
    0.4,
)


def io_cycle_star(quota, per_connection=None, sleep_entry_s=0.0, max_bytes=None):
    """A broker served in I/O cycles (NATS-like; with ``per_connection`` 1, Mosquitto's passes):
    Poisson and simultaneous publishers, fan-out 1-3, with and without a CPU quota (stalls),
    with and without a wake-up cost spared within a sleep entry, with and without a read limit
    in bytes (``max_bytes``, 21 B of framing per message)."""

    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=20e-6),
        delivery_cost_s=Constant(value=5e-6),
        overflow="backpressure",
        io=IoParams(
            cycle_cost_s=60e-6,
            flush_cost_s=10e-6,
            cycle_max_per_connection=per_connection,
            **({"cycle_max_bytes": max_bytes, "message_overhead_bytes": 21} if max_bytes else {}),
        ),
        **({"idle_wakeup_cost_s": 40e-6, "sleep_entry_s": sleep_entry_s} if sleep_entry_s else {}),
        **({"cpu_fraction": 0.3, "cpu_period_s": 0.01} if quota else {}),
    )
    pubs = {f"p{i}": PublisherParams(topics=(f"t/{i % 3}",), rate_per_s=1500.0) for i in range(4)}
    times = tuple(i * 2e-3 for i in range(150))
    pubs["burst"] = PublisherParams(
        topics=("t/0",),
        arrival="schedule",
        schedule_time_s=times,
        schedule_size_bytes=(64,) * 150,
        schedule_topic=("t/0",) * 150,
    )
    subs = {
        "all": SubscriberParams(subscriptions=("t/#",)),
        "zero": SubscriberParams(subscriptions=("t/0",)),
        "one": SubscriberParams(subscriptions=("t/1",), processing_s=Constant(value=5e-5)),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


CASES["io-cycles"] = (lambda: io_cycle_star(False), 0.3)
CASES["io-cycles-quota"] = (lambda: io_cycle_star(True), 0.3)
CASES["io-passes-per-connection"] = (lambda: io_cycle_star(True, per_connection=1), 0.3)
CASES["io-cycles-read-bytes"] = (lambda: io_cycle_star(True, max_bytes=100), 0.3)
CASES["io-cycles-sleep-entry"] = (lambda: io_cycle_star(True, sleep_entry_s=150e-6), 0.3)
CASES["io-passes-sleep-entry"] = (lambda: io_cycle_star(True, per_connection=1, sleep_entry_s=150e-6), 0.3)


def io_pass_bursts():
    """Mosquitto's passes with publishers that send bursts of three at the same instants, as the
    load generator's batches: messages wait for later passes and leave out of arrival order."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=15e-6),
        overflow="backpressure",
        io=IoParams(cycle_cost_s=5e-6, cycle_max_per_connection=1),
        cpu_fraction=0.5,
        cpu_period_s=0.01,
    )
    times = np.repeat(np.arange(200) * 0.5e-3, 3)
    pubs = {
        f"p{i}": PublisherParams(
            topics=("t",),
            arrival="schedule",
            schedule_time_s=tuple(times + i * 7e-6),
            schedule_size_bytes=(64,) * times.size,
            schedule_topic=("t",) * times.size,
        )
        for i in range(5)
    }
    return T.star(broker=broker, publishers=pubs, subscribers={"s": SubscriberParams(subscriptions=("t",))}, link=LAN)


CASES["io-pass-bursts"] = (io_pass_bursts, 0.1)


@pytest.mark.parametrize("name", ["idle", "slow", "channels"])
def test_yami4_priority_scenarios_agree(name):
    sc = load_scenario(ROOT / "experiments" / f"yami4_priority_{name}.yaml")
    fast, ref = sc.simulate(driver="batch"), sc.simulate(driver="reference")
    for a, b in zip(_frames(fast), _frames(ref)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(fast.deliveries()) >= 6


def qos1_open_windows():
    """QoS 1 subscribers with small in-flight windows on lossy links without a queue limit:
    the windows bind (the single-loop window kernel, :mod:`pubsim.sim.window`), resends and consumers."""
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=5e-5), max_inflight_messages=2, retry_timeout_s=2e-3)
    pubs = {
        f"p{i}": PublisherParams(topics=("w/x",), rate_per_s=1500.0, qos=1, size_bytes=Uniform(low=50, high=600))
        for i in range(2)
    }
    subs = {
        "fast": SubscriberParams(subscriptions=("w/x",), qos=1),
        "slow": SubscriberParams(subscriptions=("w/#",), qos=1, processing_s=Exponential(mean_value=3e-4)),
    }
    link = LinkParams(latency_s=3e-4, bandwidth_Bps=4e6, jitter_s=Exponential(mean_value=5e-5), loss_probability=0.03)
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


def priority_overloaded(overflow):
    """The priority benchmark's shape, small: three priorities over 1 MB/s priority channels at 120 % load."""
    pubs = {
        f"p{k}": PublisherParams(
            topics=(f"b/{k}",), rate_per_s=400.0, priority=k, size_bytes=Uniform(low=800, high=1200)
        )
        for k in range(3)
    }
    subs = {f"s{i}": SubscriberParams(subscriptions=("b/#",)) for i in range(2)}
    down = LinkParams(latency_s=1e-4, bandwidth_Bps=1e6, queue_messages=10, scheduling="priority", overflow=overflow)
    links = {**{p: LAN for p in pubs}, **{s: down for s in subs}}
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=2e-5))
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=links, protocol="none")


def request_reply_clients():
    """Four closed-loop clients with windows 1 to 8 (one with think time) on one exponential server."""
    pubs = {
        f"c{i}": PublisherParams(
            topics=(f"rr/c{i}",), arrival="closed_loop", window_requests=w, think_time_s=2e-4 if i == 3 else 0.0
        )
        for i, w in enumerate((1, 2, 4, 8))
    }
    subs = {f"c{i}.reply": SubscriberParams(subscriptions=(f"rr/c{i}",)) for i in range(4)}
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=1e-4))
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=5e-4))


def closed_loop_variety(jitter_on="every_packet"):
    """Closed-loop clients only, in the compiled closed loop's class (:mod:`pubsim.sim.closed_kernel`)
    with what it must get right: link jitter (paid by ``jitter_on``), the broker's idle wake-up,
    per-byte, match and delivery costs, think time, a late start, random request sizes."""
    pubs = {
        "a": PublisherParams(
            topics=("rr/a",), arrival="closed_loop", window_requests=3, size_bytes=Uniform(low=50, high=900)
        ),
        "b": PublisherParams(
            topics=("rr/b",), arrival="closed_loop", window_requests=1, think_time_s=3e-4, start_s=0.01
        ),
        "c": PublisherParams(topics=("rr/c",), arrival="closed_loop", window_requests=6),
    }
    subs = {
        "a.reply": SubscriberParams(subscriptions=("rr/a",)),
        "b.reply": SubscriberParams(subscriptions=("rr/b",)),
        "c.reply": SubscriberParams(subscriptions=("rr/c",)),
    }
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=1e-4),
        match_cost_s=Exponential(mean_value=1e-5),
        delivery_cost_s=Constant(value=2e-6),
        per_byte_cost_s=1e-9,
        idle_wakeup_cost_s=2e-5,
    )
    link = LinkParams(
        latency_s=3e-4,
        bandwidth_Bps=5e6,
        jitter_s=Exponential(mean_value=4e-5),
        overhead_bytes=40,
        jitter_on=jitter_on,
    )
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


CASES["closed-loop-compiled"] = (closed_loop_variety, 0.3)
CASES["closed-loop-compiled-idle-receiver"] = (lambda: closed_loop_variety("idle_receiver"), 0.3)
CASES["qos1-open-windows"] = (qos1_open_windows, 0.3)
CASES["priority-overloaded-drop-oldest"] = (lambda: priority_overloaded("drop_oldest"), 0.3)
CASES["priority-overloaded-update"] = (lambda: priority_overloaded("update"), 0.3)
CASES["priority-overloaded-reject"] = (lambda: priority_overloaded("reject"), 0.3)
CASES["request-reply-clients"] = (request_reply_clients, 0.2)


def confirms_unsubscribed():
    """Confirm-paced producers nobody subscribes to (confirmed at the disk's sync, back over the uplink)
    beside an open-loop persistent publisher and transient traffic that a ledger and a slow consumer take."""
    disk = DiskParams(sync_latency_s=1e-3, bandwidth_Bps=200e6, batch_max_messages=16, op_latency_s=1e-4)
    store = StoreParams(message_ops=2, overhead_bytes=400, ack_ops=1, ack_bytes=4, sync_delay_s=2e-4)
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=5e-5), disk=disk, store=store)
    size = Uniform(low=50_000, high=300_000)
    loop = {"arrival": "closed_loop", "persistent": True, "size_bytes": size}
    pubs = {
        "sync": PublisherParams(topics=("c/sync",), send_mode="sync", **loop),
        "conf": PublisherParams(topics=("c/conf",), send_mode="confirms", window_requests=4, **loop),
        "tx": PublisherParams(topics=("c/tx",), send_mode="transactions", transaction_messages=3, **loop),
        "open": PublisherParams(topics=("p/open",), rate_per_s=150.0, persistent=True, size_bytes=size),
        "bg": PublisherParams(topics=("bg",), rate_per_s=500.0, size_bytes=Constant(value=200)),
    }
    subs = {
        "ledger": SubscriberParams(subscriptions=("p/#",)),
        "slow": SubscriberParams(subscriptions=("p/open", "bg"), processing_s=Exponential(mean_value=1e-3)),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


def confirms_diskless():
    """A broker without a disk confirms when it has processed a message: a sync producer nobody takes,
    a confirms window a slow consumer takes, beside a request/reply-style loop answered by its delivery."""
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=1e-4))
    pubs = {
        "sync": PublisherParams(topics=("c/sync",), arrival="closed_loop", send_mode="sync"),
        "conf": PublisherParams(topics=("c/conf",), arrival="closed_loop", send_mode="confirms", window_requests=3),
        "rr": PublisherParams(topics=("rr",), arrival="closed_loop", window_requests=2),
    }
    subs = {
        "slow": SubscriberParams(subscriptions=("c/conf",), processing_s=Exponential(mean_value=2e-3)),
        "replier": SubscriberParams(subscriptions=("rr",)),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


CASES["store-confirms-unsubscribed"] = (confirms_unsubscribed, 0.4)
CASES["confirms-diskless"] = (confirms_diskless, 0.4)


def tick_stall_links():
    """Links held now and then for the rest of a scheduler tick (Sporadic jitter, TCP order) to a capped broker."""
    jitter = Sporadic(base=Exponential(mean_value=2e-5), probability=0.05, extra=Uniform(low=1e-3, high=4e-3))
    link = LinkParams(latency_s=2e-5, jitter_s=jitter)
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=5e-5), cpu_fraction=0.5, cpu_period_s=0.01)
    pubs = {f"p{i}": PublisherParams(topics=("t",), rate_per_s=2000.0) for i in range(2)}
    subs = {f"s{j}": SubscriberParams(subscriptions=("t",)) for j in range(2)}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


CASES["tick-stall-links"] = (tick_stall_links, 0.3)


def quota_ticks(io):
    """A capped broker whose quota is checked at 4 ms ticks, near its limit (deficits carried over
    whole periods), as the plain worker (a message ring) or in I/O cycles with a byte limit."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=1e-4),
        idle_wakeup_cost_s=2e-5,
        cpu_fraction=0.2,
        cpu_period_s=0.01,
        cpu_tick_s=0.004,
        speed_drift_log_sd=0.1,
        speed_drift_time_s=0.05,
        overflow="backpressure",
        **({"io": IoParams(cycle_cost_s=2e-5, cycle_max_bytes=300, message_overhead_bytes=21)} if io else {}),
    )
    pubs = {f"p{i}": PublisherParams(topics=("t",), rate_per_s=800.0, size_bytes=Constant(value=64)) for i in range(2)}
    subs = {f"s{j}": SubscriberParams(subscriptions=("t",)) for j in range(2)}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


CASES["quota-ticks"] = (lambda: quota_ticks(False), 0.3)
CASES["quota-ticks-io-cycles"] = (lambda: quota_ticks(True), 0.3)


def idle_receiver_bursts():
    """Publishers writing bursts of 1 to 7 messages at once (the load generator's batches) over links
    whose jitter only a message finding the receiver idle pays (``jitter_on="idle_receiver"``), a lossy
    uplink among them, fan-out to three subscribers whose downlinks take the same mode."""
    wake = LinkParams(
        latency_s=2e-5, bandwidth_Bps=50e6, jitter_s=Exponential(mean_value=4e-5), jitter_on="idle_receiver"
    )
    lossy = dataclasses.replace(wake, loss_probability=0.03)
    pubs, links = {}, {}
    for i, burst in enumerate((1, 4, 7)):
        times = tuple(np.repeat(np.arange(0, 0.3, 1.5e-3) + i * 1e-4, burst).tolist())
        pubs[f"p{burst}"] = PublisherParams(
            topics=("w/x",),
            arrival="schedule",
            schedule_time_s=times,
            schedule_size_bytes=(120,) * len(times),
            schedule_topic=("w/x",) * len(times),
        )
        links[f"p{burst}"] = lossy if burst == 4 else wake
    subs = {f"s{j}": SubscriberParams(subscriptions=("w/#",)) for j in range(3)}
    links.update(dict.fromkeys(subs, wake))
    broker = BrokerParams(ingress_cost_s=Exponential(mean_value=1.5e-5), delivery_cost_s=Constant(value=3e-6))
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=links)


CASES["idle-receiver-bursts"] = (idle_receiver_bursts, 0.3)


def idle_exit_star(
    workers=1, queue=None, quota=False, overflow="drop_newest", exit_curve=True, sleep_entry_s=0.0, wake_curve=False
):
    """A broker whose core takes time to leave its idle state (``idle_exit``): Poisson publishers and one
    bursty scheduled one, so messages find the broker idle after gaps of every length and queue behind
    a waking core; one, two workers, a queue limit, a CPU quota, back-pressure; with a sleep entry
    (``sleep_entry_s``) that spares the wake-ups of messages coming soon after the worker's work, and
    with a wake-up that costs more the longer the worker idled (``wake_curve``)."""
    pubs = {f"p{i}": PublisherParams(topics=("a",), rate_per_s=600.0) for i in range(3)}
    times = tuple(np.repeat(np.arange(0, 0.3, 7e-3), 3).tolist())
    pubs["burst"] = PublisherParams(
        topics=("a",),
        arrival="schedule",
        schedule_time_s=times,
        schedule_size_bytes=(80,) * len(times),
        schedule_topic=("a",) * len(times),
    )
    broker = BrokerParams(
        workers=workers,
        ingress_cost_s=Exponential(mean_value=1.2e-4 * workers),
        idle_wakeup_cost_s=1e-5,
        queue_messages=queue,
        overflow=overflow,
        cpu_fraction=0.6 if quota else 1.0,
        cpu_period_s=0.01,
        idle_exit=IdleExitParams(idle_s=(1e-4, 1e-3, 5e-3), exit_s=(5e-6, 4e-5, 1.5e-4)) if exit_curve else None,
        sleep_entry_s=sleep_entry_s,
        wake_curve=WakeCurveParams(idle_s=(2e-4, 2e-3, 6e-3), share=(0.1, 0.4, 1.0), work_share=0.3)
        if wake_curve
        else None,
    )
    subs = {f"s{j}": SubscriberParams(subscriptions=("a",)) for j in range(2)}
    link = LinkParams(latency_s=3e-5, jitter_s=Exponential(mean_value=1e-5))
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link)


CASES["idle-exit-open"] = (idle_exit_star, 0.3)
CASES["idle-exit-ring-quota"] = (lambda: idle_exit_star(queue=3, quota=True), 0.3)
CASES["idle-exit-two-workers"] = (lambda: idle_exit_star(workers=2, queue=5), 0.3)
CASES["idle-exit-backpressure"] = (lambda: idle_exit_star(queue=2, overflow="backpressure"), 0.3)
CASES["sleep-entry-open"] = (lambda: idle_exit_star(exit_curve=False, sleep_entry_s=3e-4), 0.3)
CASES["sleep-entry-idle-exit-ring-quota"] = (lambda: idle_exit_star(queue=3, quota=True, sleep_entry_s=3e-4), 0.3)
CASES["wake-curve-open"] = (lambda: idle_exit_star(exit_curve=False, wake_curve=True), 0.3)
CASES["wake-curve-idle-exit-ring-quota"] = (lambda: idle_exit_star(queue=3, quota=True, wake_curve=True), 0.3)
CASES["wake-curve-two-workers-backpressure-sleep-entry"] = (
    lambda: idle_exit_star(workers=2, queue=5, overflow="backpressure", sleep_entry_s=3e-4, wake_curve=True),
    0.3,
)
CASES["sleep-entry-two-workers-backpressure"] = (
    lambda: idle_exit_star(workers=2, queue=5, overflow="backpressure", sleep_entry_s=3e-4),
    0.3,
)


def _frames(result):
    return result.deliveries(), result.drops(), result.stations()


@pytest.mark.parametrize("case", sorted(CASES))
def test_batch_equals_reference(case):
    build, duration = CASES[case]
    g = build()
    fast = simulate(g, duration_s=duration, warmup_s=0.05, seed=11, driver="batch")
    ref = simulate(g, duration_s=duration, warmup_s=0.05, seed=11, driver="reference")
    for a, b in zip(_frames(fast), _frames(ref)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(fast.deliveries()) > 100


@pytest.mark.parametrize(
    "case",
    [
        "drop-oldest",
        "chain-flood",
        "merged-star",
        "qos-mixed-lossy",
        "churn",
        "request-reply",
        "qos1-open-windows",
        "priority-overloaded-drop-oldest",
        "request-reply-clients",
    ],
)
def test_chunk_size_does_not_change_results(case):
    build, duration = CASES[case]
    g = build()
    big = simulate(g, duration_s=duration, seed=5, chunk_messages=1_000_000)
    small = simulate(g, duration_s=duration, seed=5, chunk_messages=37)
    for a, b in zip(_frames(big), _frames(small)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_cases_exercise_what_they_claim():
    """Guard against a case silently losing its point (no drops, no ties...)."""
    r = simulate(CASES["drop-oldest"][0](), duration_s=0.4, seed=11)
    assert set(r.drops()["cause"]) >= {"dropped_oldest", "link_loss"}
    r = simulate(CASES["backpressure"][0](), duration_s=0.4, seed=11)
    assert "buffer_full" not in set(r.drops()["cause"])
    assert r.stations().set_index("station").loc["broker:broker", "mean_blocked"] > 0
    r = simulate(CASES["simultaneous"][0](), duration_s=0.3, seed=11)
    assert r.deliveries()["publish_time_s"].duplicated().any()
    r = simulate(CASES["chain-flood"][0](), duration_s=0.4, seed=11)
    assert set(r.deliveries()["hops"]) == {2, 3, 4}  # links crossed: 0, 1 or 2 bridges
    r = simulate(CASES["relay-chain"][0](), duration_s=0.4, seed=11)
    st = r.stations().set_index("station")
    assert st.loc["relay:b1", "drops_buffer_full"] > 0 and st.loc["relay:b0", "utilization"] > 0.1
    r = simulate(CASES["bridge-qos"][0](), duration_s=0.4, seed=11)
    assert r.summary()["duplicates"] > 0 and r.summary()["loss_rate"] == 0  # QoS 1 resends on lossy bridges
    r = simulate(CASES["store-kahadb-like"][0](), duration_s=0.4, seed=11)
    st = r.stations().set_index("station")
    assert st.loc["read:broker", "utilization"] > 0 and st.loc["disk:broker", "served"] > 0  # reads and writes
    r = simulate(CASES["yami4-frames"][0](), duration_s=0.5, seed=11)
    d = r.deliveries()
    late = d[d["subscriber"] == "sleepy"].sort_values("delivery_time_s")
    assert (late["publish_time_s"].diff() < 0).any()  # the sleeping reader's backlog reorders
    assert "buffer_full" in set(r.drops()["cause"])  # the backlog reaches the queue's limit


@pytest.mark.parametrize(
    "case, causes",
    [
        ("priority-link-drop-newest", {"buffer_full", "link_loss"}),
        ("priority-link-reject", {"rejected", "link_loss"}),
        ("priority-link-ring", {"dropped_oldest", "link_loss"}),
        ("priority-link-update", {"replaced", "link_loss"}),
        ("priority-link-drop-oldest-bytes", {"dropped_oldest", "link_loss"}),
        ("priority-link-update-bytes", {"replaced", "buffer_bytes"}),
        ("priority-link-reject-bytes", {"rejected", "link_loss"}),
        ("client-queue-update-broker-reject", {"replaced", "rejected"}),
        ("client-queue-ring-broker-update", {"dropped_oldest", "replaced"}),
        ("restart-priority-update", {"replaced", "broker_restart", "broker_down"}),
    ],
)
def test_policy_cases_exercise_their_policy(case, causes):
    build, duration = CASES[case]
    r = simulate(build(), duration_s=duration, seed=11)
    assert set(r.drops()["cause"]) >= causes


def test_flow_to_disk_case_spills_without_loss():
    build, duration = CASES["client-queue-flow-to-disk"]
    r = simulate(build(), duration_s=duration, seed=11)
    places = set(r.drops()["place"])
    assert not any(p.startswith("link:broker->") for p in places)  # the client queue never drops
    spill = simulate(build(), duration_s=duration, seed=11).deliveries()["latency_s"].mean()
    g = build()
    import dataclasses

    b = g.nodes["broker"][T.PARAMS]
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(b, flow_to_disk_cost_s=0.0)
    free = simulate(g, duration_s=duration, seed=11).deliveries()["latency_s"].mean()
    assert spill > free  # spilled messages pay the disk cost


def test_qos_case_exercises_resends_windows_and_drops():
    r = simulate(CASES["qos-mixed-lossy"][0](), duration_s=0.4, seed=11)
    st = r.stations().set_index("station")
    assert st["duplicates"].sum() > 0 and st["resent_packets"].sum() > 0
    assert {"buffer_full", "link_loss"} <= set(r.drops()["cause"])
    assert "subscriber:s1" not in st.index  # QoS 1 subscriber served inside its downlink


def test_churn_case_exercises_sessions():
    r = simulate(CASES["churn"][0](), duration_s=0.4, seed=11)
    drops = r.drops()
    assert {"clean", "fixed"} <= {p.split("->")[1] for p in drops.loc[drops["cause"] == "offline_not_owed", "place"]}
    assert "buffer_full" in set(drops["cause"])  # copies held for "keep" overflow its queue on reconnect
    assert (r.deliveries()["topic"] == "c/will").any()
    assert r.deliveries()["retained"].sum() > 2 and r.summary()["retained_deliveries"] > 2


@pytest.mark.parametrize(
    "case, cause",
    [
        ("priority-overloaded-drop-oldest", "dropped_oldest"),
        ("priority-overloaded-update", "replaced"),
        ("priority-overloaded-reject", "rejected"),
    ],
)
def test_overloaded_priority_cases_use_their_policy(case, cause):
    build, duration = CASES[case]
    r = simulate(build(), duration_s=duration, seed=11)
    assert r.drops()["cause"].value_counts().get(cause, 0) > 10


def test_open_window_case_waits_for_its_windows():
    """Messages wait at the QoS 1 downlinks although the transmitters are mostly idle: the windows bind."""
    r = simulate(qos1_open_windows(), duration_s=0.3, seed=11)
    st = r.stations().set_index("station")
    for s in ("link:broker->fast", "link:broker->slow"):
        assert st.loc[s, "mean_waiting"] > 5 and st.loc[s, "utilization"] < 0.5
        assert st.loc[s, "resent_packets"] > 0


@pytest.mark.parametrize(
    "case", ["closed-loop-compiled", "closed-loop-compiled-idle-receiver", "request-reply-clients"]
)
def test_compiled_closed_loop_equals_rounds(case):
    """The compiled closed loop and the conservative rounds give the same records."""
    build, duration = CASES[case]
    g = build()
    assert eligible(build_network(g, seed=11))
    compiled = simulate(g, duration_s=duration, warmup_s=0.05, seed=11)
    rounds = simulate(g, duration_s=duration, warmup_s=0.05, seed=11, batch_options={"closed_loop": "rounds"})
    for a, b in zip(_frames(compiled), _frames(rounds)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert compiled.summary()["published"] == rounds.summary()["published"] > 100


@pytest.mark.parametrize("case", ["store-confirms-unsubscribed", "confirms-diskless"])
def test_confirm_paced_producers_publish_alike(case):
    """Both drivers send the same messages of producers nobody (or a slow consumer) takes."""
    build, duration = CASES[case]
    runs = [simulate(build(), duration_s=duration, seed=11, driver=d) for d in ("batch", "reference")]
    published = [r.summary()["published"] for r in runs]
    assert published[0] == published[1]
    st = runs[0].stations().set_index("station")
    assert st.loc["link:sync->broker", "served"] > 10 and st.loc["link:conf->broker", "served"] > 10


def test_closed_loop_outside_the_compiled_class_runs_in_rounds():
    """Open-loop traffic or a limited queue beside the clients: not compiled (the rounds run it)."""
    assert not eligible(build_network(request_reply_with_background(), seed=11))


def zmq_on_shared_hosts():
    """Brokerless ZeroMQ with every socket on a shared host's CPU (issue 13): two publishers
    (encode stage, batched sockets) and a subscriber on a 2-core host, one publisher and a
    subscriber on a 1-core host, a subscriber elsewhere; exponential costs, loopback and cards."""
    codec = SerializationParams(encode_cost_s=5e-5)
    sock = ZmqSocketParams(
        send_cost_s=Exponential(mean_value=8e-5),
        copy_cost_s=Constant(value=1e-5),
        per_byte_cost_s=1e-9,
        idle_wakeup_cost_s=6e-6,
        batch_max_messages=16,
        batch_max_bytes=4096,
        batch_fixed_cost_s=2e-5,
    )
    pubs = {
        f"p{i}": PublisherParams(
            topics=(f"t/{i % 2}",), rate_per_s=1200.0, size_bytes=Uniform(low=50, high=900), serialization=codec
        )
        for i in range(3)
    }
    subs = {
        "near": SubscriberParams(subscriptions=("t/",), processing_s=Exponential(mean_value=6e-5)),
        "edge": SubscriberParams(subscriptions=("t/1",), processing_s=Exponential(mean_value=1e-4)),
        "far": SubscriberParams(subscriptions=("t/0",)),
    }
    return T.brokerless(
        publishers=pubs,
        subscribers=subs,
        socket=sock,
        link=LinkParams(latency_s=1e-4, jitter_s=Exponential(mean_value=2e-5), queue_messages=40),
        handoff=LinkParams(latency_s=2e-6),
        protocol="zmq",
        hosts={
            "srv": HostParams(cores=2, loopback_latency_s=2.7e-5, card_Bps=12.5e6),
            "edge": HostParams(loopback_latency_s=3e-5, card_Bps=5e6, card_latency_s=1e-5),
            "y": HostParams(),
        },
        placement={"p0": "srv", "p1": "srv", "near": "srv", "p2": "edge", "edge": "edge", "far": "y"},
    )


def request_reply_on_shared_hosts():
    """Request/reply clients whose round trips pass their host's CPU twice (issue 13): the
    server and two clients on a 2-core host (encode, server, reply processing), a third
    client alone on a 1-core host with a card; random CPU costs with a least value > 0
    (a request starts on the CPU: the rounds need its lookahead), jittery links."""
    codec = SerializationParams(encode_cost_s=4e-5)
    pubs = {
        f"c{i}": PublisherParams(topics=(f"rr/c{i}",), arrival="closed_loop", window_requests=w, serialization=codec)
        for i, w in enumerate((1, 2, 3))
    }
    subs = {
        f"c{i}.reply": SubscriberParams(subscriptions=(f"rr/c{i}",), processing_s=Uniform(low=2e-5, high=8e-5))
        for i in range(3)
    }
    broker = BrokerParams(workers=2, ingress_cost_s=Uniform(low=4e-5, high=1.6e-4))
    link = LinkParams(latency_s=2e-4, jitter_s=Exponential(mean_value=3e-5), overhead_bytes=40)
    return T.star(
        broker=broker,
        publishers=pubs,
        subscribers=subs,
        link=link,
        hosts={
            "srv": HostParams(cores=2, loopback_latency_s=3e-5),
            "edge": HostParams(card_Bps=10e6, card_latency_s=1e-5),
        },
        placement={"broker": "srv", "c0": "srv", "c0.reply": "srv", "c1": "srv", "c1.reply": "srv"}
        | {"c2": "edge", "c2.reply": "edge"},
    )


CASES["zmq-on-shared-hosts"] = (zmq_on_shared_hosts, 0.3)
CASES["request-reply-on-shared-hosts"] = (request_reply_on_shared_hosts, 0.15)  # 1,800 round trips


@pytest.mark.parametrize("case", ["zmq-on-shared-hosts", "request-reply-on-shared-hosts"])
def test_shared_host_cases_agree_on_hosts(case):
    """Both drivers give the same records (these cases are appended after
    test_batch_equals_reference's parameters were collected) and hosts() table; the
    cases put their sockets / clients on the hosts' CPU stations."""
    build, duration = CASES[case]
    runs = [simulate(build(), duration_s=duration, warmup_s=0.05, seed=11, driver=d) for d in ("batch", "reference")]
    for a, b in zip(_frames(runs[0]), _frames(runs[1])):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    pd.testing.assert_frame_equal(runs[0].hosts(), runs[1].hosts(), check_exact=False, rtol=1e-12)
    assert len(runs[0].deliveries()) > 100
    st = runs[0].stations().set_index("station")
    assert "cpu:srv" in st.index and "cpu:edge" in st.index
    assert st.loc["cpu:srv", "served"] > 200


def overload_star(quota, flow=None, passes=False):
    """Flow-controlled publishers (models.mechanisms.overload) past the broker's limit: Poisson and
    scheduled bursts at about twice its capacity, small socket buffers, fan-out 1-3, with and
    without a CPU quota (stalls); the buffers fill, publishers wait, and messages are re-stamped.
    ``passes``: the broker reads one message per connection per event-loop pass (io)."""
    broker = BrokerParams(
        io=IoParams(cycle_cost_s=5e-6, cycle_max_per_connection=1) if passes else None,
        ingress_cost_s=Exponential(mean_value=150e-6),
        delivery_cost_s=Constant(value=10e-6),
        overflow="backpressure",
        overload=OverloadParams(socket_buffer_bytes=3_000, message_overhead_bytes=20, **(flow or {})),
        **({"cpu_fraction": 0.5, "cpu_period_s": 0.01} if quota else {}),
    )
    pubs = {f"p{i}": PublisherParams(topics=(f"t/{i % 3}",), rate_per_s=2500.0) for i in range(3)}
    times = tuple(i * 0.5e-3 for i in range(400))
    pubs["burst"] = PublisherParams(
        topics=("t/0",),
        arrival="schedule",
        schedule_time_s=times,
        schedule_size_bytes=(200,) * 400,
        schedule_topic=("t/0",) * 400,
    )
    subs = {
        "all": SubscriberParams(subscriptions=("t/#",)),
        "zero": SubscriberParams(subscriptions=("t/0",)),
        "one": SubscriberParams(subscriptions=("t/1",), processing_s=Constant(value=5e-5)),
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


FLOW_CONTROL = {"receive_window_bytes": 1_000, "flow_control_cost_s": 2e-5, "flow_control_cost_s_per_byte": 1e-7}


@pytest.mark.parametrize(
    "quota, flow, passes",
    [
        (False, None, False),
        (True, None, False),
        (True, FLOW_CONTROL, False),
        (False, None, True),
        (True, FLOW_CONTROL, True),
    ],
)
def test_overload_drivers_agree(quota, flow, passes):
    """Batch and reference drivers agree record for record with publishers held by flow control
    (and, with ``flow``, messages sent past the receive windows costing the broker more; with
    ``passes``, read by Mosquitto's event-loop passes)."""
    g = overload_star(quota, flow, passes)
    fast = simulate(g, duration_s=0.3, warmup_s=0.05, seed=11, driver="batch")
    ref = simulate(g, duration_s=0.3, warmup_s=0.05, seed=11, driver="reference")
    for a, b in zip(_frames(fast), _frames(ref)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    d = fast.deliveries()
    assert len(d) > 100
    sent = d.loc[d["publisher"] == "burst", "publish_time_s"].to_numpy()
    scheduled = [i * 0.5e-3 for i in range(400)]
    assert (~np.isin(sent, scheduled)).sum() > 10  # the buffers filled: sends moved off the schedule


def connection_cost_star():
    """A capped broker whose every message pays its 9 client connections (issue 18) besides a wake-up."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=2e-5),
        delivery_cost_s=Constant(value=3e-6),
        connection_cost_s=1.5e-6,
        idle_wakeup_cost_s=1e-5,
        cpu_fraction=0.5,
        cpu_period_s=0.01,
    )
    pubs = {f"p{i}": PublisherParams(topics=(f"c/{i}",), rate_per_s=1500.0) for i in range(5)}
    subs = {f"s{i}": SubscriberParams(subscriptions=("c/#",) if i == 0 else (f"c/{i}",)) for i in range(4)}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


def connection_cost_closed_loop():
    """The compiled closed loop's broker with a per-connection cost (its constant demand)."""
    g = closed_loop_variety()
    b = g.nodes["broker"][T.PARAMS]
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(b, connection_cost_s=2e-6)
    return g


CASES["connection-cost-star"] = (connection_cost_star, 0.3)
CASES["connection-cost-closed-loop"] = (connection_cost_closed_loop, 0.3)


def test_connection_cost_cases_pay_their_connections():
    """The per-connection cases charge the cost: the compiled closed loop is still eligible and
    its records differ from the same network without the cost."""
    g = connection_cost_closed_loop()
    assert eligible(build_network(g, seed=11))
    with_cost = simulate(g, duration_s=0.3, seed=11).deliveries()["latency_s"].mean()
    without = simulate(closed_loop_variety(), duration_s=0.3, seed=11).deliveries()["latency_s"].mean()
    assert with_cost > without
    st = simulate(connection_cost_star(), duration_s=0.3, seed=11).stations().set_index("station")
    assert st.loc["broker:broker", "utilization"] > 0.2


@pytest.mark.parametrize("case", ["connection-cost-star", "connection-cost-closed-loop"])
def test_connection_cost_batch_equals_reference(case):
    """The per-connection cases (added after the parametrized list above was built) agree too."""
    test_batch_equals_reference(case)


def length_bytes_star():
    """A capped broker whose PUBLISH reads pay per remaining-length byte (Mosquitto 2.0's bytewise
    reads), with sizes on both sides of the 128 B and 16 KiB steps, queued past its quota."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=2e-5),
        length_byte_cost_s=3e-6,
        per_byte_cost_s=1e-10,
        idle_wakeup_cost_s=1e-5,
        cpu_fraction=0.5,
        cpu_period_s=0.01,
    )
    pubs = {
        "small": PublisherParams(topics=("l/s",), rate_per_s=4000.0, size_bytes=Uniform(low=20, high=300)),
        "large": PublisherParams(topics=("l/l",), rate_per_s=2000.0, size_bytes=Uniform(low=8000, high=40000)),
    }
    subs = {"s": SubscriberParams(subscriptions=("l/#",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4))


CASES["length-bytes-star"] = (length_bytes_star, 0.3)


def test_length_bytes_case_pays_its_reads():
    """The case charges the cost: the broker's utilization rises by about 3 us x the extra length
    bytes per second, 4000/s x P(payload >= 123 B) + 2000/s x (1 + P(payload >= 16,379 B)) = 6,004/s."""
    g = length_bytes_star()
    b = g.nodes["broker"][T.PARAMS]
    busy = simulate(g, duration_s=0.3, seed=11).stations().set_index("station").loc["broker:broker", "utilization"]
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(b, length_byte_cost_s=0.0)
    less = simulate(g, duration_s=0.3, seed=11).stations().set_index("station").loc["broker:broker", "utilization"]
    assert busy - less == pytest.approx(3e-6 * (4000 * 177 / 280 + 2000 * (1 + 23621 / 32000)), rel=0.15)


def test_length_bytes_batch_equals_reference():
    """The length-byte case (added after the parametrized list above was built) agrees too."""
    test_batch_equals_reference("length-bytes-star")


def heap_trim_star():
    """A capped broker that faults its large messages' buffers in again (``heap_trim``), sizes on
    both sides of the 64 KiB at which two buffers pass glibc's 128 KiB top pad, queued past its quota."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=2e-5),
        idle_wakeup_cost_s=1e-5,
        heap_trim=HeapTrimParams(fault_cost_s=2.5e-6),
        cpu_fraction=0.5,
        cpu_period_s=0.01,
    )
    pubs = {"p": PublisherParams(topics=("h",), rate_per_s=3000.0, size_bytes=Uniform(low=1000, high=200_000))}
    subs = {"s": SubscriberParams(subscriptions=("h",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4))


CASES["heap-trim-star"] = (heap_trim_star, 0.3)


def test_heap_trim_case_pays_its_faults_and_drivers_agree():
    """The case charges the faults (3,000/s x E[pages] x 2.5 us: pages = ceil((2 x size - 128 KiB) / 4 KiB)
    for sizes above 64 KiB, about 22.5 a message under the uniform sizes) and both drivers agree."""
    g = heap_trim_star()
    b = g.nodes["broker"][T.PARAMS]
    busy = simulate(g, duration_s=0.3, seed=11).stations().set_index("station").loc["broker:broker", "utilization"]
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(b, heap_trim=None)
    less = simulate(g, duration_s=0.3, seed=11).stations().set_index("station").loc["broker:broker", "utilization"]
    pages = np.mean(np.maximum(np.ceil((2 * np.linspace(1000, 200_000, 100_001) - 131072) / 4096), 0))
    assert busy - less == pytest.approx(3000 * pages * 2.5e-6, rel=0.1)
    test_batch_equals_reference("heap-trim-star")


def speed_drift_star(passes=False):
    """A capped broker whose speed drifts per quota period (``speed_drift_log_sd``), loaded to about
    90 % of its quota so that drifting periods are throttled; the plain worker and Mosquitto's passes."""
    broker = BrokerParams(
        ingress_cost_s=Exponential(mean_value=2e-5),
        delivery_cost_s=Constant(value=4e-6),
        overflow="backpressure",
        cpu_fraction=0.5,
        cpu_period_s=0.01,
        speed_drift_log_sd=0.3,
        speed_drift_time_s=0.05,
        **({"io": IoParams(cycle_cost_s=3e-6, cycle_max_per_connection=1)} if passes else {}),
    )
    pubs = {f"p{i}": PublisherParams(topics=(f"d/{i}",), rate_per_s=4800.0) for i in range(4)}
    subs = {"s": SubscriberParams(subscriptions=("d/#",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LAN)


@pytest.mark.parametrize("passes", [False, True])
def test_speed_drift_batch_equals_reference(passes):
    """Both drivers give the same records with the drift on, and the drift changes them."""
    g = speed_drift_star(passes)
    fast = simulate(g, duration_s=0.3, warmup_s=0.05, seed=11, driver="batch")
    ref = simulate(g, duration_s=0.3, warmup_s=0.05, seed=11, driver="reference")
    for a, b in zip(_frames(fast), _frames(ref)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    b = g.nodes["broker"][T.PARAMS]
    g.nodes["broker"][T.PARAMS] = dataclasses.replace(b, speed_drift_log_sd=0.0)
    steady = simulate(g, duration_s=0.3, warmup_s=0.05, seed=11, driver="batch")
    drifting, calm = (r.deliveries()["latency_s"].quantile(0.99) for r in (fast, steady))
    assert drifting > 1.5 * calm
