"""RunResult.hosts(): CPU % per host and process, card utilization; `pubsim run` shows it."""

from __future__ import annotations

import pytest

from pubsim.cli import main
from pubsim.models import topology as T
from pubsim.models.params.host import HostParams
from pubsim.models.params.relay import RelayParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from tests.model.test_topology import ILDM_BROKERS, ildm_tree

from .helpers import card_star
from .test_placement import SCENARIO


def _ildm_on_hosts(relay_cost_s=2e-4):
    """The paper's five broker+node pairs (Publication Flooding), each pair on a host of its own."""
    g = ildm_tree("flood")
    for b in ILDM_BROKERS:
        g.nodes[b][T.RELAY] = RelayParams(relay_cost_s=Constant(value=relay_cost_s))
    hosts = {f"H{b[1]}": HostParams(cores=2) for b in ILDM_BROKERS}
    return T.place(g, hosts, {b: f"H{b[1]}" for b in ILDM_BROKERS})


def _value(h, host, process, measure):
    row = h[(h.host == host) & (h.process == process) & (h.measure == measure)]
    assert len(row) == 1, (host, process, measure)
    return float(row.value.iloc[0])


def test_node_work_shows_in_its_brokers_host_cpu():
    """C3 publishes 20/s; under flooding every pair handles each message: the broker's
    10 us and the node's 200 us per message both count on the pair's host."""
    r = simulate(_ildm_on_hosts(), duration_s=50, warmup_s=5, seed=1)
    h = r.hosts()
    for b in ILDM_BROKERS:
        host = f"H{b[1]}"
        broker = _value(h, host, f"broker:{b}", "cpu_pct_of_core")
        relay = _value(h, host, f"relay:{b}", "cpu_pct_of_core")
        assert broker == pytest.approx(100 * 20 * 1e-5, rel=0.02)
        assert relay == pytest.approx(100 * 20 * 2e-4, rel=0.02)
        assert _value(h, host, "host", "cpu_pct_of_core") == pytest.approx(broker + relay)
        assert _value(h, host, "host", "cpu_pct_of_host") == pytest.approx((broker + relay) / 2)


def test_card_utilization_per_direction():
    h = simulate(card_star(lam_per_s=800.0, size_bytes=1000, card_Bps=1e6), duration_s=20, warmup_s=2, seed=2).hosts()
    assert _value(h, "a", "card", "card_tx_pct") == pytest.approx(80.0, rel=0.03)
    assert h[h.measure == "card_rx_pct"].empty  # host b's card is unlimited: no station


def test_no_hosts_no_rows():
    g = ildm_tree("flood")
    assert simulate(g, duration_s=1, seed=1).hosts().empty


def test_pubsim_run_prints_hosts(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "hosts (window)" in out and "card tx %" in out
