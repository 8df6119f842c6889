"""Overload: TCP flow control between publishers and a broker past its limit (issues 13, 18).

A broker with ``BrokerParams.overload`` set
(:class:`pubsim.models.params.overload.OverloadParams`) takes its publishers'
messages through bounded socket buffers: what it has not served yet stays in
its publishers' TCP connections, at most ``socket_buffer_bytes`` per
connection; a publisher whose buffer is full waits (its blocking ``send``),
so past the limit ingress falls to what the broker serves, nothing is lost,
the broker keeps serving at its CPU limit, and the latency of messages
stamped when sent levels off near one buffer's worth of messages over the
broker's throughput instead of growing with the run.

Measured on Mosquitto 2.0.11 (``calibration/README.md``, "Past the limit"),
read in its source (:mod:`pubsim.models.params.overload`). Fitted by
:class:`pubsim.calibration.overload.SocketBufferCalibrator`.

With ``receive_window_bytes`` and a flow-control cost, a message its
publisher sends once the connections hold more than their receive windows
costs the broker more CPU: its sending is then clocked by the broker's
window updates, and on loopback that work runs in the broker's softirq
(measured: ``calibration/README.md``, "Flow control moves the publishers'
sending onto the broker's core"; fitted by
:class:`pubsim.calibration.overload.FlowControlCostCalibrator`). A burst
that crosses the windows can then tip a broker into a slower state it
stays in while its offered load exceeds the slower capacity.

A broker with Mosquitto's event-loop passes (``io`` with
``cycle_max_per_connection``) gets the same buffers around its passes from
the iothreads mechanism
(:class:`pubsim.models.mechanisms.iothreads.FlowControlPassStation`); I/O
cycles that read whole buffers (NATS, the ZeroMQ proxy) are refused.

Approximations: the connections of a broker are pooled into one FIFO buffer
of ``connections x socket_buffer_bytes`` (exact for publishers sending at
equal rates; Mosquitto reads its readable connections in turn, one packet
each per pass); a message frees its bytes when its service ends, not when
it is read (one message's difference); copies arriving from other brokers
share the buffer but keep their publish times.
"""

from .plugin import OVERLOAD, Overload, check_overload
from .station import FlowControlBrokerStation

__all__ = ["OVERLOAD", "Overload", "FlowControlBrokerStation", "check_overload"]
