"""Running a load: :func:`run_load` starts the client processes, sequences them and collects their reports."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import sys
import time
import types

from .child import _FLUSH_TIMEOUT_S
from .publisher import _publisher_main
from .result import LoadResult
from .spec import HarnessError, LoadSpec, PublisherBlocked, SetupTimeout, subscriber_topics
from .subscriber import _subscriber_main

_SETUP_STEPS = ("subscribed", "connected", "ready", "quiet")  # a timeout here is a SetupTimeout

__all__ = ["run_load"]

_START_LEAD_NS = 100_000_000  # the common start time is this long after every client is ready, ns
_QUIET_NS = 500_000_000  # the adaptive drain ends after this long without a delivery, ns


def _context():
    methods = mp.get_all_start_methods()
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__package__])  # the whole load generator
        return ctx
    return mp.get_context("spawn")


@contextlib.contextmanager
def _main_hidden():
    """Start a client without the parent's main script.

    A forkserver (or spawned) child first re-runs the parent's ``__main__``
    (as ``__mp_main__``). The clients' targets live in this package and need
    nothing from it, but under ``pubsim measure`` that script imports the
    whole CLI: about 0.9 s of CPU per client on a quiet machine, so with 32
    publishers and 32 subscribers the set-up ran past its 20 s deadline and
    the publishers never connected. With an empty ``__main__`` while the
    process starts, :mod:`multiprocessing` sends no main module to run.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class _Child:
    def __init__(self, ctx, role, index, target, args):
        self.role, self.index = role, index
        self.conn, child_conn = ctx.Pipe()
        spec, *extra = args
        self.proc = ctx.Process(
            target=target, args=(spec, index, *extra, child_conn), name=f"pubsim-{role}{index}", daemon=True
        )
        self._child_conn = child_conn

    def start(self):
        with _main_hidden():
            self.proc.start()
        self._child_conn.close()

    def recv(self, expect, deadline):
        """The next message, which must be ``expect``; raises :class:`HarnessError` otherwise."""
        while True:
            if self.conn.poll(0.05):
                try:
                    msg = self.conn.recv()
                except EOFError:
                    msg = None
                if msg is None:
                    raise HarnessError(
                        f"{self.role} {self.index} exited (code {self.proc.exitcode}) "
                        f"while the harness waited for '{expect}'"
                    )
                if msg[0] == "error":
                    raise HarnessError(msg[1])
                if msg[0] != expect:
                    raise HarnessError(f"{self.role} {self.index}: expected '{expect}', got '{msg[0]}'")
                return msg
            if not self.proc.is_alive() and not self.conn.poll():
                raise HarnessError(
                    f"{self.role} {self.index} exited (code {self.proc.exitcode}) "
                    f"while the harness waited for '{expect}'"
                )
            if time.monotonic() > deadline:
                if expect in _SETUP_STEPS:
                    error: type[HarnessError] = SetupTimeout
                elif (self.role, expect) == ("publisher", "result"):
                    error = PublisherBlocked
                else:
                    error = HarnessError
                raise error(f"{self.role} {self.index}: no '{expect}' within the time allowed")

    def send(self, msg):
        try:
            self.conn.send(msg)
        except (BrokenPipeError, OSError):
            pass


def _stop_children(children):
    for c in children:
        c.send(("stop",))
    for c in children:
        if c.proc.pid is None:
            continue
        c.proc.join(timeout=0)
    for c in children:
        if c.proc.pid is not None and c.proc.is_alive():
            c.proc.terminate()
    for c in children:
        if c.proc.pid is None:
            continue
        c.proc.join(timeout=3)
        if c.proc.is_alive():
            c.proc.kill()
            c.proc.join(timeout=3)
        c.conn.close()


def run_load(spec: LoadSpec, *, on_start=None) -> LoadResult:
    """Run ``spec`` against a broker (or ZeroMQ direct); see the package docstring.

    ``on_start``: called without arguments once every client is ready and
    every publisher has stopped its probe rounds (the parent's ``quiet``,
    acknowledged), before the start time is chosen and sent; nothing is
    sent to the broker while it runs. A caller waits there for the broker
    to work off the probes and samples its counters, which then leave out
    the set-up: with ``P`` publishers on ``T`` topics the probes alone are
    ``P x T`` messages every 20 ms while the clients connect (32 + 32 clients
    on 32 topics: about 9,000 probes per run, measured 2026-11-27), which
    would otherwise count as work of the run's messages.

    Takes about ``spec.duration_s`` s plus set-up (at most
    ``spec.setup_timeout_s`` s) and the drain (at most ``spec.max_drain_s``
    s, or ``spec.drain_s``).

    Raises :class:`HarnessError` when a client fails (connection refused,
    subscription refused, set-up timeout).
    """
    if not isinstance(spec, LoadSpec):
        raise TypeError("run_load needs a LoadSpec")
    ctx = _context()
    sub_topics = subscriber_topics(spec)
    counters = ctx.RawArray("q", spec.subscribers)
    children = []
    wall = {}
    t_begin = time.monotonic()
    try:
        deadline = t_begin + spec.setup_timeout_s
        subs = [
            _Child(ctx, "subscriber", j, _subscriber_main, (spec, sub_topics[j], counters))
            for j in range(spec.subscribers)
        ]
        children += subs
        for c in subs:
            c.start()
        endpoints = [c.recv("subscribed", deadline)[2] for c in subs]
        pubs = [_Child(ctx, "publisher", i, _publisher_main, (spec, endpoints)) for i in range(spec.publishers)]
        children += pubs
        for c in pubs:
            c.start()
        for c in pubs:
            c.recv("connected", deadline)
        for c in subs:
            c.recv("ready", deadline)
        for c in pubs:
            c.send(("quiet",))
        for c in pubs:
            c.recv("quiet", deadline)
        if on_start is not None:
            on_start()
        t0 = time.monotonic_ns() + _START_LEAD_NS
        for c in subs + pubs:
            c.send(("start", t0))
        t_ready = time.monotonic()
        wall["setup_s"] = t_ready - t_begin
        run_deadline = time.monotonic() + spec.duration_s + _FLUSH_TIMEOUT_S + 30.0
        pub_reports = [c.recv("result", run_deadline)[1] for c in pubs]
        t_sent = time.monotonic()
        wall["run_s"] = t_sent - t_ready
        owed = sum(r["sent"] for r in pub_reports) * spec.fanout
        drain_complete = _drain(spec, counters, owed)
        wall["drain_s"] = time.monotonic() - t_sent
        for c in subs:
            c.send(("stop",))
        collect_deadline = time.monotonic() + 60.0
        sub_reports = [c.recv("result", collect_deadline)[1] for c in subs]
        for c in children:
            c.proc.join(timeout=5)
        wall["total_s"] = time.monotonic() - t_begin
    finally:
        _stop_children(children)
    return LoadResult._build(spec, t0, pub_reports, sub_reports, wall, drain_complete, sub_topics)


def _drain(spec, counters, owed):
    """Wait after the last send; whether every owed copy arrived."""
    t_start = time.monotonic_ns()
    if spec.drain_s is not None:
        time.sleep(spec.drain_s)
        return sum(counters) >= owed
    t_max = t_start + int(spec.max_drain_s * 1e9)
    last, last_change = sum(counters), t_start
    while True:
        got = sum(counters)
        now = time.monotonic_ns()
        if got >= owed:
            return True
        if got != last:
            last, last_change = got, now
        if now - last_change >= _QUIET_NS or now >= t_max:
            return False
        time.sleep(0.01)
