"""Static bridges between brokers (Mosquitto style), the simpler alternative to ILDM.

A Mosquitto bridge is configured at one broker (``local``) with lines
``topic <pattern> out|in|both``: ``out`` patterns are forwarded from the
local broker to the remote one, ``in`` patterns from the remote to the local
one (mosquitto.conf(5), "Configuring Bridges"). In a topology with
``forwarding: bridge`` each broker-broker edge may carry a
:class:`BridgeParams` under the edge attribute :data:`pubsim.models.topology.BRIDGE`;
a copy crosses the edge only if its topic matches a pattern of that
direction. An edge without one forwards nothing. On a tree a copy never
returns to where it came from, so there are no loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["BridgeParams"]


@dataclass(frozen=True, kw_only=True)
class BridgeParams:
    """Topic patterns of one bridge.

    Parameters
    ----------
    local : str
        The broker where the bridge is configured (one end of the edge).
    topics_out : tuple of str
        Filters forwarded from ``local`` to the other end.
    topics_in : tuple of str
        Filters forwarded from the other end to ``local``.
    provenance : Provenance
    """

    local: str = field(default="", metadata={"unit": "text"})
    topics_out: tuple = field(default=(), metadata={"unit": "strings"})
    topics_in: tuple = field(default=(), metadata={"unit": "strings"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.local:
            raise ConfigError("local", self.local, "the name of the broker where the bridge is configured")

    def patterns(self, a: Any, b: Any) -> dict[tuple[Any, Any], tuple]:
        """``{(a, b): filters, (b, a): filters}`` for the edge (a, b)."""
        if self.local not in (str(a), str(b)):
            raise ConfigError("bridge.local", self.local, f"one end of the edge ({a!r}, {b!r})")
        remote = b if str(a) == self.local else a
        local = a if remote is b else b
        return {(local, remote): self.topics_out, (remote, local): self.topics_in}
