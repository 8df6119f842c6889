"""Which processes of a host spend CPU, and what a shared host's CPU refuses (:mod:`.cpu`).

A process spends CPU if it has a CPU stage of its own: a broker (and its ILDM
node, a second process), a publisher's encode stage, a ZeroMQ socket (its
context's I/O thread, :mod:`.cpu`), a subscriber whose station takes time
(processing or decoding, and not served inside its downlink; a request/reply
client's reply too). A host with two or more of them is shared.
"""

from __future__ import annotations

from ....sim.errors import ConfigError
from ... import topology as T
from ..context import CompileContext

__all__ = ["cpu_users", "check_shared", "NOT_SHARED"]

#: Broker settings a shared host's CPU does not model: (field, used?, expected).
NOT_SHARED = (
    ("cpu_fraction", lambda p: p.cpu_quota_cores is not None, "no CPU quota"),
    ("batch_max_messages", lambda p: p.batch_max_messages > 1, "1 (no batching)"),
    ("restart_at_s", lambda p: p.restart_at_s != (), "no restarts"),
    ("scheduling", lambda p: p.scheduling != "fifo", "fifo"),
    ("speed_drift_log_sd", lambda p: p.speed_drift_log_sd > 0, "0 (no speed drift)"),
)


def _subscriber_spends(ctx: CompileContext, s) -> bool:
    sp = ctx.params(s)
    if ctx.home(s) in ctx.tables and ctx.folds_subscriber(s):  # served inside its downlink
        return False
    codec = sp.serialization
    return not (sp.processing_s.is_constant and sp.processing_s.mean == 0) or (codec is not None and codec.has_decode)


def _weight(ctx: CompileContext, n) -> int:
    """Processes with a CPU stage that node ``n`` stands for (0, 1, or 2 for a broker with its node)."""
    kind = ctx.graph.nodes[n][T.KIND]
    if kind == T.NodeKind.BROKER:
        return 2 if n in ctx.relays else 1
    if kind == T.NodeKind.PUBLISHER:
        codec = ctx.params(n).serialization
        return int(codec is not None and codec.has_encode)
    if kind == T.NodeKind.SUBSCRIBER:
        return int(_subscriber_spends(ctx, n))
    return int(kind == T.NodeKind.SOCKET)  # a ZeroMQ socket: its context's I/O thread


def cpu_users(ctx: CompileContext) -> dict:
    """``{host: {node: (kind, processes)}}``: the nodes of each host that spend CPU, in graph order."""
    users: dict = {}
    for n in ctx.graph:
        h = T.host_of(ctx.graph, n)
        w = _weight(ctx, n) if h is not None else 0
        if w:
            users.setdefault(h, {})[n] = (ctx.graph.nodes[n][T.KIND], w)
    return users


def check_shared(ctx: CompileContext, host, users: dict) -> None:
    """One-line errors for what a shared host's CPU does not model."""
    why = f"on host {host!r}, whose CPU its processes share"
    for n, (kind, _) in users.items():
        p = ctx.params(n)
        if kind == T.NodeKind.SUBSCRIBER and p.buffer_messages is not None:
            raise ConfigError(f"node {n!r}.buffer_messages", p.buffer_messages, f"unset for a subscriber {why}")
        if kind == T.NodeKind.BROKER:
            for field, used, expected in NOT_SHARED:
                if used(p):
                    raise ConfigError(f"node {n!r}.{field}", getattr(p, field), f"{expected} for a broker {why}")
