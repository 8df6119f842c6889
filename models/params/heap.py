"""A broker whose allocator gives large messages' memory back to the kernel after each one.

glibc's ``malloc`` returns the free memory at the top of its heap to the
kernel (``brk``) when more than ``M_TRIM_THRESHOLD`` is free there, keeping
``M_TOP_PAD`` (both 128 KiB by default, mallopt(3)). A broker that allocates
a message's buffers, frees them when the message is sent and idles its heap
at the top therefore hands all but ``M_TOP_PAD`` of them back after every
message, and the next message touches those pages again: each is a minor
page fault (the kernel allocates, zeroes and charges a page). Mosquitto
2.0.11 holds two payload-sized buffers at once per QoS 0 message (the
incoming packet, ``lib/packet_mosq.c`` ``packet__read``, and the stored
payload, ``src/handle_publish.c``; each outgoing packet is allocated after
the incoming one is freed, ``packet__alloc``), so it faults in
``2 x payload - 128 KiB`` per message. Counted on the calibration VM
(2026-12-08, ``experiments/calibration/payload_allocator.py`` and
``calibration/README.md``, "Large messages: the heap given back and faulted
in again"): 0 faults at 64 KiB, 16 at 96 KiB, 32 at 128 KiB, 96 at 256 KiB,
224 at 512 KiB, the same at fan-out 2; with glibc told not to trim, the
256 KiB message cost 82 instead of 333 us.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["HeapTrimParams"]


@dataclass(frozen=True, kw_only=True)
class HeapTrimParams:
    """Pages a broker faults in again per message, and what each costs.

    A message of ``size`` bytes costs ``fault_cost_s x pages(size)`` more,
    ``pages = ceil(max(0, live_buffers x size - top_pad_bytes) / page_bytes)``
    (:meth:`pages`).

    Parameters
    ----------
    live_buffers : int
        Message-sized buffers the broker holds at once per message (2 for
        Mosquitto 2.0 at QoS 0: the incoming packet and the stored payload).
    top_pad_bytes : int
        Memory the allocator keeps at the top of its heap when it trims,
        bytes (glibc ``M_TOP_PAD``, 128 KiB by default).
    page_bytes : int
        Page size, bytes (4 KiB on x86-64).
    fault_cost_s : float
        CPU per page faulted in, s: a minor fault (allocate, zero and charge
        the page), its share of ``brk`` and of giving the page back.
    provenance : Provenance
    """

    live_buffers: int = field(default=2, metadata={"unit": "positive_count"})
    top_pad_bytes: int = field(default=131072, metadata={"unit": "size"})
    page_bytes: int = field(default=4096, metadata={"unit": "size"})
    fault_cost_s: float = field(default=0.0, metadata={"unit": "duration"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.page_bytes > 0:
            raise ConfigError("page_bytes", self.page_bytes, "a page size > 0 bytes")
        if not (self.fault_cost_s >= 0 and math.isfinite(self.fault_cost_s)):
            raise ConfigError("fault_cost_s", self.fault_cost_s, "a finite cost >= 0 s")

    def pages(self, size_bytes: float | np.ndarray) -> float | np.ndarray:
        """Pages faulted in again per message of ``size_bytes`` (scalar or array)."""
        extra = np.maximum(self.live_buffers * np.asarray(size_bytes, dtype=float) - self.top_pad_bytes, 0.0)
        out: float | np.ndarray = np.ceil(extra / self.page_bytes)
        return out

    def cost_s(self, size_bytes: float | np.ndarray) -> float | np.ndarray:
        """CPU per message of ``size_bytes`` spent faulting its pages in again, s."""
        out: float | np.ndarray = self.fault_cost_s * self.pages(size_bytes)
        return out
