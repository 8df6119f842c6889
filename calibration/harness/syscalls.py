"""System calls a real MQTT broker makes per PUBLISH, counted from ``/proc/PID/io``.

A mechanism check for the model's cost terms (``BrokerParams.length_byte_cost_s``):
Mosquitto 2.0 (``lib/packet_mosq.c`` ``packet__read``) reads a packet's
command byte, then each byte of its remaining length, then the rest, each
with its own ``read``, so a PUBLISH costs ``2 + remaining-length bytes``
reads (:func:`pubsim.models.protocol.mqtt_length_bytes`). One publisher and
one subscriber send ``n`` PUBLISHes of each size one at a time (``gap_s``
apart, so each is read on its own) and the broker's ``syscr`` / ``syscw``
and voluntary context switches are read before and after.
"""

from __future__ import annotations

import time

from ...models.protocol.mqtt import encode_publish
from . import mqttwire as mw
from . import procfs

__all__ = ["publish_syscalls", "receive_bytes"]


def _counters(pid):
    io = procfs.io_counters(pid)
    return io["syscr"], io["syscw"], procfs.sample(pid).voluntary_switches


def receive_bytes(sock, nbytes, timeout_s):
    """Read and discard ``nbytes`` from ``sock`` (a subscriber's deliveries), within ``timeout_s`` per read."""
    sock.settimeout(timeout_s)
    got = 0
    while got < nbytes:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the broker closed the subscriber's connection")
        got += len(chunk)


def publish_syscalls(port, pid, payload_sizes, *, n=500, topic="pubsim/t0", gap_s=5e-4, timeout_s=10.0):
    """Read and write system calls and wake-ups of broker ``pid`` per PUBLISH of each payload size.

    Parameters
    ----------
    port : int
        The broker's MQTT port on 127.0.0.1.
    pid : int
        Its process (the one whose ``/proc/PID/io`` counts).
    payload_sizes : iterable of int
        Payload sizes, bytes.
    n : int
        PUBLISHes (QoS 0) per size.
    topic : str
        Topic of every PUBLISH (the harness's: 9 bytes).
    gap_s : float
        Pause after each PUBLISH, s.
    timeout_s : float
        Longest wait for the subscriber to receive a size's copies, s.

    Returns
    -------
    list of dict
        Per size: ``payload_bytes``, ``reads_per_publish``, ``writes_per_publish``,
        ``wakeups_per_publish`` (voluntary context switches).
    """
    sub, sub_stream = mw.connect(port, "pubsim-syscalls-sub")
    pub, _ = mw.connect(port, "pubsim-syscalls-pub")
    try:
        mw.subscribe(sub, sub_stream, topic)
        rows = []
        for size in payload_sizes:
            packet = encode_publish(topic, b"x" * int(size))
            before = _counters(pid)
            for _ in range(n):
                pub.sendall(packet)
                time.sleep(gap_s)
            receive_bytes(sub, n * len(packet), timeout_s)
            time.sleep(0.05)  # the broker's last write is counted before its next read
            after = _counters(pid)
            reads, writes, wakeups = ((a - b) / n for a, b in zip(after, before))
            rows.append(
                {
                    "payload_bytes": int(size),
                    "reads_per_publish": reads,
                    "writes_per_publish": writes,
                    "wakeups_per_publish": wakeups,
                }
            )
        return rows
    finally:
        pub.close()
        sub.close()
