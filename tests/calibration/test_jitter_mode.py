"""The link's jitter mode chosen by simulation (calibration.jitter).

Unit level: a fake twin whose errors depend on the mode. End to end: a
virtual campaign whose broker's clients have a heavy-tailed link jitter paid
either by every packet or only by idle receivers; ``fit_profiles`` with
``jitter_on="auto"`` must recover the mode the campaign was made with.
"""

import pandas as pd
import pytest

from pubsim.calibration.campaign import parse_campaign, read_results, run_campaign
from pubsim.calibration.jitter import JitterModeCalibrator
from pubsim.calibration.profile import build_profile
from pubsim.calibration.validate import fit_profiles
from pubsim.calibration.virtual import VirtualHarness
from pubsim.sim.errors import ConfigError
from tests.calibration.virtual import virtual_meta

P50, P99 = 2.0**-13, 2.0**-10  # s; binary fractions, so that equal errors compare equal


def _runs(n=5, configs=("a", "b")):
    rows = []
    for c in configs:
        for i in range(n):
            rows.append(
                {
                    "config": c,
                    "rate_per_s": 100.0 * (i + 1),
                    "sustainable": i < n - 1,  # the heaviest run of each configuration is not
                    "latency_p50_s": P50,
                    "latency_p99_s": P99,
                }
            )
    return pd.DataFrame(rows)


def _fake(scale):
    calls = []

    def simulate(row, mode):
        calls.append((row["config"], row["rate_per_s"], mode))
        k = scale[mode]
        return {"latency_p50_s": P50 * k, "latency_p99_s": P99 * k}

    return simulate, calls


def test_the_mode_with_the_smaller_errors_is_chosen():
    simulate, calls = _fake({"every_packet": 1.5, "idle_receiver": 0.9})
    cal = JitterModeCalibrator(simulate=simulate, max_runs=3).fit(_runs())
    assert cal.params_["jitter_on"] == "idle_receiver"
    # +50 % on p50 and on p99 against -10 % on both
    assert cal.params_["objective"] == pytest.approx({"every_packet": 100.0, "idle_receiver": 20.0})
    assert cal.params_["n_configs"] == 2
    # three of the four sustainable runs per configuration, lightest and heaviest included
    assert cal.params_["n_runs"] == 6
    assert sorted({r for c, r, m in calls if c == "a"}) == [100.0, 300.0, 400.0]
    assert not any(r == 500.0 for _, r, _ in calls)  # unsustainable runs are never simulated


def test_a_tie_keeps_the_first_mode():
    simulate, _ = _fake({"every_packet": 1.25, "idle_receiver": 0.75})
    cal = JitterModeCalibrator(simulate=simulate).fit(_runs())
    assert cal.params_["jitter_on"] == "every_packet"
    swapped = JitterModeCalibrator(simulate=simulate, modes=("idle_receiver", "every_packet")).fit(_runs())
    assert swapped.params_["jitter_on"] == "idle_receiver"


def test_bad_settings_and_inputs_are_named():
    simulate, _ = _fake({"every_packet": 1.0, "idle_receiver": 1.0})
    with pytest.raises(ConfigError, match="modes"):
        JitterModeCalibrator(simulate=simulate, modes=("sometimes",))
    with pytest.raises(ConfigError, match="max_runs"):
        JitterModeCalibrator(simulate=simulate, max_runs=0)
    with pytest.raises(ConfigError, match="sustainable run"):
        JitterModeCalibrator(simulate=simulate).fit(_runs().assign(sustainable=False))
    with pytest.raises(ConfigError, match="jitter_on"):
        fit_profiles(_runs(), {}, jitter_on="sometimes")


TRUE = {"ingress_cost_s": 20e-6, "delivery_cost_s": 10e-6, "per_byte_cost_s": 0.0, "idle_wakeup_cost_s": 0.0}
# a heavy-tailed jitter, several times the time between messages near the limit
LINK = {"link_latency_s": 20e-6, "jitter_mean_s": 150e-6, "jitter_cv": 2.0, "n_runs": 1}
CAMPAIGN = {
    "name": "virtual-jitter",
    "brokers": ["mosquitto"],
    "run": {"duration": "1.5s", "warmup": "0.3s", "cooldown": "0.1s"},
    "light_rates": ["300/s"],
    "search": {"start_rate": "64000/s", "steps": 5, "max_doublings": 8},
    "fractions": [0.5, 0.8],
    "configurations": [{"name": "f1-64", "payload_bytes": 64, "subscribers": 1, "fanout": 1, "publishers": 1}],
}


@pytest.mark.slow
@pytest.mark.parametrize("true_mode", ["every_packet", "idle_receiver"])
def test_the_true_mode_is_recovered(tmp_path_factory, true_mode):
    out = tmp_path_factory.mktemp(true_mode)
    truth = build_profile(
        name="mosquitto",
        broker_kind="mosquitto",
        demand_params=TRUE,
        link_params=LINK,
        metadata=virtual_meta(cpu_cap_fraction=1.0),
        jitter_on=true_mode,
    )
    run_campaign(parse_campaign(CAMPAIGN), out, VirtualHarness({"mosquitto": truth}, seed=3))
    runs, _, _, meta = read_results(out)
    prof = fit_profiles(runs, meta, background=False, method="joint", jitter_on="auto", n_boot=0)["mosquitto"]
    link = prof["link"]["loopback-mosquitto"]
    assert link.get("jitter_on", "every_packet") == true_mode
    assert f"jitter_on={true_mode} chosen by simulating" in link["provenance"]["note"]


def test_two_estimates_score_against_their_interval():
    # own stamps say P50 / P99, all messages 3 x that: every_packet's 2 x lies inside the interval
    # (error 0), idle_receiver's 0.9 x is 10 % below it; over own stamps alone every_packet would lose
    runs = _runs().assign(latency_any_p50_s=3 * P50, latency_any_p99_s=3 * P99)
    simulate, _ = _fake({"every_packet": 2.0, "idle_receiver": 0.875})
    cal = JitterModeCalibrator(simulate=simulate).fit(runs)
    assert cal.params_["jitter_on"] == "every_packet"
    assert cal.params_["objective"] == pytest.approx({"every_packet": 0.0, "idle_receiver": 25.0})
    assert JitterModeCalibrator(simulate=simulate).fit(_runs()).params_["jitter_on"] == "idle_receiver"
