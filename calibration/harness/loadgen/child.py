"""What the client processes of a load run share: set-up, error reports, timing constants."""

from __future__ import annotations

import os
import signal
import traceback

from .. import procfs

_PROBE_PERIOD_NS = 20_000_000  # a publisher's probe round while waiting for the start, ns
_CONTROL_PERIOD_NS = 50_000_000  # how often a client polls the parent's pipe, ns
_READ_BYTES = 256 * 1024  # one recv of a subscriber, bytes
_FLUSH_TIMEOUT_S = 10.0  # a publisher's final flush (PINGREQ / PING), s

_schedstat = procfs.thread_schedstat
_switches = procfs.thread_switches


def _child_setup(cpus):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cpus is not None:
        os.sched_setaffinity(0, cpus)


def _report_error(conn, role, index):
    try:
        conn.send(("error", f"{role} {index}: {traceback.format_exc()}"))
    except Exception:  # noqa: BLE001 - the parent is gone
        pass
