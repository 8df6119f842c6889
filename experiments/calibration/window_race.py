"""When a broker's receive windows grow, and whether it fell behind first: ``ss`` and ``cpu.stat`` over a run.

Runs one configuration of a campaign file at the given rates, ``rounds``
times, and samples every ``interval_s`` from before the clients connect
(the harness's :class:`~pubsim.calibration.harness.sockets.SocketSampler`,
kept with its samples) the broker's side of each publisher connection
(``rcv_ssthresh``: the window it advertises at most; ``Recv-Q``: bytes
unread) together with the broker's CPU cap (``cpu.stat``: periods
throttled so far). Prints per run whether it collapsed (delivery ratio
below 0.95), the publishers' median window at fixed times after their
first data, when the window first passed 0.5 and 1 MB, and the periods
throttled before then: whether a run that collapsed fell behind before its
windows grew (calibration/README.md, "Flow control moves the publishers'
sending onto the broker's core", the race with autotuning). Its one use so
far (2026-12-02) met a machine whose wake-ups cost three to five times
those of the campaign's, where every run collapsed ("The machine drifts").

    .venv/bin/python experiments/calibration/window_race.py experiments/calibration/mosquitto-wire.yaml \
        mosquitto p32768-f1-cap05-holdout 20000,24615 4

Needs the broker (scripts/install_brokers.sh), root for cgroups, and ``ss`` (iproute2).
"""

import dataclasses
import os
import subprocess
import sys
import time

import numpy as np

from pubsim.calibration import runner
from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.harness.sockets import SocketSampler, parse_ss

AT_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
INTERVAL_S = float(os.environ.get("RACE_INTERVAL_S", "0.02"))


class KeptSampler(SocketSampler):
    """The harness's sampler, sampled often, kept after the run, with the cap's throttle count per sample."""

    last = None
    cap = None

    def __init__(self, port, **_):
        super().__init__(port, interval_s=INTERVAL_S)
        self.throttled = []
        KeptSampler.last = self

    def _loop(self):
        cmd = ["ss", "-tmniH", "state", "established", f"( sport = :{self.port} )"]
        while not self._stop.is_set():
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
            self.samples.append((time.monotonic(), parse_ss(out)))
            stat = KeptSampler.cap.stat() if KeptSampler.cap is not None else {}
            self.throttled.append(stat.get("throttled_periods", np.nan))
            self._stop.wait(self.interval_s)


def course(sampler):
    """``(t0, times, windows, recv_q, throttled)``: per sample the publishers' median window and
    unread bytes, from the first sample in which a publisher's connection had received data."""
    per = {}
    for i, (_t, conns) in enumerate(sampler.samples):
        for c in conns:
            per.setdefault(c["peer"], {})[i] = c
    received = {p: max(c["bytes_received"] for c in v.values()) for p, v in per.items()}
    top = max(received.values(), default=0)
    pubs = [v for p, v in per.items() if top > 0 and received[p] >= 0.5 * top]
    idx = sorted({i for v in pubs for i in v})
    first = next(i for i in idx if any(v.get(i, {}).get("bytes_received", 0) > 0 for v in pubs))
    times, win, rq, thr = [], [], [], []
    for i in idx:
        if i < first:
            continue
        vals = [v[i] for v in pubs if i in v]
        times.append(sampler.samples[i][0] - sampler.samples[first][0])
        win.append(np.median([c["rcv_ssthresh"] for c in vals]))
        rq.append(np.median([c["recv_q"] for c in vals]))
        thr.append(sampler.throttled[i] - sampler.throttled[first])
    return np.array(times), np.array(win), np.array(rq), np.array(thr)


def describe(times, win, rq, thr):
    at = [win[min(np.searchsorted(times, a), len(win) - 1)] / 1e6 for a in AT_S]
    parts = [f"window MB at {', '.join(f'{a:g}' for a in AT_S)} s: " + " ".join(f"{w:.2f}" for w in at)]
    for mb in (0.5, 1.0):
        hit = np.flatnonzero(win >= mb * 1e6)
        if hit.size:
            k = hit[0]
            parts.append(f">= {mb:g} MB at {times[k]:.2f} s after {thr[k]:.0f} throttled periods")
        else:
            parts.append(f"never {mb:g} MB")
    parts.append(f"Recv-Q max before 0.5 s {rq[times < 0.5].max() / 1e3:.0f} kB")
    return "; ".join(parts)


def main(path, broker, config, rates, rounds):
    camp = dataclasses.replace(load_campaign(path), sample_sockets=True)
    cfg = {c.name: c for c in camp.configurations}[config]
    runner.SocketSampler = KeptSampler
    with runner.RealHarness(camp) as harness:
        for r in range(rounds):
            for rate in rates:
                spec = camp.run_spec(broker, cfg, rate, "light")
                KeptSampler.cap = getattr(harness._ensure_broker(spec), "cpu_cap", None)
                row, _ = harness(spec)
                ratio = row["delivery_ratio"]
                state = "collapsed" if ratio < 0.95 else "sustained"
                cpu_us = row["demand_s_per_ingress"] * 1e6
                print(
                    f"round {r + 1} {rate:.0f}/s {state} (delivery {ratio:.3f}, {cpu_us:.1f} us/msg, throttled "
                    f"{row['cap_throttled_period_fraction']:.0%}); " + describe(*course(KeptSampler.last)),
                    flush=True,
                )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], [float(r) for r in sys.argv[4].split(",")], int(sys.argv[5]))
