"""How a capped broker spends its CPU quota, period by period: ``sched_switch`` on its core.

Runs one configuration of a campaign file at the given rates and, two
seconds into each run's window, records the scheduler's switches on the
broker's core for ``trace_s`` seconds (``perf record -e sched:sched_switch
-C CPU``). From the trace: the broker's on-CPU bursts (its threads running
with gaps under 0.2 ms merged), how much CPU each burst took, the gaps
between them, and how many times it was switched out runnable with the
core going idle (``prev_state=R`` to the idle task: the quota throttling
it). Under an exactly enforced quota of ``q`` per period no burst exceeds
``q`` by much and no gap exceeds the period; a broker charged only at the
scheduler tick (4 ms at ``CONFIG_HZ=250``) can run past ``q`` and repay the
debt from the next periods, leaving gaps of several periods.
calibration/README.md, "How the quota is spent", has the result.

    .venv/bin/python experiments/calibration/quota_trace.py experiments/calibration/brokers-wire.yaml \
        nats p256-f2-holdout 25600,32000 2

Needs the broker (scripts/install_brokers.sh), root for cgroups and perf
(Debian linux-perf) with the sched tracepoints.
"""

import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.harness.cpu import quota_us
from pubsim.calibration.runner import RealHarness

_SWITCH = re.compile(
    r"\s(\d+\.\d+):\s+sched:sched_switch:.*prev_comm=(.+?) prev_pid=(\d+) .*prev_state=(\S+)"
    r" ==> next_comm=(.+?) next_pid=(\d+)"
)
MERGE_S = 0.2e-3


def on_cpu_intervals(text, pids, comm):
    """``(start, end, throttled_out)`` intervals of the broker's threads on the traced core, s: the
    threads ``pids`` and any other named ``comm`` (a Go or JVM runtime starts threads mid-run)."""
    out, since, ours = [], None, set(pids)
    for line in text.splitlines():
        m = _SWITCH.search(line)
        if not m:
            continue
        t, state, nxt = float(m.group(1)), m.group(4), int(m.group(6))
        if m.group(2) == comm:
            ours.add(int(m.group(3)))
        if m.group(5) == comm:
            ours.add(nxt)
        if int(m.group(3)) in ours and since is not None:
            out.append((since, t, state.startswith("R") and nxt == 0))
            since = None
        if nxt in ours:
            since = t
    return out


def bursts(intervals):
    """Merge intervals closer than :data:`MERGE_S`: ``[(start, end, cpu_s, throttled_out)]``."""
    merged = []
    for s, e, thr in intervals:
        if merged and s - merged[-1][1] < MERGE_S:
            b = merged[-1]
            merged[-1] = (b[0], e, b[2] + (e - s), b[3] or thr)
        else:
            merged.append((s, e, e - s, thr))
    return merged


def summary(merged, period_s):
    cpu = np.array([b[2] for b in merged])
    gaps = np.diff([b[0] for b in merged]) if len(merged) > 1 else np.zeros(0)
    thr = np.array([b[3] for b in merged])
    q = lambda x, p: float(np.quantile(x, p)) * 1e3 if x.size else float("nan")  # noqa: E731
    return (
        f"bursts {len(merged)}, ended throttled {thr.mean():.0%}; CPU per burst ms p50 {q(cpu, 0.5):.2f} "
        f"p90 {q(cpu, 0.9):.2f} max {q(cpu, 1.0):.2f}; start-to-start ms p50 {q(gaps, 0.5):.1f} "
        f"p99 {q(gaps, 0.99):.1f} max {q(gaps, 1.0):.1f}; gaps over 1.5 periods: "
        f"{int((gaps > 1.5 * period_s).sum())}"
    )


def _start(perf, cmd):
    perf["p"] = subprocess.Popen(cmd)


def threads(pid):
    return {int(p.name) for p in Path(f"/proc/{pid}/task").iterdir()}


def main(path, broker, config, rates, rounds, trace_s=2.0):
    camp = load_campaign(path)
    cfg = {c.name: c for c in camp.configurations}[config]
    cpu = ",".join(map(str, camp.broker_cpus)) if camp.broker_cpus else "0"
    with tempfile.TemporaryDirectory(prefix="pubsim-qtrace-") as wd, RealHarness(camp) as harness:
        for _ in range(rounds):
            for rate in rates:
                spec = camp.run_spec(broker, cfg, rate, "light")
                pid = harness._ensure_broker(spec).pid
                pids = threads(pid)
                data = Path(wd) / "perf.data"
                cmd = ["perf", "record", "-q", "-e", "sched:sched_switch", "-C", cpu, "-o", str(data)]
                cmd += ["--", "sleep", str(trace_s)]
                perf = {}
                timer = threading.Timer(spec.warmup_s + 2.0, _start, (perf, cmd))
                timer.start()
                row, _ = harness(spec)
                timer.join()
                perf["p"].wait()
                text = subprocess.run(["perf", "script", "-i", str(data)], capture_output=True, text=True).stdout
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                merged = bursts(on_cpu_intervals(text, pids | threads(pid), comm))
                period_s = quota_us(spec.cpu_cap_fraction)[1] * 1e-6
                print(
                    f"{broker} {config} {rate:.0f}/s: p99 {row['latency_p99_s'] * 1e3:.1f} ms, throttled "
                    f"{row.get('cap_throttled_s_per_s', float('nan')):.2f} s/s; " + summary(merged, period_s),
                    flush=True,
                )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], [float(r) for r in sys.argv[4].split(",")], int(sys.argv[5]))
