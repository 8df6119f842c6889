"""The ZeroMQ high-water marks a campaign run was measured with.

A campaign configuration of the ZeroMQ proxy may set ``zmq_hwm`` (the
proxy's two sockets and, by default, the clients') and ``zmq_client_hwm``
(the clients' apart); unset means ZeroMQ's default of 1,000 messages per
pipe, 0 means no mark (``zmq_setsockopt(3)``, ``ZMQ_SNDHWM``/``ZMQ_RCVHWM``).
The rule that the clients follow the proxy's mark unless given apart lives
here only; the campaign, the evidence conversion and the fits read it.
"""

from __future__ import annotations

import math

from ..sim.errors import ConfigError

__all__ = ["DEFAULT_HWM", "client_mark", "marks_of", "marks_note", "check_one_marks"]

DEFAULT_HWM = 1000
"""ZeroMQ's default high-water mark, messages per pipe (libzmq 4.3.5 ``options.cpp``)."""


def _given(value):
    """``value`` as an int mark, or None where a row left it unset (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def client_mark(proxy, clients):
    """The clients' mark: their own where given, else the proxy's (None: ZeroMQ's default)."""
    proxy, clients = _given(proxy), _given(clients)
    return proxy if clients is None else clients


def marks_of(run):
    """``(proxy, clients)`` marks of a run row or spec mapping; None = ZeroMQ's default."""
    proxy, clients = run.get("zmq_hwm"), run.get("zmq_client_hwm")
    return _given(proxy), client_mark(proxy, clients)


def _text(marks, default=str(DEFAULT_HWM)):
    """``proxy P, clients C`` for ``(proxy, clients)`` marks, an unset one shown as ``default``."""
    proxy, clients = (default if m is None else m for m in marks)
    return f"proxy {proxy}, clients {clients}"


def marks_note(run):
    """A note naming the marks a run was measured with; "" when its configuration set none."""
    marks = marks_of(run)
    if marks == (None, None):
        return ""
    return "ZeroMQ high-water marks (0 = none): " + _text(marks, default=f"{DEFAULT_HWM} (ZeroMQ's default)")


def check_one_marks(rows, *, what="runs"):
    """Refuse runs of one broker measured with different ZeroMQ marks.

    The simulated twin has no high-water marks, and a limit measured with
    ZeroMQ's default marks is a loss limit, far below the CPU limit measured
    without them (calibration/README.md, "The ZeroMQ proxy's limit under a
    quota is a loss limit"): one fit over both would average two mechanisms.

    Parameters
    ----------
    rows : pandas.DataFrame
        Runs of one broker (``runs.csv`` rows), with or without the
        ``zmq_hwm`` / ``zmq_client_hwm`` columns.
    what : str
        What the rows are, for the message.

    Raises
    ------
    ConfigError
        Naming ``zmq_hwm`` and two configurations measured with different marks.
    """
    seen = {}
    for run in rows.to_dict("records"):
        seen.setdefault(marks_of(run), str(run.get("config", "?")))
    if len(seen) > 1:
        (a, ca), (b, cb) = list(seen.items())[:2]
        raise ConfigError(
            f"{what} zmq_hwm",
            f"{ca}: {_text(a)}; {cb}: {_text(b)}",
            "one set of ZeroMQ high-water marks per fit (the twin has none): fit or validate them apart",
        )
