"""What a broker's write of a copy costs when it wakes the copy's reader.

On loopback a broker's ``write`` to a subscriber's socket runs the
receiver's TCP input in the broker's own context, and if the reader sleeps
in ``recv`` it wakes it there (``sk_data_ready`` -> ``try_to_wake_up``;
on another core an inter-processor interrupt, on a VM a VM exit). A reader
that is still awake (busy with an earlier copy, or runnable) costs none of
that. Counted on the calibration VM with ``perf stat -e sched:sched_waking``
on Mosquitto 2.0.11 (calibration/README.md, "Fan-out up to 100"): 0.23
wake-ups a copy at fan-out 4 and 2,400 msg/s, 0.99-1.00 at fan-out 16 and
100 at light loads, where a copy cost 20-22 us against 18 us at 0.78.

A reader is awake for a while after each copy written to it: until it has
read it, and if readers share one core (the harness runs every client on
client core 0), until the core got to it. The broker writes a message's
copies one after the other, so on a shared core the reader of the copy of
rank ``k`` (0 first) reads it about ``(k + 1) x copy_s`` after the write;
on cores of their own every reader within ``copy_s``
(:mod:`pubsim.models.mechanisms.readers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...sim.errors import ConfigError
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["ReaderWakeParams"]


@dataclass(frozen=True, kw_only=True)
class ReaderWakeParams:
    """Extra broker CPU for a copy whose reader sleeps, and how long a reader stays awake.

    Parameters
    ----------
    wake_cost_s : float
        Broker CPU per copy that wakes its reader, on top of
        ``delivery_cost_s``, s (fitted on the subscribers' measured sleeps
        per copy, :class:`pubsim.calibration.fit.BrokerDemandCalibrator`,
        ``fit_reader_wakes``).
    copy_s : float
        A reader's time per copy once woken: its own CPU per copy (the
        harness measures ``subscriber_cpu_per_copy_s``), s, > 0.
    shared_core : bool
        True (default): the readers share one core and read a message's
        copies in the order the broker wrote them, so the reader of rank
        ``k`` stays awake ``(k + 1) x copy_s`` after the write; False: each
        reader on a core of its own, awake ``copy_s``.
    provenance : Provenance
    """

    wake_cost_s: float = field(metadata={"unit": "duration"})
    copy_s: float = field(metadata={"unit": "duration"})
    shared_core: bool = field(default=True, metadata={"unit": "flag"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.copy_s > 0:
            raise ConfigError("copy_s", self.copy_s, "a reader's time per copy > 0 s")
