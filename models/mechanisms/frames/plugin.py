"""YAMI4 frame channels as a registry entry.

A broker with ``client_frame_bytes`` set (:class:`pubsim.models.params.broker.BrokerParams`)
sends to each of its subscribers through a
:class:`~.channel.FrameChannelStation`: its per-client queue holds frames,
ordered by priority when the queue is a priority queue (the priority
mechanism's queue options apply), behind a send window of
``client_send_window_bytes``; the subscriber is served inside it (its reads
free the window). Without ``client_frame_bytes`` nothing changes.
"""

from __future__ import annotations

from ..context import CompileContext
from ..keys import StationKey, StationKind
from .channel import FrameChannelStation

__all__ = ["FRAMES", "Frames"]


class Frames:
    """Frame channels on the downlinks of brokers that frame their messages."""

    name = "frames"

    def _broker(self, ctx: CompileContext, s):
        b = ctx.home(s)
        if b not in ctx.brokers:
            return None
        bp = ctx.params(b)
        return bp if bp.client_frame_bytes is not None else None

    def link_options(self, ctx: CompileContext, key: StationKey) -> dict | None:
        """A FrameChannelStation, its frame size, window and reader, on a framing broker's downlink."""
        if key.kind is not StationKind.DOWNLINK:
            return None
        bp = self._broker(ctx, key.node)
        if bp is None:
            return None
        return {
            "station_class": FrameChannelStation,
            "frame_bytes": bp.client_frame_bytes,
            "send_window_bytes": bp.client_send_window_bytes,
            "consumer": ctx.params(key.node),
            "consumer_name": f"subscriber:{key.node}",
        }

    def folds_subscriber(self, ctx: CompileContext, subscriber) -> bool:
        """A subscriber of a framing broker reads inside its channel (its reads free the window)."""
        return self._broker(ctx, subscriber) is not None


FRAMES = Frames()
