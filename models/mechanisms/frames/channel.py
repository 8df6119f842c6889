"""A broker's per-client YAMI4 channel of frames, with the subscriber reading at its end.

:class:`FrameChannelStation` is a :class:`pubsim.models.stations.core.LinkStation`
whose discipline is :class:`~.discipline.FrameDiscipline`: the message's wire
bytes (payload, framing, link overhead) are cut into frames, the frames wait
in a priority queue, leave it only while the send window has room, and the
window frees when the subscriber, served here, takes a message. The copy
leaves the station when the subscriber has processed it (its delivery).
"""

from __future__ import annotations

import numpy as np

from ...stations.core import LinkStation, _capped
from .discipline import FrameDiscipline

__all__ = ["FrameChannelStation"]


class FrameChannelStation(LinkStation):
    """A frame channel and its reader.

    Parameters
    ----------
    name, params, protocol, topic_bytes, streams, window, queue_messages, queue_bytes, **queue
        As for :class:`pubsim.models.stations.core.LinkStation` (drop-newest
        queue limits; overflow policies are refused with frames).
    frame_bytes : int
        Largest frame, bytes.
    send_window_bytes : int
        Send window between the queue and the reader, bytes.
    consumer : models.params.client.SubscriberParams
        The subscriber at the end of the channel (reads one message per ``processing_s``).
    consumer_name : str
        Its station name (its processing-time stream is the subscriber's own).
    """

    def __init__(
        self,
        name,
        params,
        *,
        protocol,
        topic_bytes,
        streams,
        window,
        frame_bytes,
        send_window_bytes,
        consumer,
        consumer_name,
        queue_messages=None,
        queue_bytes=None,
        **queue,
    ):
        super().__init__(
            name,
            params,
            protocol=protocol,
            topic_bytes=topic_bytes,
            streams=streams,
            window=window,
            queue_messages=queue_messages,
            queue_bytes=queue_bytes,
            **queue,
        )
        self.discipline = FrameDiscipline(
            frame_bytes=frame_bytes,
            window_bytes=send_window_bytes,
            bandwidth_Bps=params.bandwidth_Bps,
            delay_s=params.latency_s + params.jitter_s.min_value,  # constant jitter (others refused)
            capacity_messages=queue_messages,
            capacity_bytes=queue_bytes,
        )
        self.consumer = consumer
        self.processing = streams.draws(consumer.processing_s, consumer_name, "processing")

    def priority(self, packets):
        """Every frame channel orders by priority (FIFO within a level); all 0 on a FIFO queue."""
        if self.scheduling != "priority":
            return np.zeros(len(packets), dtype=np.int64)
        return _capped(self.plan.flow_priority[self.plan.flow[packets.visit]], self.max_priority)

    def before_run(self, packets, service_s, size_bytes):
        """The reader's time per message: processing (the sleep) plus decoding."""
        service = self.processing.take(len(packets))
        codec = self.consumer.serialization
        if codec is not None:
            service = service + codec.decode_s(packets.size)
        self.discipline.set_processing(service)

    def after_service(self, served):
        """Delivered when read and processed (times from the discipline); nothing lost."""
        return served.depart, np.zeros(len(served.depart), dtype=np.int64)

    @property
    def lookahead_s(self):
        p = self.params
        return p.latency_s + p.jitter_s.min_value + self.consumer.processing_s.min_value
