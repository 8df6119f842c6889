"""Load generator for real brokers: raw MQTT / NATS / ZeroMQ, one process per client.

:func:`run_load` drives a broker with :class:`LoadSpec` and returns a
:class:`LoadResult` with every delivery of the measurement window (latency,
loss, duplicates). Client libraries (paho, pika) saturate before the brokers
on a small machine, so the clients here speak the wire protocols directly
(:mod:`..mqttwire` over the shared codec :mod:`pubsim.models.protocol.mqtt`,
:mod:`..natswire`; ZeroMQ through pyzmq) from pre-encoded packets patched in
place.

Workload (shared with the simulated twin, :mod:`pubsim.calibration.workload`)
---------------------------------------------------------------------
Topic ``k`` is ``pubsim/t{k}`` (NATS subject ``pubsim.t{k}``). Publisher
``i`` sends its message ``seq`` on topic ``(seq + i) mod topics``: every
publisher cycles over all topics. Topic ``k`` is subscribed by the
``fanout`` subscribers ``(k * fanout + m) mod subscribers``, ``m = 0 ..
fanout - 1``; so each topic has exactly ``fanout`` subscribers and a message
is owed ``fanout`` deliveries. A subscriber left without a topic subscribes
to ``pubsim/idle``, which nobody publishes.

Message payload
---------------
``payload_bytes`` (>= 20) bytes; the first 20 are a little-endian header
``<HQQH``: publisher id (u16), sequence number (u64, from 0 per publisher),
send time (u64 ns of ``time.monotonic_ns``, CLOCK_MONOTONIC: one clock for
all processes of the host), topic index (u16). The rest is zeros. Set-up
probes carry sequence number 2**64 - 1 and are never counted.

ZeroMQ framing
--------------
One frame per message: the topic name, a NUL byte, then the payload.
Subscribers subscribe to ``topic + b"\\0"``, so ZeroMQ's prefix matching is
exact (``pubsim/t1`` does not match ``pubsim/t10``). ``zmq_mode="proxy"``:
publishers connect to ``pub_port`` (the proxy's XSUB side), subscribers to
``sub_port`` (its XPUB side). ``zmq_mode="direct"`` (no broker): every
subscriber binds an ephemeral port and every publisher connects to all of
them (the publishers do the fan-out). ``zmq_hwm`` sets ZMQ_SNDHWM on
publishers and ZMQ_RCVHWM on subscribers; a full queue drops messages
(counted as lost).

Pacing
------
Publisher ``i`` offers ``rate_per_s / publishers`` msg/s in batches of
``b`` messages: ``b = round(rate_i x batch_interval_s)`` clipped to
``[1, max_batch]`` (and to 256 KiB of packets), then rounded to a multiple
of ``topics`` when ``b >= topics`` or down to a divisor of ``topics``
otherwise (the packets of a batch are pre-encoded). Batch ``n`` is due at
``t0 + n x b / rate_i``: the publisher sleeps until it is due, stamps all
its messages with one send time (read just before they are patched) and
writes them with one ``sendall`` (ZeroMQ: one ``send`` per message). A
publisher behind schedule sends the next batch at once without sleeping,
and stops at ``t0 + duration_s`` whatever it still owes. Its lag (send time
minus due time) is reported. MQTT and NATS publishers also read the clock
just before each batch's ``sendall`` and the kernel's transmit time of
each batch (:mod:`..txstamp`): latency is counted from that write, so the
publisher's own delay before it (``send_delay_s``) is reported apart, as
the subscriber's is, and the transmit time gives the batch's wait for the
broker's TCP window (``socket_wait_s``). Messages whose send time is in ``[t0 +
warmup_s, t0 + duration_s - cooldown_s)`` are the measurement window; the
others are sent but not counted.

Run sequence
------------
1. Subscriber processes start, connect and subscribe (MQTT: SUBACK
   received; NATS: PING/PONG after the SUBs; ZeroMQ: subscription set).
2. Publisher processes start and connect (MQTT: CONNACK; NATS: PONG), then
   send a probe on every topic every 20 ms.
3. A subscriber is ready when it has received a probe from every publisher
   on every one of its topics: routing works end to end (this also waits
   out ZeroMQ's slow joiner).
4. When all are ready the parent tells the publishers to stop probing
   (``quiet``) and waits until each has; :func:`run_load`'s ``on_start``
   runs there (the harness lets the broker work off the probes and reads
   its counters). Then it sends a common start time ``t0`` (now + 0.1 s)
   and the publishers start at ``t0``.
5. Each publisher stops at ``t0 + duration_s``, flushes (MQTT PINGREQ /
   PINGRESP, NATS PING / PONG: the broker has read everything before it)
   and reports its batch send times.
6. Drain: ``drain_s`` if given, else until every copy owed for the messages
   sent has arrived, or no copy arrived for 0.5 s, or ``max_drain_s``.
7. Subscribers stop and send their records (numpy arrays, one record per
   received message: header + receive time); duplicates (a ``(publisher,
   seq)`` seen before) and out-of-order arrivals (a ``seq`` below one seen
   before from the same publisher) are flagged by the subscriber.

Processes are started with the ``forkserver`` context (``spawn`` where it
is unavailable), so a script calling :func:`run_load` needs the usual
``if __name__ == "__main__":`` guard. Children ignore SIGINT; on any error
or Ctrl-C in the parent they are terminated and joined in a ``finally``.
Children exit by themselves when the parent's pipe closes.
"""

from __future__ import annotations

# __all__ is the public interface as before the split; the other names stay importable from here
# (pacing_batch, batch_size: calibration.validate and the tests; STRIDE, _flag_records: the tests)
from .records import HEADER, HEADER_BYTES, PROBE_SEQ, RECORD_DTYPE, STRIDE, _flag_records, _Records  # noqa: F401
from .result import LoadResult
from .runner import run_load
from .spec import (  # noqa: F401
    BATCH_INTERVAL_S,
    MAX_BATCH,
    PROTOCOLS,
    QOS2_WINDOW,
    ZMQ_MODES,
    HarnessError,
    LoadSpec,
    PublisherBlocked,
    SetupTimeout,
    batch_size,
    max_batch_for,
    pacing_batch,
    subscriber_topics,
    topic_of,
)

__all__ = [
    "PROTOCOLS",
    "HEADER",
    "HEADER_BYTES",
    "RECORD_DTYPE",
    "PROBE_SEQ",
    "LoadSpec",
    "LoadResult",
    "HarnessError",
    "PublisherBlocked",
    "SetupTimeout",
    "run_load",
    "subscriber_topics",
    "topic_of",
]
