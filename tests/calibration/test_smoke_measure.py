"""CI smoke measurement on real brokers: measure, fit, simulate, compare.

Runs experiments/calibration/smoke.yaml (Mosquitto and a ZeroMQ XPUB/XSUB
proxy, one configuration, 1.5 s runs) end to end. The runs are too short for
accuracy targets; the checks are that the real harness, the fit and the
validation work together and give physically sensible numbers. The full
campaign is `pubsim measure experiments/calibration/campaign.yaml` (see
calibration/README.md).
"""

import math
import shutil
import warnings

import pytest

from pubsim.calibration.campaign import load_campaign, parse_campaign, read_results, run_campaign
from pubsim.calibration.harness.brokers import live_brokers
from pubsim.calibration.harness.cpu import detect_cpu_control
from pubsim.calibration.runner import RealHarness
from pubsim.calibration.validate import fit_profiles, validate
from tests import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("mosquitto") is None, reason="mosquitto not installed: run scripts/install_brokers.sh"
)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    campaign = load_campaign(ROOT / "experiments/calibration/smoke.yaml")
    control, reason = detect_cpu_control()
    if control is None:  # say so, and measure uncapped brokers rather than nothing
        warnings.warn(f"smoke measurement without a CPU cap: {reason}", stacklevel=2)
        spec = dict(campaign.spec)
        spec["configurations"] = [{**c, "cpu_cap_fraction": None} for c in spec["configurations"]]
        campaign = parse_campaign(spec)
    with RealHarness(campaign, workdir=out / "work") as harness:
        run_campaign(campaign, out, harness, metadata=harness.metadata())
    assert not live_brokers()  # every broker stopped
    return read_results(out)


def test_light_runs_deliver_everything_quickly(smoke):
    runs = smoke[0]
    light = runs[runs.phase == "light"]
    assert set(light.broker) == {"mosquitto", "zmq-proxy"}
    assert (light.delivery_ratio >= 0.99).all() and (light.loss_rate == 0).all()
    assert (light.latency_p50_s > 0).all() and (light.latency_p50_s < 0.005).all()


def test_mosquitto_limit_and_load_dependent_demand(smoke):
    runs, sat, _, meta = smoke
    m = sat.set_index("broker").loc["mosquitto"]
    assert m.limit_reached and not m.saturated_everywhere
    assert 2_000 < m.limit_rate_per_s < 250_000  # 0.2 core: about 20k msg/s on the machine
    mq = runs[runs.broker == "mosquitto"].sort_values("rate_per_s")
    # CPU per message falls with load: wake-ups are paid per message at low load
    assert mq.demand_s_per_ingress.iloc[0] > 1.5 * mq[mq.sustainable].demand_s_per_ingress.iloc[-1]
    assert mq.wakeups_per_ingress.iloc[0] > mq.wakeups_per_ingress.iloc[-1]
    assert meta["versions"]["mosquitto"].startswith("2.") or meta["versions"]["mosquitto"]
    assert meta["machine_reference"]["loopback_round_trips_per_s"] > 100  # the machine is recorded too
    # the set-up's CPU is recorded apart, not charged to the run's messages
    assert (mq.broker_setup_cpu_s > 0).all() and (mq.broker_cpu_s > 0).all()
    # where perf counts system calls: one publisher, so one pass of the event loop per
    # message read, and 3 reads per 64 B PUBLISH (command byte, length byte, the rest)
    if meta["syscall_counting"].startswith("perf"):
        ok = mq[mq.sustainable]
        assert ok.broker_passes_per_ingress.between(0.95, 1.3).all(), ok.broker_passes_per_ingress.tolist()
        assert ok.broker_reads_per_ingress.between(2.95, 3.3).all(), ok.broker_reads_per_ingress.tolist()
    else:
        assert mq.broker_passes_per_ingress.isna().all()


def test_fit_and_validate_end_to_end(smoke):
    runs, sat, lat, meta = smoke
    profiles = fit_profiles(runs, meta)
    assert set(profiles) == {"mosquitto", "zmq-proxy"}
    broker = profiles["mosquitto"]["broker"]["mosquitto"]
    assert broker["provenance"]["source"] == "measured"
    v = validate(runs, sat, lat, profiles)
    assert set(v.per_pair.broker) == {"mosquitto", "zmq-proxy"}
    err = v.per_pair.set_index("broker").loc["mosquitto", "saturation_error_pct"]
    assert math.isfinite(err) and abs(err) < 50  # coarse: 3-step search, 1.5 s runs
    below = v.per_run[v.per_run.below_saturation]
    assert len(below) and below.ks_distance.between(0, 1).all()
