"""Large messages' pages faulted in again: the pages from the broker's design, their cost fitted.

Mosquitto's CPU per message grows faster than its bytes above 64 KiB: glibc
gives the top of its heap back to the kernel after each large message and
the next one faults those pages in again (:mod:`pubsim.models.params.heap`,
calibration/README.md, "Large messages: the heap given back and faulted in
again"). How many pages a message faults in follows from the broker's
buffers and glibc's defaults (``heap_trim`` in
:data:`pubsim.calibration.profile.BROKER_MODELS`; :func:`heap_rule`); what
a page costs is a busy term of the demand fit, ``heap_fault_cost_s``
(:func:`pubsim.calibration.fit.heap_pages_of`), identified where a training
payload faults pages (above 64 KiB for Mosquitto).

A page fault's cost measured apart on the machine
(:func:`pubsim.calibration.harness.machine.page_fault_cost`, ``meta.json``
``page_fault``) is recorded with every campaign for comparison, not used:
on 2026-12-08 it gave 2.8-2.9 us where Mosquitto's runs implied about 1.8 us.
"""

from __future__ import annotations

from ..models.params.heap import HeapTrimParams
from .profile import BROKER_MODELS

__all__ = ["heap_rule", "heap_rule_reason", "heap_trim_mapping"]


def heap_rule_reason(kind):
    """None if broker ``kind``'s allocator is known to give large buffers back after each message; else why not."""
    if "heap_trim" in BROKER_MODELS.get(kind, {}):
        return None
    return f"not fitted: {kind}'s allocator is not known to give large buffers back after each message"


def heap_rule(kind):
    """The pages rule of broker ``kind`` (:class:`HeapTrimParams` with no cost yet), or None."""
    if heap_rule_reason(kind) is not None:
        return None
    model = BROKER_MODELS[kind]["heap_trim"]
    return HeapTrimParams(live_buffers=model["live_buffers"], top_pad_bytes=model["top_pad_bytes"])


def heap_trim_mapping(kind, fault_cost_s, *, data):
    """The profile's ``heap_trim`` mapping of broker ``kind`` with a fitted cost per page (s), with
    its provenance (``data``: the training runs' reference)."""
    rule = heap_rule(kind)
    return {
        "live_buffers": rule.live_buffers,
        "top_pad_bytes": rule.top_pad_bytes,
        "fault_cost_s": f"{fault_cost_s * 1e6:.4g}us",
        "provenance": {
            "source": "measured",
            "reference": data,
            "note": (
                f"pages: {BROKER_MODELS[kind]['heap_trim']['source']}; cost per page fitted with the other busy "
                "costs (heap_fault_cost_s, on the pages the rule gives each training run's payload)"
            ),
        },
    }
