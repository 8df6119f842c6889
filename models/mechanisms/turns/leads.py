"""How much earlier than the end of a message's service each of its copies leaves.

A broker that writes each copy as it routes it (Mosquitto 2.0.11:
``sub__messages_queue`` -> ``subs__send`` -> ``db__message_insert(...,
update=true)`` -> ``db__message_write_queued_out`` -> ``packet__queue`` ->
``packet__write``, one subscriber after the other, src/subs.c,
src/database.c, lib/packet_mosq.c) sends the copy of rank ``k`` (0 first)
of ``n`` once it has done its own and the earlier copies' work, not when the
whole message is done. Its departure, the end of the message's service, is
then ``n - 1 - k`` copies' work after that copy left. The lead used is that
many times the *least* per-copy cost (``delivery_cost_s.min_value``, times the
background stretch): with constant costs exactly the copies' work, with
random ones a lower bound, so no copy leaves before its own share of the
service could have been done (the station's lookahead holds). Left out, so
the early copies leave somewhat later than this rule would have them:
per-byte costs, a throttled period inside the service (a quota that runs
out after copy ``k`` delays the later copies only; here all by the whole
wait), and a wake-up or pass cost at the end of the service.
"""

from __future__ import annotations

import numpy as np

__all__ = ["copy_leads_s"]


def copy_leads_s(n_children: int, per_copy_s: float) -> np.ndarray:
    """Lead of each of ``n_children`` copies written in order, s: ``(n - 1 - k) x per_copy_s``.

    Parameters
    ----------
    n_children : int
        Copies of the visit, in the order written.
    per_copy_s : float
        Least CPU time of one copy, s (>= 0).

    Returns
    -------
    numpy.ndarray
        float64[n_children], the last copy's lead 0.
    """
    n = int(n_children)
    return (n - 1 - np.arange(n, dtype=np.float64)) * float(per_copy_s)
