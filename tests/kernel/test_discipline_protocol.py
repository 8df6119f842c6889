"""The Discipline protocol (sim.disciplines.Discipline): every queue discipline
implements it, the station asks for priorities and keys only when the
discipline declares it uses them, and ``held_visits`` reports the messages a
discipline holds, on hand-built backlogs."""

from __future__ import annotations

import numpy as np
import pytest

from pubsim.models.mechanisms.qos.link import WindowDiscipline
from pubsim.sim.disciplines import BatchDiscipline, Discipline, FifoDiscipline, Overflow, QueueDiscipline
from pubsim.sim.packets import Packets
from pubsim.sim.restart import RestartQueueDiscipline
from pubsim.sim.station import Station
from pubsim.sim.window import WindowInputs


def _packets(times, visits=None):
    n = len(times)
    visits = np.arange(n) if visits is None else visits
    return Packets(times, np.arange(n), visits, np.full(n, 100), times)


def _window_inputs(n):
    z = np.zeros(n)
    return WindowInputs(windowed=np.zeros(n, bool), lost=np.zeros(n, bool), delay=z, extra=z, processing=z, ack_extra=z)


DISCIPLINES = {
    "fifo": lambda: FifoDiscipline(servers=1),
    "queue": lambda: QueueDiscipline(servers=1),
    "queue-update": lambda: QueueDiscipline(servers=1, overflow=Overflow.UPDATE, capacity_messages=10),
    "batch": lambda: BatchDiscipline(batch_max_messages=4, batch_fixed_cost_s=1.0),
    "restart": lambda: RestartQueueDiscipline(restart_at_s=(100.0,), downtime_s=1.0),
    "window": lambda: WindowDiscipline(inflight_messages=2),
}


@pytest.mark.parametrize("name", sorted(DISCIPLINES))
def test_every_discipline_satisfies_the_protocol(name):
    d = DISCIPLINES[name]()
    assert isinstance(d, Discipline)
    for flag in ("event_driven", "uses_priority", "uses_key"):
        assert isinstance(getattr(d, flag), bool), flag


def test_declared_flags():
    d = {name: make() for name, make in DISCIPLINES.items()}
    assert [n for n in sorted(d) if d[n].event_driven] == ["batch", "queue", "queue-update", "restart"]
    assert [n for n in sorted(d) if d[n].uses_priority] == ["queue", "queue-update", "restart"]
    assert [n for n in sorted(d) if d[n].uses_key] == ["queue-update"]


def test_an_object_without_held_visits_is_not_a_discipline():
    class Partial:
        event_driven = uses_priority = uses_key = False

        def run(self, packets, service_s, size_bytes, horizon_s, priority=None, key=None):
            raise NotImplementedError

        def next_wake(self):
            return None

    assert not isinstance(Partial(), Discipline)


def _backlog(d, horizon):
    """Five messages at 0, 0.1, ..., 0.4 (visits 10..14), service 1 s each."""
    pk = _packets([0.0, 0.1, 0.2, 0.3, 0.4], visits=np.arange(10, 15))
    if isinstance(d, WindowDiscipline):
        d.set_inputs(_window_inputs(5))
    return d.run(pk, np.full(5, 1.0), np.full(5, 100.0), horizon)


def test_held_visits_fifo_and_window_hold_nothing():
    for make in (DISCIPLINES["fifo"], DISCIPLINES["window"]):
        d = make()
        served = _backlog(d, 0.5)
        assert len(served.packets) == 5  # departures known on arrival: all returned
        held = d.held_visits()
        assert held.dtype == np.int64 and held.shape == (0,)


def test_held_visits_queue_holds_the_waiting_ones():
    d = QueueDiscipline(servers=1)
    served = _backlog(d, 0.5)
    assert served.packets.visit.tolist() == [10]  # started at 0 (its departure is known)
    assert d.held_visits().tolist() == [11, 12, 13, 14]
    served = d.run(Packets.empty(), np.empty(0), np.empty(0), 2.0)  # 11 starts at 1, 12 at 2
    assert served.packets.visit.tolist() == [11, 12]
    assert d.held_visits().tolist() == [13, 14]
    d.run(Packets.empty(), np.empty(0), np.empty(0), np.inf)
    assert d.held_visits().tolist() == []


def test_held_visits_queue_by_priority():
    d = QueueDiscipline(servers=1)
    pk = _packets([0.0, 0.1, 0.2], visits=np.array([5, 6, 7]))
    d.run(pk, np.ones(3), np.full(3, 100.0), 0.5, np.array([0, 0, 3]))
    assert sorted(d.held_visits().tolist()) == [6, 7]


def test_held_visits_batch_holds_those_waiting_for_a_batch():
    d = BatchDiscipline(batch_max_messages=4, batch_fixed_cost_s=1.0)
    served = _backlog(d, 0.5)
    assert served.packets.visit.tolist() == [10]  # a batch of one at 0, ends at 2
    assert d.held_visits().tolist() == [11, 12, 13, 14]
    served = d.run(Packets.empty(), np.empty(0), np.empty(0), 2.0)  # next batch of 4 starts at 2
    assert served.packets.visit.tolist() == [11, 12, 13, 14]
    assert d.held_visits().tolist() == []


def test_held_visits_restart_counts_messages_in_service_too():
    d = RestartQueueDiscipline(restart_at_s=(100.0,), downtime_s=1.0)
    served = _backlog(d, 0.5)
    assert len(served.packets) == 0  # departures are emitted only once they happened
    assert d.held_visits().tolist() == [10, 11, 12, 13, 14]
    served = d.run(Packets.empty(), np.empty(0), np.empty(0), 2.5)  # 10 done at 1, 11 at 2
    assert served.packets.visit.tolist() == [10, 11]
    assert d.held_visits().tolist() == [12, 13, 14]


@pytest.mark.parametrize("durable", [None, "constructor", "set_durable"])
def test_restart_durable_visits(durable):
    mask = np.zeros(20, bool)
    mask[[12, 14]] = True  # visits 12 and 14 survive
    kw = {"durable_visit": mask} if durable == "constructor" else {}
    d = RestartQueueDiscipline(restart_at_s=(1.5,), downtime_s=1.0, **kw)
    if durable == "set_durable":
        d.set_durable(mask)
    served = _backlog(d, np.inf)
    kept = [10] + ([12, 14] if durable else [])  # 10 done at 1 s, before the restart
    assert served.packets.visit.tolist() == kept
    assert d.held_visits().tolist() == []


def test_window_discipline_needs_its_inputs_for_each_run():
    d = WindowDiscipline(inflight_messages=1)
    pk = _packets([0.0, 0.1])
    with pytest.raises(RuntimeError, match="set_inputs"):
        d.run(pk, np.ones(2), np.full(2, 100.0), 1.0)
    d.set_inputs(_window_inputs(2))
    assert len(d.run(pk, np.ones(2), np.full(2, 100.0), 1.0).packets) == 2
    with pytest.raises(RuntimeError, match="set_inputs"):  # used by one call only
        d.run(pk, np.ones(2), np.full(2, 100.0), 1.0)


class _Plan:
    """The parts of a route plan Station._serve reads."""

    def __init__(self, n):
        self.flow = np.arange(n) % 3
        self.ingress = np.ones(n, bool)


class _Probe(Station):
    def __init__(self, discipline):
        super().__init__("probe", "test", discipline)
        self.bind(0, _Plan(10))
        self.asked = []

    def service_s(self, packets):
        return np.full(len(packets), 0.5)

    def priority(self, packets):
        self.asked.append("priority")
        return np.zeros(len(packets), dtype=np.int64)

    def overflow_key(self, packets):
        self.asked.append("key")
        return super().overflow_key(packets)


@pytest.mark.parametrize(
    "name, asked",
    [
        ("fifo", []),
        ("batch", []),
        ("queue", ["priority"]),
        ("queue-update", ["priority", "key"]),
        ("restart", ["priority"]),
    ],
)
def test_station_asks_only_for_what_the_discipline_uses(name, asked):
    st = _Probe(DISCIPLINES[name]())
    st.process(_packets([0.0, 0.1, 0.2]), np.inf)
    assert st.asked == asked
