"""How the twin's latency answers a speed drift it could not fit: a grid on the training split.

Fits one broker's profile on a campaign as ``pubsim validate DIR`` does (its
defaults), then validates its training configurations again with the
broker's speed drift (``speed_drift_log_sd``, ``speed_drift_time_s``) set to
each point of a grid, and prints per point and configuration the
saturation, p50 (against the interval of the two estimates) and p99 errors.
For brokers whose every capped run spent its quota (NATS and the ZeroMQ
proxy on ``data/brokers-wire``) the throttled fractions cannot identify a
drift (:class:`pubsim.calibration.drift.SpeedDriftCalibrator`); this shows
whether one would reproduce their tails, and which, before any fit is
built on it. Training split only: the held-out split is not looked at.
calibration/README.md, "A drift the quota hides", has the result.

    .venv/bin/python experiments/calibration/drift_grid.py calibration/data/brokers-wire nats \
        0:0,0.1:0.1,0.1:0.3,0.1:1
"""

import sys

from pubsim.calibration.campaign import read_results
from pubsim.calibration.cli import _fitted, _pacing
from pubsim.calibration.report import accuracy_table
from pubsim.calibration.validate import validate
from pubsim.cli import build_parser


def main(results, broker, grid):
    args = build_parser().parse_args(["validate", results])
    runs, sat, lat, meta = read_results(results)
    runs, sat = runs[runs["broker"] == broker], sat[sat["broker"] == broker]
    pacing = _pacing(args, runs)
    runs, sat, lat, meta, profiles = _fitted(args, (runs, sat, lat, meta), pacing=pacing)
    train = runs[runs["split"] == "train"]
    keys = sat.set_index(["broker", "config"]).index.isin(train.set_index(["broker", "config"]).index)
    base = profiles[broker]
    ((name, fields),) = base["broker"].items()
    print("log_sd  time_s  config                 sat%    p50_br%   p99%")
    for log_sd, time_s in grid:
        prof = {**base, "broker": {name: {**fields, "speed_drift_log_sd": log_sd, "speed_drift_time_s": time_s}}}
        v = validate(train, sat[keys], lat, {broker: prof}, pacing=pacing)
        acc = accuracy_table(v.per_pair, v.per_run)
        for _, row in acc.iterrows():
            print(
                f"{log_sd:6.3f}  {time_s:6.2f}  {row['config']:20s} {row['saturation_error_pct']:6.1f}"
                f"  {row['p50_bracket_error_pct']:8.1f}  {row['p99_error_pct']:6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    points = [tuple(float(x) for x in p.split(":")) for p in sys.argv[3].split(",")]
    main(sys.argv[1], sys.argv[2], points)
