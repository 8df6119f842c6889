"""The server stage of request/reply: work between a request and its reply.

A broker with ``reply`` (:class:`pubsim.models.params.patterns.ReplyParams`)
is a request/reply server. On the route of a request (a closed-loop
client's flow) the broker's visit is followed by this station, and the
copy that leaves it is the reply. Service time of one request (FIFO
workers)::

    server_s + decode(request bytes) + encode(reply bytes)

with ``decode`` and ``encode`` those of the server's ``serialization`` (0
without one). The reply's size is drawn from ``size_bytes`` (times the
format's ``size_ratio``), or is the request's size when ``size_bytes`` is
None; every station after this one (the reply link, the client's decoding)
sees the reply's size. Draws are taken in arrival order, which both drivers
share, so they agree record for record.
"""

from __future__ import annotations

import numpy as np

from ....sim.disciplines import FifoDiscipline, Overflow
from ...stations.core import ModelStation

__all__ = ["ServerStation"]


class ServerStation(ModelStation):
    """A request/reply server: FIFO workers, service as in the module docstring.

    Parameters
    ----------
    name : str
    params : pubsim.models.params.patterns.ReplyParams
    streams : pubsim.sim.rng.StreamFactory
    window : (float, float)
    """

    def __init__(self, name, params, *, streams, window):
        cap = None if params.queue_messages is None else params.queue_messages + params.workers
        disc = FifoDiscipline(servers=params.workers, capacity_messages=cap, overflow=Overflow.DROP_NEWEST)
        super().__init__(name, "server", disc, servers=params.workers, window=window)
        self.params = params
        self.codec = params.serialization
        self.work = streams.draws(params.server_s, name, "server")
        self.sizes = None if params.size_bytes is None else streams.draws(params.size_bytes, name, "reply_size")
        self._reply = {}  # (msg, visit) -> reply bytes, from arrival until the copy leaves or is dropped

    def _reply_bytes(self, packets):
        if self.sizes is None:
            return packets.size.copy()
        raw = self.sizes.take(len(packets))
        ratio = 1.0 if self.codec is None else self.codec.size_ratio
        return np.maximum(np.rint(raw * ratio), 0).astype(np.int64)

    def service_s(self, packets):
        reply = self._reply_bytes(packets)
        self._reply.update(zip(zip(packets.msg.tolist(), packets.visit.tolist()), reply.tolist()))
        service = self.work.take(len(packets))
        if self.codec is not None:
            service = service + self.codec.decode_s(packets.size) + self.codec.encode_s(reply)
        return service

    def process(self, packets, horizon):
        """Serve requests; the copies that leave are the replies (with their sizes)."""
        out = super().process(packets, horizon)
        for p in (out.dropped,):
            for key in zip(p.msg.tolist(), p.visit.tolist()):
                self._reply.pop(key, None)
        dep = out.departed
        if len(dep):
            dep.size = np.array([self._reply.pop(k) for k in zip(dep.msg.tolist(), dep.visit.tolist())], dtype=np.int64)
        return out

    @property
    def lookahead_s(self):
        codec = self.codec
        return self.params.server_s.min_value + (0.0 if codec is None else codec.decode_cost_s + codec.encode_cost_s)
