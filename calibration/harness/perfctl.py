"""A ``perf`` process started disabled and switched on through its control descriptor.

``perf stat`` and ``perf record`` start with their events disabled
(``-D -1``) and are enabled through ``--control fd:CTL,ACK``, which they
acknowledge once counting: so a measurement starts exactly when asked and
needs no guessed attach time. Used by
:class:`~pubsim.calibration.harness.passes.SyscallCounter` and
:class:`~pubsim.calibration.harness.softirqs.SoftirqTracer`.
"""

from __future__ import annotations

import os
import signal
import subprocess

__all__ = ["ControlledPerf"]


class ControlledPerf:
    """``perf <args>`` with its events disabled until :meth:`enable`.

    Parameters
    ----------
    args : sequence of str
        The ``perf`` subcommand and its options (``["stat", "-e", ..., "-p", PID]``).
    """

    def __init__(self, args):
        self.args = [str(a) for a in args]
        self._proc = self._ctl = self._ack = None

    def start(self):
        """Start ``perf`` (events disabled); returns self."""
        ctl_r, ctl_w = os.pipe()
        ack_r, ack_w = os.pipe()
        cmd = ["perf", *self.args, "-D", "-1", "--control", f"fd:{ctl_r},{ack_w}"]
        try:
            self._proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, pass_fds=(ctl_r, ack_w)
            )
        finally:
            os.close(ctl_r)
            os.close(ack_w)
        self._ctl, self._ack = os.fdopen(ctl_w, "w"), os.fdopen(ack_r)
        return self

    def enable(self, what):
        """Enable the events (returns once ``perf`` has acknowledged); ``what`` names the
        measurement in the error raised if it does not."""
        try:
            self._ctl.write("enable\n")
            self._ctl.flush()
            ack = self._ack.readline()
        except BrokenPipeError:
            ack = ""
        if not ack.startswith("ack"):
            self._proc.kill()
            tail = self._proc.communicate()[1].strip()[-300:]
            raise RuntimeError(f"perf {self.args[0]} did not start {what}: {tail}")

    def stop(self, timeout_s):
        """Stop ``perf`` (``SIGINT``, so it writes its results); its standard error."""
        self._proc.send_signal(signal.SIGINT)
        err = self._proc.communicate(timeout=timeout_s)[1]
        self._ctl.close()
        self._ack.close()
        return err
