"""A broker's event-loop passes, counted on the real process with ``perf stat``.

Mosquitto 2.0 (``src/mux_epoll.c`` ``mux_epoll__handle``) runs one
``epoll_wait`` per pass of its main loop and then calls
``loop_handle_reads_writes`` once per ready connection, which reads one
packet (``lib/packet_mosq.c`` ``packet__read``), however many the socket
holds. So a pass reads at most one PUBLISH per connection: with ``k``
connections ready, ``k`` messages share the pass's fixed work
(``epoll_wait`` between two ``sigprocmask``, the time calls, the periodic
checks of ``src/loop.c`` ``mosquitto_main_loop``).

:class:`SyscallCounter` counts system calls of one process through the
kernel's ``syscalls:sys_enter_*`` tracepoints (``perf stat -p PID``, Debian's
``linux-perf``), without stopping or slowing it the way ``strace`` does.
:func:`passes_per_message` checks the one-packet-per-connection rule on a
running broker: it stops the broker (``SIGSTOP``), lets ``connections``
publishers each queue ``n`` PUBLISHes in their sockets, resumes it and
counts ``epoll_wait`` calls per PUBLISH (``1 / connections`` if the rule
holds, far less if a pass read whole buffers).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from ...models.protocol.mqtt import encode_publish
from ...sim.errors import ConfigError
from . import mqttwire as mw
from .perfctl import ControlledPerf
from .syscalls import receive_bytes

__all__ = ["SyscallCounter", "perf_syscalls_available", "parse_perf_csv", "parse_perf_events", "passes_per_message"]


def _events(syscalls):
    return ",".join(f"syscalls:sys_enter_{name}" for name in syscalls)


def perf_syscalls_available(syscalls=("epoll_wait",)):
    """``(True, "")`` if ``perf stat`` can count these system calls here, else ``(False, reason)``."""
    if shutil.which("perf") is None:
        return False, "perf not installed (Debian: linux-perf)"
    try:
        out = subprocess.run(
            ["perf", "stat", "-x", ",", "-e", _events(syscalls), "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"perf stat failed: {err}"
    counts = parse_perf_csv(out.stderr)
    if out.returncode != 0 or set(counts) != set(syscalls) or any(v is None for v in counts.values()):
        tail = out.stderr.strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        return False, f"perf cannot count syscalls tracepoints here: {tail[0]}"
    return True, ""


def parse_perf_events(text):
    """``{event: count or None}`` from ``perf stat -x ,`` output, every event it names (None:
    not counted; ``task-clock`` in ms, as perf reports it)."""
    counts = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or not parts[2] or line.startswith("#"):
            continue
        counts[parts[2]] = float(parts[0]) if parts[0].replace(".", "", 1).isdigit() else None
    return counts


def parse_perf_csv(text):
    """``{syscall: count or None}`` from ``perf stat -x ,`` output (None: not counted)."""
    prefix = "syscalls:sys_enter_"
    return {e[len(prefix) :]: n for e, n in parse_perf_events(text).items() if e.startswith(prefix)}


class SyscallCounter:
    """Count system calls of process ``pid`` (all its threads) while the ``with`` block runs.

    ``perf stat`` starts with its events disabled (``--delay -1``) and is
    enabled through its control descriptor (``--control fd:CTL,ACK``), which
    it acknowledges once counting: so counting starts exactly at
    :meth:`enable` (on entering the block when ``enabled``), and needs no
    guessed attach time. Counting by tracepoint stays in the kernel: the
    process is neither stopped nor slowed the way ``strace`` does.

    Parameters
    ----------
    pid : int
    syscalls : tuple of str
        System call names (``epoll_wait``, ``read``, ``write``, ...).
    enabled : bool
        Start counting on entering the block (else at :meth:`enable`).

    Attributes
    ----------
    counts : dict
        After the block: ``{syscall: count}``.
    """

    def __init__(self, pid, syscalls=("epoll_wait", "read", "write"), *, enabled=True):
        self.pid = int(pid)
        self.syscalls = tuple(syscalls)
        self.enabled = enabled
        self.counts = {}
        self._perf = None

    def __enter__(self):
        args = ["stat", "-x", ",", "-e", _events(self.syscalls), "-p", self.pid]
        self._perf = ControlledPerf(args).start()
        if self.enabled:
            self.enable()
        return self

    def enable(self):
        """Start counting now (returns once ``perf`` has acknowledged)."""
        self._perf.enable(f"counting the system calls of {self.pid}")

    def __exit__(self, *exc):
        err = self._perf.stop(30)
        counts = parse_perf_csv(err)
        missing = [s for s in self.syscalls if counts.get(s) is None]
        if missing and exc[0] is None:
            raise RuntimeError(f"perf stat did not count {missing}: {err.strip()[-300:]}")
        self.counts = counts
        return False


def passes_per_message(port, pid, *, connections, n=200, payload_bytes=64, topic="pubsim/t0", settle_s=0.5):
    """``epoll_wait`` calls of broker ``pid`` per PUBLISH when ``connections`` sockets each hold ``n``.

    The broker is stopped while every publisher writes ``n`` PUBLISHes
    (QoS 0, to one subscriber) into its socket, then resumed; the count runs
    until the subscriber has received them all. Each socket then stays
    ready until drained, so a broker that reads one packet per ready
    connection per pass needs about ``n`` passes for ``connections x n``
    messages.

    Returns
    -------
    dict
        ``connections``, ``messages``, ``epoll_wait_per_message``, ``reads_per_message``.
    """
    if connections < 1 or n < 1:
        raise ConfigError("connections, n", (connections, n), "integers >= 1")
    sub, sub_stream = mw.connect(port, "pubsim-passes-sub")
    pubs = [mw.connect(port, f"pubsim-passes-pub{i}")[0] for i in range(connections)]
    try:
        mw.subscribe(sub, sub_stream, topic)
        packet = encode_publish(topic, b"x" * int(payload_bytes))
        total = connections * n
        with SyscallCounter(pid, ("epoll_wait", "read")) as counter:
            os.kill(pid, signal.SIGSTOP)
            try:
                for p in pubs:
                    p.sendall(packet * n)
            finally:
                os.kill(pid, signal.SIGCONT)
            receive_bytes(sub, total * len(packet), settle_s + 10.0)
            time.sleep(settle_s)
        return {
            "connections": connections,
            "messages": total,
            "epoll_wait_per_message": counter.counts["epoll_wait"] / total,
            "reads_per_message": counter.counts["read"] / total,
        }
    finally:
        for s in pubs + [sub]:
            s.close()
