"""Flow control past the limit: the broker's CPU per message once its publishers are held, the
softirq time traced on its core, the flow-control cost fitted, and the twin past the limit
(calibration/README.md, "Flow control moves the publishers' sending onto the broker's core").

Prints, per configuration of a campaign measured with ``trace_softirqs``: its limit, the CPU per
message of its most loaded sustainable runs and of its held runs, their ``NET_RX`` and timer
softirq per message, and egress past the limit over the limit; then
:class:`pubsim.calibration.overload.FlowControlCostCalibrator` on the configurations not excluded.
With ``--twin DIR --config NAME`` it also simulates that configuration of campaign ``DIR``
(profile fitted on its training split with ``--connection-form``: ``auto``, the default, is what
``pubsim calibrate`` chooses, Mosquitto's event-loop passes where the campaign counted them;
``per_message`` the FIFO worker with a per-message connection cost) past its limit, without
overload, with the socket buffers only, and with the fitted flow-control cost, and prints measured
egress beside.

    python benchmarks/flowcontrol_benchmark.py calibration/data/mosquitto-flowcontrol \\
        --exclude p32768-f1-c4-cap05 --twin calibration/data/mosquitto-wire \\
        --config p32768-f1-cap05-holdout --window-bytes 2.2MB
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from pubsim.calibration.campaign import read_results
from pubsim.calibration.overload import FlowControlCostCalibrator, with_overload
from pubsim.calibration.pacing import pacing_from_runs, run_pacing_from_runs
from pubsim.calibration.validate import fit_profiles, simulate_run
from pubsim.models.params.overload import OverloadParams
from pubsim.sim.units import parse_size_bytes

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)

#: The socket buffers fitted on the extended campaign (calibration/README.md, "Past the limit").
BUFFER_BYTES, OVERHEAD_BYTES = 3_930_000, 25


def _per_message(rows, column):
    if column not in rows:
        return np.nan
    return float((rows[column] / rows["ingress_rate_per_s"]).median() * 1e6)


def states_table(runs, saturation, calibrator):
    """Per configuration: the runs ``calibrator`` compares, its most loaded sustainable runs
    against the held ones (:meth:`FlowControlCostCalibrator.states`), us per message."""
    limits = saturation.set_index("config")["limit_rate_per_s"]
    out = []
    for config, base, held in calibrator.states(runs):
        out.append(
            {
                "config": config,
                "publishers": int(base["publishers"].iloc[0]),
                "payload_bytes": int(base["payload_bytes"].iloc[0]),
                "limit_per_s": limits[config],
                "cpu_us_sustained": 1e6 * base["demand_s_per_ingress"].median(),
                "cpu_us_held": 1e6 * held["demand_s_per_ingress"].median(),
                "net_rx_us_sustained": _per_message(base, "broker_softirq_net_rx_s_per_s"),
                "net_rx_us_held": _per_message(held, "broker_softirq_net_rx_s_per_s"),
                "timers_us_sustained": _per_message(base, "broker_softirq_timers_s_per_s"),
                "timers_us_held": _per_message(held, "broker_softirq_timers_s_per_s"),
                "held_egress/limit": float((held["egress_received_per_s"] / held["fanout"]).median() / limits[config]),
                "n_held": len(held),
            }
        )
    return pd.DataFrame(out)


def twin_past_limit(campaign, config, flow, window_bytes, rates=None, seed=0, connection_form="auto"):
    """Simulated egress past the limit of ``config`` in ``campaign``: plain, buffers, buffers + flow cost."""
    runs, saturation, _, meta = read_results(campaign)
    one = pacing_from_runs(runs[runs["split"] == "train"], source="training runs")
    pacing = run_pacing_from_runs(runs, fallback=one, source="the campaign's runs")
    profile = fit_profiles(runs, meta, variability=True, connection_form=connection_form, pacing=pacing)["mosquitto"]
    passes = (profile["broker"]["mosquitto"].get("io") or {}).get("cycle_max_per_connection") is not None
    print(f"twin: {'event-loop passes' if passes else 'one FIFO worker'} (connection form {connection_form})")
    buffers = OverloadParams(socket_buffer_bytes=BUFFER_BYTES, message_overhead_bytes=OVERHEAD_BYTES)
    costed = OverloadParams(
        socket_buffer_bytes=BUFFER_BYTES,
        message_overhead_bytes=OVERHEAD_BYTES,
        receive_window_bytes=window_bytes,
        **flow,
    )
    rows = runs[(runs["config"] == config) & (runs["publisher_lag_max_s"] >= 1.0)]
    measured = rows.groupby("rate_per_s")["egress_received_per_s"].median() / rows["fanout"].iloc[0]
    out = []
    for rate in rates or sorted(measured.index):
        row = rows.iloc[0].to_dict() | {"rate_per_s": rate}
        rec = {"offered_per_s": rate, "measured_egress": measured.get(rate, np.nan)}
        for tag, ov in (("plain", None), ("buffers", buffers), ("flow", costed)):
            sim = simulate_run(row, with_overload(profile, ov), seed=seed, sample=1, pacing=pacing)[0]
            rec[f"egress_{tag}"] = sim["egress_rate_per_s"]
        out.append(rec)
    return pd.DataFrame(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", help="a finished campaign measured with trace_softirqs")
    ap.add_argument("--exclude", action="append", default=[], help="a configuration left out of the fit")
    ap.add_argument("--twin", help="a campaign whose --config is simulated past its limit")
    ap.add_argument("--config", help="the configuration of --twin")
    ap.add_argument("--window-bytes", default="2.2MB", help="receive window per connection (default 2.2MB)")
    ap.add_argument("--connection-form", default="auto", help="the twin's connection form (default auto)")
    args = ap.parse_args()
    runs, saturation, _, _ = read_results(args.campaign)
    cal = FlowControlCostCalibrator(overhead_bytes=OVERHEAD_BYTES, fit_fixed=False)
    print("== sustained (the 3 most loaded sustainable runs) vs held (publishers >= 1 s behind), medians ==")
    print(states_table(runs, saturation, cal).round(2).to_string(index=False))
    cal.fit(runs[~runs["config"].isin(args.exclude)])
    p = cal.params_
    print(f"\n== flow-control cost fitted (excluded: {args.exclude or 'none'}): {p} ==")
    print(
        cal.table_.assign(**{c: 1e6 * cal.table_[c] for c in ("baseline_s", "held_s", "extra_s", "fitted_s")}).round(2)
    )
    if args.twin and args.config:
        flow = {k: p[k] for k in ("flow_control_cost_s", "flow_control_cost_s_per_byte")}
        window = parse_size_bytes(args.window_bytes, "--window-bytes")
        print(f"\n== {args.config} of {args.twin} past its limit: egress, msg/s ==")
        table = twin_past_limit(args.twin, args.config, flow, window, connection_form=args.connection_form)
        print(table.round(0).to_string(index=False))


if __name__ == "__main__":
    main()
