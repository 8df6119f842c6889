"""Disk time of one persistent message under a product's store design.

With a store (:class:`pubsim.models.params.store.StoreParams`) the disk
stage of a broker serves each persistent message in

    (message_ops + ack_ops) x op_latency
        + (size + overhead_bytes + ack_bytes) / write bandwidth
        + write_cost_per_byte x size
        [+ large_message_ops x op_latency + sync_latency   if size >= large_message_bytes]

and every write batch (group commit) adds a fixed

    sync_latency + sync_delay        (sync ``group``: batches up to the disk's
                                      ``batch_max_messages``; ``message``:
                                      batches of one; ``none``: sync_delay only)

The acknowledgement's record (delete / ack record) is written with the
message: the same disk work, earlier than the consumer's ack (an
approximation that keeps the route a tree). Messages consumed after they
left memory are read back in :func:`read_s` at the read station
(:mod:`.read`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["batch_rule", "write_s", "read_s", "ack_s"]


def batch_rule(disk, store) -> tuple[int, float]:
    """``(most messages per write batch, fixed time per batch in s)`` of a disk under ``store`` (or None)."""
    if store is None:
        return disk.batch_max_messages, disk.sync_latency_s
    if store.sync == "none":
        return disk.batch_max_messages, store.sync_delay_s
    most = 1 if store.sync == "message" else disk.batch_max_messages
    return most, disk.sync_latency_s + store.sync_delay_s


def write_s(disk, store, size_bytes):
    """Per-message disk time of ``size_bytes`` payloads (array), s, besides the batch's fixed time."""
    size = np.asarray(size_bytes, dtype=np.float64)
    if store is None:
        return size / disk.bandwidth_Bps
    ops = store.message_ops + store.ack_ops
    written = size + store.overhead_bytes + store.ack_bytes
    t = ops * disk.op_latency_s + written / disk.bandwidth_Bps + store.write_cost_per_byte_s * size
    if store.large_message_bytes is not None:
        large = size >= store.large_message_bytes
        t = t + large * (store.large_message_ops * disk.op_latency_s + disk.sync_latency_s)
    return t


def read_s(disk, store, size_bytes):
    """Time to read back messages of ``size_bytes`` (array) that are no longer in memory, s."""
    size = np.asarray(size_bytes, dtype=np.float64)
    return store.read_ops * disk.op_latency_s + size / disk.read_bandwidth_Bps


def ack_s(disk, store):
    """Disk time of one acknowledgement record written alone (no sync), s."""
    return store.ack_ops * disk.op_latency_s + store.ack_bytes / disk.bandwidth_Bps
