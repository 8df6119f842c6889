"""fit_io_profiles on the committed campaign: train split only, a loadable broker with io."""

from __future__ import annotations

import json

import pandas as pd

from pubsim.calibration.iofit import fit_io_profiles
from pubsim.calibration.virtual import topology_for
from pubsim.models.params.io import IoParams
from tests import ROOT

DATA = ROOT / "calibration" / "data" / "loopback"


def _runs():
    return pd.read_csv(DATA / "runs.csv"), json.loads((DATA / "meta.json").read_text())


def test_fit_ignores_the_held_out_split():
    runs, meta = _runs()
    base = fit_io_profiles(runs, meta, kinds=["nats"])["nats"]
    moved = runs.copy()
    held = moved["split"] == "holdout"
    moved.loc[held, "demand_s_per_ingress"] *= 10.0
    moved.loc[held, "latency_p01_s"] *= 10.0
    assert fit_io_profiles(moved, meta, kinds=["nats"])["nats"] == base


def test_profile_builds_a_broker_with_io_cycles():
    runs, meta = _runs()
    profile = fit_io_profiles(runs, meta, kinds=["zmq-proxy"])["zmq-proxy"]
    row = runs[(runs.broker == "zmq-proxy") & (runs.config == "p64-f4")].iloc[0].to_dict()
    g = topology_for(row, profile)
    io = g.nodes["broker"]["params"].io
    assert isinstance(io, IoParams)
    assert io.cycle_cost_s > 0 and io.cycle_max_messages >= 1
    assert g.nodes["broker"]["params"].idle_wakeup_cost_s == 0


def test_nats_with_counted_reads_reads_64_kib_per_cycle():
    # data/brokers-wire counted NATS's reads: its cycles are the reads that returned data, a
    # cycle reads at most nats-server's 64 KiB, the wake-ups are a cost of their own; the
    # held-out split (reads included) does not move the fit
    wire = ROOT / "calibration" / "data" / "brokers-wire"
    runs, meta = pd.read_csv(wire / "runs.csv"), json.loads((wire / "meta.json").read_text())
    profile = fit_io_profiles(runs, meta, kinds=["nats"])["nats"]
    row = runs[(runs.broker == "nats") & (runs.config == "p64-f1")].iloc[0].to_dict()
    params = topology_for(row, profile).nodes["broker"]["params"]
    assert params.io.cycle_max_bytes == 65536 and params.io.cycle_max_messages is None
    assert params.idle_wakeup_cost_s > 0
    assert "reads that returned data" in params.io.provenance.note
    moved = runs.copy()
    held = moved["split"] == "holdout"
    moved.loc[held, "broker_reads_per_ingress"] *= 10.0
    assert fit_io_profiles(moved, meta, kinds=["nats"])["nats"] == profile
