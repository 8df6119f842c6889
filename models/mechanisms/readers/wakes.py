"""Which copies a broker writes to a sleeping reader (:class:`ReaderWakes`).

A message's copies at one broker visit go to the visit's children, written
one after the other in their order. The reader of the copy of rank ``k``
(0 first) stays awake for a window after each copy written to it:
``(k + 1) x copy_s`` when the readers share one core and read in the order
written, ``copy_s`` on cores of their own
(:class:`pubsim.models.params.readers.ReaderWakeParams`). A copy wakes its
reader when the time since the previous message of the same visit (the
same readers) exceeds that window; the first message of a visit wakes
every reader.

The message's arrival at the broker stands for the moment of the writes:
below saturation the broker writes a message's copies within its service,
so the gaps between writes are those between arrivals; past its limit the
writes come closer together than the arrivals and fewer copies find their
readers asleep than this counts (not modelled). A reader subscribed to
several topics gets copies from several visits; each visit counts its own
gaps, so such a reader is counted asleep more often than it is.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ReaderWakes"]


class ReaderWakes:
    """Per-visit last write time and the count of copies that wake their reader.

    Parameters
    ----------
    params : ReaderWakeParams
    n_visits : int
        Visits of the route plan (state per visit).
    window : (float, float)
        Measurement window, s: :attr:`woken` counts the copies of the
        messages that arrive in it.
    """

    def __init__(self, params, n_visits, window):
        self.params = params
        self.last_s = np.full(int(n_visits), -np.inf)
        self.w0, self.w1 = float(window[0]), float(window[1])
        self.woken = 0
        self.copies = 0

    def asleep(self, t_s, visits, copies):
        """Copies of each message (arrival ``t_s``, visit, copies) that wake their reader.

        Messages must come in arrival order, each once; the state carries
        over to the next call.
        """
        t_s = np.asarray(t_s, dtype=np.float64)
        visits = np.asarray(visits, dtype=np.int64)
        copies = np.asarray(copies, dtype=np.int64)
        gap = self._gaps(t_s, visits)
        c = self.params.copy_s
        if self.params.shared_core:  # ranks k >= 0 with (k + 1) c < gap: ceil(gap / c) - 1 of them
            woken = np.clip(np.ceil(gap / c) - 1.0, 0, copies).astype(np.int64)
        else:
            woken = np.where(gap > c, copies, 0)
        inside = (t_s >= self.w0) & (t_s < self.w1)
        self.woken += int(woken[inside].sum())
        self.copies += int(copies[inside].sum())
        return woken

    def _gaps(self, t_s, visits):
        """Time since the previous message of the same visit, s (inf for a visit's first)."""
        order = np.argsort(visits, kind="stable")
        v, t = visits[order], t_s[order]
        change = v[1:] != v[:-1]
        first, last = np.r_[True, change], np.r_[change, True]  # a visit's first and last message here
        prev = np.empty_like(t)
        prev[~first] = t[:-1][~change]
        prev[first] = self.last_s[v[first]]
        self.last_s[v[last]] = t[last]
        gap = np.empty_like(t)
        gap[order] = t - prev
        return gap

    def record(self):
        """``reader_wakes`` and ``reader_copies`` of the messages that arrived in the window."""
        return {"reader_wakes": self.woken, "reader_copies": self.copies}
