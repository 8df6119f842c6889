"""What-if: Mosquitto's pass cost fixed (us, the first argument), the other costs refitted on what
it leaves of the three pooled campaigns' training runs; simulated limits of the held-out pairs.

    .venv/bin/python experiments/calibration/pass_whatif.py 2.5

calibration/README.md, "A pass cost, measured in interleaved runs", has the result, computed before
the passes were read round robin (PassDiscipline) and before each twin replayed its own run's
pacing; run again, it gives the current model's (its twins still use the one-publisher pacing).
Not a fit the pipeline makes: `pubsim validate` fits the pass on the campaigns
(`--connection-form auto`).
"""

import sys

import numpy as np

from pubsim.calibration.campaign import pool_results
from pubsim.calibration.fit import passes_of
from pubsim.calibration.pacing import pacing_from_runs
from pubsim.calibration.profile import _us
from pubsim.calibration.validate import _simulated_limit, fit_profiles, pair_machine

CAMPAIGNS = [
    "calibration/data/mosquitto-connections",
    "calibration/data/mosquitto-extended-retries",
    "calibration/data/mosquitto-extended",
]

pass_s = float(sys.argv[1]) * 1e-6
runs, sat, lat, meta = pool_results(CAMPAIGNS)
passes = passes_of(runs)
known = ~np.isnan(passes)
left = runs[known].copy()
left["demand_s_per_ingress"] = left["demand_s_per_ingress"] - pass_s * passes[known]
profile = fit_profiles(left, meta, n_boot=0, connection_form=None)["mosquitto"]
profile["broker"]["mosquitto"]["io"] = {"cycle_cost_s": _us(pass_s), "cycle_max_per_connection": 1}
pacing = pacing_from_runs(runs[runs.split == "train"])
machine = pair_machine(meta)
limits = sat.set_index(["broker", "config"])
for config, rows in runs.groupby("config", sort=False):
    if rows.split.iloc[0] != "holdout" and "c8" not in config and config != "p64-f1":
        continue
    sim = _simulated_limit(rows, machine(profile, "mosquitto", config), 0, 10, pacing, None)
    meas = limits.loc[("mosquitto", config), "limit_rate_per_s"]
    err = 100 * (sim.rate_per_s - meas) / meas
    print(f"{config:55s} {rows.split.iloc[0]:8s} measured {meas:8.0f} simulated {sim.rate_per_s:8.0f} {err:+6.1f} %")
