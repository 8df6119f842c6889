"""Interleaved campaigns: the pairs' runs taken in turn, so the machine's drift falls on all alike.

A campaign measures one (broker, configuration) pair after another; on a
machine whose speed drifts by 15 % over an hour (calibration/README.md, "The
machine drifts"), two configurations measured an hour apart differ by more
than what the fit must tell apart (Mosquitto's event-loop pass: 2.5 us of
10-12 us per message). With ``interleave: true`` the campaign's unfinished
pairs are measured together instead: each pair runs its own search in a
thread, and :class:`Turns` lets one measurement happen at a time, in turn
(pair 1's next run, pair 2's, ..., pair 1's again), so every pair's runs
spread over the same hours. Each pair's search is the one it would make
measured alone; with a measure whose result depends only on the run asked
for, so are the results (the test's fake broker), and only the order of the
runs in time changes.

A pair is still the unit that is written (as soon as its own search ends),
so an interrupted campaign keeps every finished pair; the pairs in flight
are measured again from the start.
"""

from __future__ import annotations

import threading

__all__ = ["Turns", "run_interleaved"]


class Turns:
    """Round-robin turns among ``n`` workers: one measurement at a time, each worker's next
    after every other live worker's. :meth:`measure_for` gives worker ``i`` its measure."""

    def __init__(self, measure, n):
        self.measure = measure
        self.live = list(range(n))
        self.turn = 0
        self._cv = threading.Condition()

    def _wait(self, i):
        with self._cv:
            self._cv.wait_for(lambda: self.turn == i)

    def _next(self, i):
        with self._cv:
            k = self.live.index(i)
            self.turn = self.live[(k + 1) % len(self.live)]
            self._cv.notify_all()

    def leave(self, i):
        """Worker ``i`` is done: the turn goes on without it."""
        with self._cv:
            k = self.live.index(i)
            self.live.remove(i)
            if self.turn == i and self.live:
                self.turn = self.live[k % len(self.live)]
            self._cv.notify_all()

    def take(self, i, call, *args):
        """``call(*args)`` in worker ``i``'s turn, then the turn passes on."""
        self._wait(i)
        try:
            return call(*args)
        finally:
            self._next(i)

    def measure_for(self, i):
        """Worker ``i``'s measure: the wrapped one's ``__call__`` and ``pair_facts``, in turn."""
        return _TurnMeasure(self, i)


class _TurnMeasure:
    def __init__(self, turns, i):
        self._turns, self._i = turns, i
        if hasattr(turns.measure, "pair_facts"):
            self.pair_facts = lambda *a: turns.take(i, turns.measure.pair_facts, *a)

    def __call__(self, spec):
        return self._turns.take(self._i, self._turns.measure, spec)


def run_interleaved(jobs, measure):
    """Run ``job(measure_i)`` for each of ``jobs`` in a thread of its own, their measurements in turn.

    Returns when every job has ended; the first exception a job raised is
    raised again (the other jobs run to their end first).
    """
    turns = Turns(measure, len(jobs))
    errors = []

    def work(i, job):
        try:
            job(turns.measure_for(i))
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)
        finally:
            turns.leave(i)

    threads = [threading.Thread(target=work, args=(i, job), daemon=True) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
