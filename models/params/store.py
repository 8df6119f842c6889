"""How a broker product stores persistent messages (journal, index, message store).

A store design says what the broker writes per persistent message, when it
syncs, what an acknowledgement writes and what it keeps in memory; its
disk (:class:`pubsim.models.params.disk.DiskParams`) says how long that
takes. The station arithmetic is in
:mod:`pubsim.models.mechanisms.persistence.store`; the shipped presets
(``models/presets/stores.yaml``: RabbitMQ message store, ActiveMQ KahaDB,
Artemis journal) state where each value comes from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["StoreParams", "SYNC_POLICIES"]

#: When the store syncs: ``group`` (one sync for whatever queued while the
#: previous one ran, up to the disk's ``batch_max_messages``), ``message``
#: (a sync per message) or ``none`` (writes only; the OS flushes later).
SYNC_POLICIES = ("group", "message", "none")


@dataclass(frozen=True, kw_only=True)
class StoreParams:
    """A broker product's store for persistent messages.

    Parameters
    ----------
    product : str
        Label (``rabbitmq``, ``kahadb``, ``artemis``); informational.
    message_ops : int
        Write operations per persistent message (journal append, index
        entry, message-store append), each costing the disk's
        ``op_latency_s`` besides its transfer.
    overhead_bytes : int
        Bytes written per message besides its payload (record headers,
        index entries, marshalled properties).
    sync : str
        ``group``, ``message`` or ``none`` (:data:`SYNC_POLICIES`).
    sync_delay_s : float
        Time a group sync waits before it starts (a flush timer such as
        Artemis's ``journal-buffer-timeout``), s; added to every sync.
    large_message_bytes : int or None
        Messages of at least this size are written to a file of their own
        with a sync of their own (Artemis large messages); None = never.
    large_message_ops : int
        Extra operations of such a message (file create, write, close).
    ack_bytes : int
        Bytes of the record an acknowledgement writes (a delete or ack
        record; 0 = nothing written).
    ack_ops : int
        Write operations per acknowledgement.
    write_cost_per_byte_s : float
        CPU of the store's writer per payload byte (copying into the write
        buffer, marshalling, checksums), s/byte; spent on the disk's path,
        before the write.
    memory_bytes : int or None
        Message bytes the broker keeps in memory; beyond them (and
        ``memory_fraction`` and the page cache) messages are only on disk and
        are read back when consumed. None = all in memory (nothing is read
        back).
    memory_fraction : float
        Further share of the host's memory the broker keeps messages in
        (a limit relative to the machine, as RabbitMQ's paging watermark).
        Without a host or a stated host memory such a limit does not bind:
        everything stays in memory.
    page_cache_fraction : float
        Share of the host's memory (``HostParams.memory_bytes``) the OS page
        cache holds of the store's files: reads within it cost no disk
        operation. Not counted without a host or a stated host memory.
    read_ops : int
        Operations per message read back (index lookup, file read).
    batch_max_bytes : int or None
        Most bytes one write batch (one sync) takes (KahaDB's journal write
        batch); None = no limit. A batch always takes its first message.
    provenance : Provenance
    """

    product: str = field(default="", metadata={"unit": "text"})
    message_ops: int = field(default=1, metadata={"unit": "count"})
    overhead_bytes: int = field(default=0, metadata={"unit": "size"})
    sync: str = field(default="group", metadata={"unit": "choice", "choices": SYNC_POLICIES})
    sync_delay_s: float = field(default=0.0, metadata={"unit": "duration"})
    large_message_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    large_message_ops: int = field(default=0, metadata={"unit": "count"})
    ack_bytes: int = field(default=0, metadata={"unit": "size"})
    ack_ops: int = field(default=0, metadata={"unit": "count"})
    write_cost_per_byte_s: float = field(default=0.0, metadata={"unit": "float"})
    memory_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    memory_fraction: float = field(default=0.0, metadata={"unit": "probability"})
    page_cache_fraction: float = field(default=0.0, metadata={"unit": "probability"})
    read_ops: int = field(default=1, metadata={"unit": "count"})
    batch_max_bytes: int | None = field(default=None, metadata={"unit": "optional_size"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.write_cost_per_byte_s >= 0:
            raise ConfigError("write_cost_per_byte_s", self.write_cost_per_byte_s, "a cost >= 0 s/byte")
        if self.large_message_bytes is not None and not self.large_message_bytes > 0:
            raise ConfigError("large_message_bytes", self.large_message_bytes, "a size > 0 bytes (or unset)")

    def resident_bytes(self, host_memory_bytes: int | None) -> float:
        """Bytes of stored messages held in memory (broker memory plus page cache); inf = all."""
        if self.memory_bytes is None:
            return math.inf
        if host_memory_bytes is None:  # no machine stated: a limit relative to it does not bind
            return math.inf if self.memory_fraction > 0 else float(self.memory_bytes)
        share = self.memory_fraction + self.page_cache_fraction
        return self.memory_bytes + share * host_memory_bytes
