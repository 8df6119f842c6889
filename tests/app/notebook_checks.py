"""What each notebook must show, checked on the variables it leaves behind.

Run inside the notebook's own kernel after its last cell (see
``test_notebooks.py``): ``CHECKS[name](globals())``.
"""

from __future__ import annotations

import pytest

from pubsim.models import presets


def _quickstart_what_if(ns):
    # every search brackets its limit: a sustainable probe at the limit, an
    # unsustainable one above it; the limit agrees with 1 / demand
    for broker, r in ns["results"].items():
        probes = r.probes
        assert r.limit_reached and not r.saturated_everywhere, broker
        top_ok = probes.loc[probes["sustainable"], "offered_per_s"].max()
        above = probes.loc[~probes["sustainable"], "offered_per_s"]
        assert (above > top_ok).any(), broker
    lim = ns["limits"].set_index("broker")
    for broker in ("mosquitto", "rabbitmq-mqtt"):
        err = abs(lim.loc[broker, "search_vs_formula_pct"])
        assert err <= lim.loc[broker, "error_bound_pct"] + 1.5, (broker, err)
    assert lim.loc["mosquitto", "limit_per_s"] > lim.loc["rabbitmq-mqtt", "limit_per_s"]
    # each limit with its model band: the profile's held-out saturation errors, real limit = limit / (1 + e)
    for broker, row in lim.iterrows():
        held = presets.load("broker", broker)["provenance"]["accuracy"]["holdout"]["saturation_error_pct"]
        assert row["real_limit_low_per_s"] == pytest.approx(row["limit_per_s"] / (1 + held["high"] / 100)), broker
        assert row["real_limit_high_per_s"] == pytest.approx(row["limit_per_s"] / (1 + held["low"] / 100)), broker
        assert "cpu_cap_cores 1 outside the fitted" in row["extrapolation"], broker  # a whole core, fitted capped


def _edge_trees(ns):
    t = ns["traffic"].set_index(["placement", "forwarding"])["inter_broker_per_s"]
    assert t[("A", "flood")] == t[("A", "subscription")] == 0  # one broker: no bridges
    assert t[("C", "subscription")] < 0.05 * t[("C", "flood")]  # high locality: SF keeps traffic local
    assert t[("D", "subscription")] < t[("D", "flood")]
    assert t[("B", "subscription")] == pytest.approx(t[("B", "flood")], rel=0.02)  # no locality: SF = PF
    hops = ns["hops"]
    b = hops[(hops["placement"] == "B") & (hops["forwarding"] == "flood")].sort_values("hops")
    assert list(b["hops"]) == [0, 1, 2, 3, 4]
    assert (b["latency_mean_s"].diff().dropna() > 0.9e-3).all()  # each 1 ms bridge adds at least ~1 ms
    relays = ns["relays"]
    if len(relays):  # experiments/ildm scenarios (relay nodes) agree: SF keeps placement C local
        r = relays.set_index("forwarding")["inter_broker_per_s"]
        assert r["sf"] < 0.05 * r["pf"] and (relays["relay_utilization_max"] > 0).all()


def _priority_control(ns):
    r = ns["runs"].set_index(["case", "scheduling", "load_factor"])["control_latency_p99_s"]
    over = max(ns["LOAD_FACTORS"])
    assert r[("broker-bound", "priority", over)] < 0.1 * r[("broker-bound", "fifo", over)]
    assert r[("link-bound", "priority", over)] > 0.5 * r[("link-bound", "fifo", over)]
    low = min(ns["LOAD_FACTORS"])
    assert r[("broker-bound", "priority", low)] == pytest.approx(r[("broker-bound", "fifo", low)], rel=0.5)


def _mean_s(value):
    from pubsim.sim.distributions import parse_distribution
    from pubsim.sim.units import parse_duration_s

    if value is None or isinstance(value, (int, float)):
        return value
    return parse_distribution(value, parse_duration_s, "cost").mean


def _calibration_validation(ns):
    fit = ns["fit"]
    for broker, grp in fit.groupby("broker"):
        now, committed = (
            grp[grp["source"] == s].drop(columns="source").iloc[0] for s in ("refit now", "committed preset")
        )
        # The committed profiles' costs are this fit of the committed data. Only the means are
        # compared: the notebook fits without the variability search (cv 0), `pubsim calibrate` with it.
        for field in now.index.drop("broker"):
            assert _mean_s(now[field]) == pytest.approx(_mean_s(committed[field]), rel=1e-3), (broker, field)
    acc = ns["accuracy"]
    assert len(acc) >= 1 and acc["saturation_error_pct"].abs().max() < 20


def _city_trace(ns):
    city = ns["city"]
    for kind, grp in city.groupby("load"):
        grp = grp.sort_values("devices")
        ratio = grp["offered_per_s"].iloc[-1] / grp["offered_per_s"].iloc[0]
        scale = grp["devices"].iloc[-1] / grp["devices"].iloc[0]
        assert ratio == pytest.approx(scale, rel=0.25), kind  # load grows with the city
        assert grp["broker_utilization"].is_monotonic_increasing
    tr = city[city["load"] == "trace"].set_index("devices")["offered_per_s"]
    po = city[city["load"] == "poisson"].set_index("devices")["offered_per_s"]
    assert ((tr - po).abs() / tr).max() < 0.15  # the Poisson twin offers about the same rate


CHECKS = {
    "quickstart_what_if.ipynb": _quickstart_what_if,
    "edge_trees.ipynb": _edge_trees,
    "priority_control.ipynb": _priority_control,
    "calibration_validation.ipynb": _calibration_validation,
    "city_trace.ipynb": _city_trace,
}
