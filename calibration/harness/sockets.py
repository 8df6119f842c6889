"""The broker's side of its client connections during a run, sampled with ``ss -tmi``.

Linux autotunes a connection's receive buffer (``net/ipv4/tcp_input.c``
``tcp_rcv_space_adjust``): once per receiver round trip, if the
application copied more than in the best round trip so far, the buffer
grows to about twice that (plus 16 segments). A publisher whose data the
broker has not read within the window is flow-controlled, and its sending
then runs on the broker's core (``calibration/README.md``, "Flow control
moves the publishers' sending onto the broker's core"); whether a run's
windows grew before its first backlog decided whether it collapsed there.
:class:`SocketSampler` records the windows, so a campaign can tell.

``ss`` runs as a process on the caller's core every ``interval_s``
(a few ms of CPU each): keep the interval long against the run.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import threading
import time

import numpy as np

__all__ = ["FIELDS", "SocketSampler", "parse_ss", "ss_available"]

#: Columns of :meth:`SocketSampler.fields`: medians over the publishers' connections.
FIELDS = (
    "pub_rcv_window_start_bytes",
    "pub_rcv_window_max_bytes",
    "pub_recv_queue_max_bytes",
    "pub_rcv_rtt_s",
)

_HEAD = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s*$")
_INFO = {
    "rb": re.compile(r"\brb(\d+)"),
    "rcv_ssthresh": re.compile(r"\brcv_ssthresh:(\d+)"),
    "rcv_space": re.compile(r"\brcv_space:(\d+)"),
    "rcv_rtt_ms": re.compile(r"\brcv_rtt:([\d.]+)"),
    "bytes_received": re.compile(r"\bbytes_received:(\d+)"),
}


def parse_ss(text):
    """Connections in ``ss -tmniH state established`` output: one dict each.

    Keys: ``peer``, ``recv_q`` (bytes unread), ``rb`` (receive buffer),
    ``rcv_ssthresh`` (the window it advertises at most, bytes),
    ``rcv_space``, ``rcv_rtt_s`` (the receiver's round-trip estimate, s) and
    ``bytes_received``; a field ``ss`` did not print is NaN.
    """
    out = []
    lines = text.splitlines()
    for head, info in zip(lines, lines[1:]):
        m = _HEAD.match(head)
        if m is None:
            continue
        row = {"peer": m.group(4), "recv_q": int(m.group(1))}
        for key, pat in _INFO.items():
            got = pat.search(info)
            row[key] = float(got.group(1)) if got else math.nan
        row["rcv_rtt_s"] = row.pop("rcv_rtt_ms") / 1e3
        out.append(row)
    return out


def ss_available():
    """``(True, "")`` if ``ss`` (iproute2) is installed, else ``(False, reason)``."""
    if shutil.which("ss") is None:
        return False, "ss not installed (Debian: iproute2)"
    return True, ""


class SocketSampler:
    """Sample the connections on the broker's ``port`` every ``interval_s`` while the block runs.

    Parameters
    ----------
    port : int
        The broker's listening port (its side of each connection has it as source port).
    interval_s : float
        Time between samples, s.

    Attributes
    ----------
    samples : list of (float, list of dict)
        ``time.monotonic()`` and :func:`parse_ss` of each sample.
    """

    def __init__(self, port, *, interval_s=0.2):
        self.port = int(port)
        self.interval_s = float(interval_s)
        self.samples = []
        self._stop = threading.Event()
        self._thread = None
        self._start = -math.inf

    def __enter__(self):
        self._thread = threading.Thread(target=self._loop, name="ss-sampler", daemon=True)
        self._thread.start()
        return self

    def enable(self):
        """The run's common start: :meth:`fields` reads the samples from here on (as the other
        probes of a run start counting at their ``enable``)."""
        self._start = time.monotonic()

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)
        return False

    def _loop(self):
        cmd = ["ss", "-tmniH", "state", "established", f"( sport = :{self.port} )"]
        while not self._stop.is_set():
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
            self.samples.append((time.monotonic(), parse_ss(out)))
            self._stop.wait(self.interval_s)

    def fields(self, min_share=0.5):
        """Medians over the publishers' connections (NaN without samples): the window each
        advertised at its first sample from :meth:`enable`, its largest window and unread bytes, and
        its last round-trip estimate. A publisher's connection is one that received at least
        ``min_share`` of the bytes of the connection that received most."""
        out = dict.fromkeys(FIELDS, math.nan)
        per = {}
        for t, conns in self.samples:
            for c in conns:
                per.setdefault(c["peer"], []).append((t, c))
        if not per:
            return out
        received = {p: max(c["bytes_received"] for _, c in v) for p, v in per.items()}
        top = max(received.values())
        pubs = [v for p, v in per.items() if top > 0 and received[p] >= min_share * top]
        if not pubs:
            return out
        after = [[c for t, c in v if t >= self._start] or [v[-1][1]] for v in pubs]
        out["pub_rcv_window_start_bytes"] = _median(a[0]["rcv_ssthresh"] for a in after)
        out["pub_rcv_window_max_bytes"] = _median(max(c["rcv_ssthresh"] for c in a) for a in after)
        out["pub_recv_queue_max_bytes"] = _median(max(c["recv_q"] for c in a) for a in after)
        out["pub_rcv_rtt_s"] = _median(a[-1]["rcv_rtt_s"] for a in after)
        return out


def _median(values):
    x = np.asarray(list(values), dtype=float)
    x = x[np.isfinite(x)]
    return float(np.median(x)) if x.size else math.nan
