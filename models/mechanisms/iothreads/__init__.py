"""Multi-threaded broker structure: I/O cycles with batched flushes (issues 13, 15).

A broker with ``BrokerParams.io`` set is served in I/O cycles: a cycle reads
everything that arrived since the previous one began, routes it (the
messages' own demands, FIFO by arithmetic) and flushes each connection's
output buffer once, for a fixed cost per cycle plus one per connection
(:class:`pubsim.models.params.io.IoParams`). CPU per message then falls with
load (the fixed costs are shared by larger cycles), and under a CPU quota the
broker uses its whole quota once the cycles' fixed costs fill it, so
throttling stalls appear far below its message limit. Modelled after
nats-server 2.9.10 (``readLoop`` / ``flushClients`` / ``flushOutbound``) and
libzmq 4.3.5 (``stream_engine_base::out_event`` batching up to
``out_batch_size``).

With ``io.cycle_max_per_connection`` set, the server is Mosquitto's event
loop instead (:mod:`.pass_kernel`): each pass reads that many messages from
every connection with data at its start, in arrival order, and the rest
wait for later passes, so k publishers with a backlog share each pass
whatever the order their messages arrived in. With ``BrokerParams.overload``
too, the passes sit behind the publishers' bounded socket buffers
(:class:`.station.FlowControlPassStation`; :mod:`.pass_kernel`, Socket
buffers), as the FIFO worker of :mod:`pubsim.models.mechanisms.overload`.

Approximations: the routing and the I/O thread(s) are one server sharing the
broker's CPU; a message leaves when its own routing ends, not at the end of
its cycle's flush, and the cycle's cost follows its last member (off the
messages' path: measured NATS CPU per message at 200 msg/s, 83 us, exceeds
its 1st latency percentile, 67 us); the flush cost counts the connections
of the message that opened the cycle.
"""

from .plugin import IOTHREADS, IoThreads, check_io
from .station import CycleBrokerStation, FlowControlPassStation

__all__ = ["IOTHREADS", "IoThreads", "CycleBrokerStation", "FlowControlPassStation", "check_io"]
