"""How long a broker's core takes to leave its idle state (cpuidle exit latency).

An idle core does not run the broker at once when a message arrives: it
first leaves its idle state, and the deeper the state the longer that takes.
Linux's cpuidle governors pick deeper states the longer a core is expected
to stay idle (each state has a target residency and an exit latency;
``Documentation/admin-guide/pm/cpuidle.rst``); on a VM whose guest halts
when idle (``cpuidle-haltpoll`` with ``guest_halt_poll_ns=0``) the halted
vCPU is woken through the host, which parks it more deeply the longer it
stays halted. Either way the delay of a message that finds the broker idle
grows with how long the broker was idle. This is latency, not CPU: the
broker's process does not run meanwhile (its CPU per message, measured by
the harness from ``/proc``, does not include it).

On the calibration VM (a KVM guest with ``haltpoll.guest_halt_poll_ns=0``),
:func:`pubsim.calibration.harness.machine.idle_exit_curve` measured about
4 us after 0.2 ms of idle, 11 us after 1 ms, 40 us after 5 ms and 60-75 us
after 20-50 ms (2026-11-27): one reason the latency of a lightly loaded
broker is higher at 200 msg/s than at 1000 msg/s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...sim.errors import ConfigError
from ...sim.kernels import EXIT_MAX_POINTS
from ...sim.units import parse_duration_s
from .mapping import check_fields
from .provenance import ASSUMED, Provenance

__all__ = ["IdleExitParams", "WakeCurveParams"]


@dataclass(frozen=True, kw_only=True)
class IdleExitParams:
    """Exit latency of an idle core, by how long it idled: a piecewise-linear curve.

    A message that finds its server idle since ``t`` seconds starts
    ``exit(t)`` later; ``exit`` runs linearly through ``(0, 0)`` and the
    points ``(idle_s[j], exit_s[j])``, and stays at the last point's value
    beyond it (:func:`pubsim.sim.kernels.idle_exit_s`).

    Parameters
    ----------
    idle_s : tuple of float
        Idle times of the points, s: 1 to 8 of them, > 0 and increasing.
        In scenario files a list of durations (``[0.1ms, 1ms, 5ms]``).
    exit_s : tuple of float
        Exit latency at each of those idle times, s, >= 0.
    provenance : Provenance
    """

    idle_s: tuple = field(metadata={"unit": "raw"})
    exit_s: tuple = field(metadata={"unit": "raw"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        _set_curve(self, "exit_s", _durations, "exit latency")

    @property
    def curve(self) -> tuple[tuple, tuple]:
        """``(idle_s, exit_s)``, as :class:`pubsim.sim.disciplines.FifoDiscipline` takes it."""
        return self.idle_s, self.exit_s

    def exit_at(self, idle_s: float | np.ndarray) -> float | np.ndarray:
        """Exit latency after ``idle_s`` seconds of idle (scalar or array), s."""
        out: float | np.ndarray = np.interp(idle_s, (0.0, *self.idle_s), (0.0, *self.exit_s))
        return out


@dataclass(frozen=True, kw_only=True)
class WakeCurveParams:
    """What a wake-up costs by how long the broker idled before it: a piecewise-linear curve.

    A message that wakes its worker after ``t`` seconds of idle costs
    ``share(t) x (idle_wakeup_cost_s + work_share x its own demand)`` more
    CPU, instead of ``idle_wakeup_cost_s`` whatever the idle
    (:func:`pubsim.sim.kernels.wake_extra_s`). ``share`` runs linearly
    through ``(0, 0)`` and the points ``(idle_s[j], share[j])`` and stays at
    the last point's value beyond it; ``idle_wakeup_cost_s`` is then the
    wake-up after a long idle (share 1).

    Why: the longer a core idled, the colder the caches and TLB the broker
    finds when it wakes (on a VM the host runs other work on the idle core
    meanwhile), so both the wake-up's own path and the first message's work
    take longer. On the calibration VM Mosquitto 2.0.11 at fan-out 16 spent
    264 us of CPU per wake-up beyond its busy costs after 40 ms of idle,
    143 us after 3.3 ms and 41-51 us after 1.3-1.5 ms; at fan-out 32, 334 us
    after 34 ms (calibration/README.md, "A wake-up costs more the longer
    the broker idled"). Unlike the idle exit (:class:`IdleExitParams`),
    which is latency, this is CPU: charged to the quota and counted as work.

    Parameters
    ----------
    idle_s : tuple of float
        Idle times of the points, s: 1 to 8 of them, > 0 and increasing.
        In scenario files a list of durations.
    share : tuple of float
        Share of the full wake-up paid after each of those idle times
        (dimensionless, >= 0; 1 at the longest idle for a curve normalised
        there).
    work_share : float
        Share of the waking message's own demand that a full wake-up adds
        (dimensionless, >= 0; default 0: the wake-up's cost does not grow
        with the message's work).
    provenance : Provenance
    """

    idle_s: tuple = field(metadata={"unit": "raw"})
    share: tuple = field(metadata={"unit": "raw"})
    work_share: float = field(default=0.0, metadata={"unit": "float"})
    provenance: Provenance = field(default=ASSUMED, metadata={"unit": "provenance"})

    def __post_init__(self) -> None:
        check_fields(self)
        _set_curve(self, "share", _shares, "share")
        if not (self.work_share >= 0 and math.isfinite(self.work_share)):
            raise ConfigError("work_share", self.work_share, "a finite share >= 0")

    @property
    def curve(self) -> tuple[tuple, tuple, float]:
        """``(idle_s, share, work_share)``, as :func:`pubsim.sim.kernels.set_wake_curve` takes them."""
        return self.idle_s, self.share, float(self.work_share)

    def share_at(self, idle_s: float | np.ndarray) -> float | np.ndarray:
        """Share of the full wake-up after ``idle_s`` seconds of idle (scalar or array)."""
        out: float | np.ndarray = np.interp(idle_s, (0.0, *self.idle_s), (0.0, *self.share))
        return out


def _set_curve(
    obj: IdleExitParams | WakeCurveParams, name: str, read: Callable[[object, str], tuple], what: str
) -> None:
    """Read and check a curve's points (1 to :data:`EXIT_MAX_POINTS` idle times > 0 s, increasing;
    one ``what`` per idle time in field ``name``, read by ``read``) and store them on the frozen ``obj``."""
    idle = _durations(obj.idle_s, "idle_s")
    values = read(getattr(obj, name), name)
    if not 1 <= len(idle) <= EXIT_MAX_POINTS:
        raise ConfigError("idle_s", obj.idle_s, f"1 to {EXIT_MAX_POINTS} idle times")
    if len(values) != len(idle):
        raise ConfigError(name, getattr(obj, name), f"one {what} per idle time ({len(idle)})")
    if any(t <= 0 for t in idle) or any(b <= a for a, b in zip(idle, idle[1:], strict=False)):
        raise ConfigError("idle_s", obj.idle_s, "idle times > 0 s in increasing order")
    object.__setattr__(obj, "idle_s", idle)
    object.__setattr__(obj, name, values)


def _shares(values: object, name: str) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ConfigError(name, values, "a list of numbers")
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ConfigError(name, values, "a list of numbers") from None
    if not all(v >= 0 and math.isfinite(v) for v in out):
        raise ConfigError(name, values, "finite shares >= 0")
    return out


def _durations(values: object, name: str) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ConfigError(name, values, "a list of durations")
    out = []
    for v in values:
        t = parse_duration_s(v, name)
        if not (t >= 0 and math.isfinite(t)):
            raise ConfigError(name, values, "finite durations >= 0 s")
        out.append(float(t))
    return tuple(out)
