"""The mechanism registry and the compile context (models.assembly.registry, models.mechanisms)."""

import pytest

from pubsim.models.assembly.build import build_network, compile_context
from pubsim.models.assembly.registry import HOOKS, MECHANISMS, hooks
from pubsim.models.mechanisms.base import Mechanism
from pubsim.models.mechanisms.keys import StationKey
from pubsim.models.mechanisms.keys import StationKind as K
from pubsim.sim.rng import StreamFactory
from tests.oracles.test_drivers_agree import CASES

#: Station order of every compiled network (it orders the records).
ORDER = [K.UPLINK, K.BROKER, K.RELAY, K.BRIDGE, K.SOCKET, K.DOWNLINK, K.DISK, K.READ, K.ENCODE, K.CPU, K.CARD]
RANK = {**{k: i for i, k in enumerate(ORDER)}, K.PIPE: ORDER.index(K.SOCKET), K.SUBSCRIBER: ORDER.index(K.DOWNLINK)}


def test_registry_entries_are_mechanisms_with_known_hooks():
    names = [m.name for m in MECHANISMS]
    assert len(set(names)) == len(names)
    for m in MECHANISMS:
        assert isinstance(m, Mechanism)
        public = {a for a in dir(m) if not a.startswith("_") and callable(getattr(m, a))}
        assert public <= set(HOOKS), (m.name, public - set(HOOKS))
    with pytest.raises(ValueError):
        hooks("no_such_hook")


@pytest.mark.parametrize("case", sorted(CASES))
def test_station_order_follows_the_registry(case):
    g = CASES[case][0]()
    ctx = compile_context(g, StreamFactory(0, 0), (0.0, 1.0))
    for add in hooks("add_stations"):
        add(ctx)
    ranks = [RANK[k.kind] for k in ctx.keys]
    assert ranks == sorted(ranks), case
    assert [ctx.index_of(k) for k in ctx.keys] == list(range(len(ctx.keys)))
    net = build_network(g, seed=0)
    assert [st.name for st in net.stations] == [st.name for st in ctx.stations]
    assert net.control is not None


def test_station_keys():
    assert StationKey.bridge("a", "b") == StationKey(K.BRIDGE, ("a", "b"))
    assert StationKey.bridge("a", "b") != StationKey.bridge("b", "a")
    assert StationKey.downlink("s").node == "s"
    assert len({StationKey.uplink("x"), StationKey.encode("x"), StationKey.uplink("x")}) == 2


def test_the_parameter_table_is_made_when_read_from_the_topology_as_compiled():
    """build_network leaves the table for later (a trace's schedules make long rows that a twin run
    never reads); read, it is the compiled topology's, even if the graph changed since."""
    from pubsim.models.assembly.table import parameter_table

    g = CASES["merged-star"][0]()
    want = parameter_table(g)
    net = build_network(g, seed=0)
    assert callable(net._parameters)
    g.remove_node(next(iter(g.nodes)))  # the user's graph changes after the compile
    assert net.parameters == want and net.parameters is net.parameters  # made once
