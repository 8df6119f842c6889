"""What a run will cost, estimated before it starts, and the budget it must fit.

A scenario with a rate of 10^15 msg/s, a queue of 10^15 messages or a client
group of 10^6 copies is not wrong in form, but running it would eat the
machine's memory or run until killed. :func:`estimate` adds up, from the
parsed topology alone (no simulation):

* ``messages``: publications over the run, sum of publisher rates x the time
  each publishes (``duration - start``) plus explicit schedules, times the
  replications (closed-loop publishers are not counted: their rate follows
  the response time);
* ``deliveries``: an upper bound with fan-out, each publication times the
  subscribers with a filter matching one of its publisher's topics, when that
  is cheap to work out (at most :data:`_MAX_PAIRS` filter-topic pairs),
  else None;
* ``stations``, ``clients``;
* ``memory_bytes``: what the kernel allocates up front: a slot per message of
  every bounded queue (:data:`BYTES_PER_SLOT` bytes: its departure heap
  holds a time and a size), a slot per worker, and the throughput series
  (``duration / series_bin`` bins per replication).

:class:`Budget` holds the limits (defaults generous: every shipped scenario
and study fits many times over), read from the command line
(``--max-messages``, ``--max-memory``, ``--max-clients``) or the environment
(``PUBSIM_MAX_MESSAGES``, ``PUBSIM_MAX_MEMORY``, ``PUBSIM_MAX_CLIENTS``).
:func:`check` refuses an estimate beyond the budget with a one-line
:class:`~pubsim.sim.errors.ConfigError` saying what to change. The client
limit is also checked by :func:`pubsim.scenario.parse_scenario` on each
group's ``count`` before the group is expanded.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .models import topology as T
from .models.params.topics import matches
from .sim.errors import ConfigError
from .sim.units import parse_size_bytes

__all__ = ["Budget", "Estimate", "estimate", "check", "BYTES_PER_SLOT", "add_arguments"]

#: Bytes the kernel preallocates per message slot of a bounded queue (departure time and size, float64).
BYTES_PER_SLOT = 16
_BYTES_PER_WORKER = 8
_BYTES_PER_SERIES_BIN = 3 * 8  # published, delivered and time columns per throughput bin
_MAX_PAIRS = 20_000  # filter-topic pairs matched at most for the fan-out bound


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Limits a run must fit (see the module docstring).

    Parameters
    ----------
    max_messages : float
        Most publications over the run (all replications).
    max_memory_bytes : float
        Most memory allocated up front (queue slots, workers, series), bytes.
    max_clients : int
        Most publishers plus subscribers (checked before client groups expand).
    """

    max_messages: float = 2e9
    max_memory_bytes: float = 8 * 2**30
    max_clients: int = 200_000

    @classmethod
    def from_env(cls, environ=None, **given) -> Budget:
        """The defaults, overridden by ``PUBSIM_MAX_*`` variables, overridden by ``given`` (not None)."""
        environ = os.environ if environ is None else environ
        values = {}
        for fld, var, reader in _KNOBS:
            if given.get(fld) is not None:
                values[fld] = reader(given[fld], _FLAG[fld])
            elif environ.get(var):
                values[fld] = reader(environ[var], var)
        return cls(**values)


def _positive_number(value, field):
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(field, value, "a number > 0 such as 2e9") from None
    if not (math.isfinite(x) and x > 0):
        raise ConfigError(field, value, "a finite number > 0 such as 2e9")
    return x


def _memory(value, field):
    x = parse_size_bytes(value, field)
    if not (math.isfinite(x) and x > 0):
        raise ConfigError(field, value, "a size > 0 such as 8GiB")
    return x


def _clients(value, field):
    x = _positive_number(value, field)
    if not x.is_integer():
        raise ConfigError(field, value, "an integer > 0")
    return int(x)


_KNOBS = (
    ("max_messages", "PUBSIM_MAX_MESSAGES", _positive_number),
    ("max_memory_bytes", "PUBSIM_MAX_MEMORY", _memory),
    ("max_clients", "PUBSIM_MAX_CLIENTS", _clients),
)
_FLAG = {"max_messages": "--max-messages", "max_memory_bytes": "--max-memory", "max_clients": "--max-clients"}
_VAR = {fld: var for fld, var, _ in _KNOBS}


def add_arguments(parser) -> None:
    """Add ``--max-messages``, ``--max-memory`` and ``--max-clients`` to an argparse parser."""
    d = Budget()
    parser.add_argument(
        "--max-messages",
        metavar="N",
        help=f"refuse a run expected to publish more messages (default {d.max_messages:.0e}; PUBSIM_MAX_MESSAGES)",
    )
    parser.add_argument(
        "--max-memory",
        metavar="SIZE",
        help=f"refuse a run whose queues etc. need more memory up front (default "
        f"{d.max_memory_bytes / 2**30:g}GiB; PUBSIM_MAX_MEMORY)",
    )
    parser.add_argument(
        "--max-clients",
        metavar="N",
        help=f"refuse a scenario with more publishers + subscribers (default {d.max_clients:,}; PUBSIM_MAX_CLIENTS)",
    )


def from_args(args) -> Budget:
    """The budget of parsed command-line ``args`` (see :func:`add_arguments`) and the environment."""
    return Budget.from_env(
        max_messages=getattr(args, "max_messages", None),
        max_memory_bytes=getattr(args, "max_memory", None),
        max_clients=getattr(args, "max_clients", None),
    )


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """What a run costs (see the module docstring); counts over all replications."""

    messages: float
    deliveries: float | None
    stations: int
    clients: int
    memory_bytes: float
    replications: int


def _publications(params, duration_s, rate_per_s=None):
    """Publications of one publisher in one replication (closed loop: 0, not estimated)."""
    if params.arrival == "closed_loop":
        return 0.0
    if params.arrival == "schedule":
        return float(len(params.schedule_time_s))
    rate = params.rate_per_s if rate_per_s is None else rate_per_s
    return rate * max(0.0, duration_s - params.start_s)


def _syntax(g, pub):
    home = T.home_broker(g, pub)
    params = g.nodes[home][T.PARAMS]
    return getattr(params, "topic_syntax", "prefix")


def _fanout(g, pubs, subs):
    """Subscribers with a filter matching one of each publisher's topics, or None if costly."""
    pairs = sum(len(g.nodes[p][T.PARAMS].topics) for p in pubs) * sum(
        len(g.nodes[s][T.PARAMS].subscriptions) for s in subs
    )
    if pairs > _MAX_PAIRS:
        return None
    out = {}
    try:
        for p in pubs:
            out[p] = _matched(g, p, subs)
    except ConfigError:  # a topic the matcher does not take as given (not worth estimating)
        return None
    return out


def _matched(g, p, subs):
    """Subscribers with a filter matching one of publisher ``p``'s topics."""
    syntax = _syntax(g, p)
    topics = g.nodes[p][T.PARAMS].topics
    return sum(any(matches(syntax, f, t) for f in g.nodes[s][T.PARAMS].subscriptions for t in topics) for s in subs)


def _queue_slots(g):
    """Preallocated message slots of bounded queues: brokers, per-subscriber queues, links (both ways)."""
    slots = 0
    for n in g:
        params = g.nodes[n][T.PARAMS]
        kind = g.nodes[n].get(T.KIND)
        if kind == T.NodeKind.BROKER:
            slots += (params.queue_messages or 0) + 1
            relay = g.nodes[n].get(T.RELAY)
            slots += (getattr(relay, "queue_messages", None) or 0) + 1 if relay is not None else 0
        elif kind == T.NodeKind.SOCKET:
            slots += (getattr(params, "sndhwm", None) or 0) + 1
        elif kind == T.NodeKind.SUBSCRIBER:
            home = g.nodes[T.home_broker(g, n)][T.PARAMS]
            slots += (getattr(home, "client_queue_messages", None) or 0) + 1
    for _, _, data in g.edges(data=True):
        slots += 2 * ((data[T.PARAMS].queue_messages or 0) + 1)
    return slots


def estimate(scenario, *, duration_s=None, replications=None, rates=None, fanout=True) -> Estimate:
    """The cost of running ``scenario`` (a :class:`pubsim.scenario.Scenario`).

    Parameters
    ----------
    duration_s : float, optional
        Run length, s (default: the scenario's).
    replications : int, optional
        Default: the scenario's.
    rates : dict of publisher name -> rate per s, optional
        Rates that replace the scenario's (a saturation probe).
    fanout : bool
        Estimate ``deliveries`` (every publisher's topics matched against
        every filter, up to 20,000 pairs); else ``deliveries`` is None.
    """
    g = scenario.topology
    duration_s = scenario.run["duration_s"] if duration_s is None else duration_s
    reps = scenario.replications if replications is None else replications
    rates = rates or {}
    pubs = T.clients(g, T.NodeKind.PUBLISHER)
    subs = T.clients(g, T.NodeKind.SUBSCRIBER)
    per_pub = {p: _publications(g.nodes[p][T.PARAMS], duration_s, rates.get(p)) for p in pubs}
    fan = _fanout(g, pubs, subs) if fanout else None
    deliveries = None if fan is None else reps * sum(per_pub[p] * fan[p] for p in pubs)
    workers = sum(getattr(g.nodes[n][T.PARAMS], "workers", 0) for n in g)
    series_bin_s = scenario.run.get("series_bin_s") or duration_s / 100
    memory = (
        BYTES_PER_SLOT * _queue_slots(g)
        + _BYTES_PER_WORKER * workers
        + _BYTES_PER_SERIES_BIN * (duration_s / series_bin_s + 1)
    )
    return Estimate(
        messages=reps * sum(per_pub.values()),
        deliveries=deliveries,
        stations=g.number_of_nodes() + 2 * g.number_of_edges(),
        clients=len(pubs) + len(subs),
        memory_bytes=memory,
        replications=reps,
    )


def _refuse(field, value, limit, advice, knob):
    """One line: the estimate (quoted short), the budget, what to change."""
    raise ConfigError(
        field,
        value,
        f"at most the budget of {limit}: {advice}, or raise the budget with {_FLAG[knob]} / {_VAR[knob]}",
    )


def check(scenario, budget=None, **kwargs) -> Estimate:
    """:func:`estimate` ``scenario`` and refuse it beyond ``budget`` (default :meth:`Budget.from_env`).

    Keyword arguments go to :func:`estimate`; ``deliveries`` is not estimated
    unless ``fanout=True`` is given (no limit reads it, and every study point is checked).

    Raises
    ------
    ConfigError
        One line: the estimate, the limit and what to change.
    """
    budget = Budget.from_env() if budget is None else budget
    est = estimate(scenario, **{"fanout": False, **kwargs})
    if est.clients > budget.max_clients:
        _refuse("clients", est.clients, f"{budget.max_clients:,}", "lower the groups' count", "max_clients")
    if not est.messages <= budget.max_messages:  # also refuses NaN
        _refuse(
            "estimated messages",
            f"{est.messages:.3g}",
            f"{budget.max_messages:.3g} ({est.replications} replication{'s' if est.replications > 1 else ''})",
            "shorten run.duration, lower rates or replications",
            "max_messages",
        )
    if not est.memory_bytes <= budget.max_memory_bytes:
        _refuse(
            "estimated memory up front",
            f"{est.memory_bytes / 2**30:.3g}GiB",
            f"{budget.max_memory_bytes / 2**30:.3g}GiB",
            "lower queue_messages, client_queue_messages or workers, or coarsen run.series_bin",
            "max_memory_bytes",
        )
    return est


def client_limit(budget=None) -> int:
    """The most clients a scenario may declare (for the check before client groups expand)."""
    return (Budget.from_env() if budget is None else budget).max_clients
