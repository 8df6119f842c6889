"""Does Go's garbage collector make NATS's tails near its limit under a CPU quota?

Runs one configuration of a campaign file at the given rates with NATS's
collector on (Go's default, ``GOGC=100``) and off (``GOGC=off``), in turn, on
a fresh broker each run, with ``GODEBUG=gctrace=1`` so that the server
prints one line per collection to its output file. Prints per run the
collections, their CPU (the trace's "ms cpu" fields summed) per second and
per collection, the run's CPU per message and throttled periods, and the
latency quantiles over own stamps and over all messages. If the collector
makes the tails, the runs without it have short tails at the same rates.
calibration/README.md, "NATS's tails near its limit", has the result, and
"Installed subscriptions nobody publishes to" the same A/B on idle subscriptions
(``experiments/calibration/idle-filters.yaml``).

    .venv/bin/python experiments/calibration/nats_gc.py experiments/calibration/brokers-wire.yaml \
        p256-f2-holdout 25600,32000,37647 2

Needs NATS (scripts/install_brokers.sh) and cgroup CPU control (root).
"""

import os
import re
import sys
import tempfile
from pathlib import Path

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.runner import RealHarness

#: gc 12 @3.21s 1%: 0.02+1.1+0.01 ms clock, 0.04+0.3/0.5/0.2+0.02 ms cpu, 4->4->1 MB, 4 MB goal, ..., 2 P
_LINE = re.compile(r"^gc \d+ @([\d.]+)s \d+%: [\d.+]+ ms clock, ([\d.+/]+) ms cpu, .* (\d+) P")


def collections(text):
    """``[(at_s, cpu_ms, procs)]`` of the gctrace lines in ``text``."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            cpu = sum(float(x) for x in re.split(r"[+/]", m.group(2)))
            out.append((float(m.group(1)), cpu, int(m.group(3))))
    return out


def main(path, config, rates, rounds):
    camp = load_campaign(path)
    cfg = {c.name: c for c in camp.configurations}[config]
    print("gc   rate/s   GCs/s  gc_cpu_ms/s  ms/GC  P  us/msg  throttled  p50_ms  p99_ms  any_p50_ms  any_p99_ms  sust")
    with tempfile.TemporaryDirectory(prefix="pubsim-natsgc-") as wd, RealHarness(camp, workdir=wd) as harness:
        out = Path(wd) / f"nats-{config}" / "nats.out"
        for _ in range(rounds):
            for rate in rates:
                for gogc in ("100", "off"):
                    harness.close_broker()  # a fresh server, started with this setting
                    os.environ.update(GOGC=gogc, GODEBUG="gctrace=1")
                    spec = camp.run_spec("nats", cfg, rate, "light")
                    start = out.stat().st_size if out.exists() else 0
                    row, _ = harness(spec)
                    with open(out, "rb") as f:
                        f.seek(start)
                        gcs = collections(f.read().decode(errors="replace"))
                    span = spec.duration_s + spec.warmup_s + spec.cooldown_s
                    cpu = sum(c for _, c, _ in gcs)
                    procs = gcs[-1][2] if gcs else 0
                    print(
                        f"{gogc:4s} {rate:8.0f} {len(gcs) / span:7.1f} {cpu / span:12.2f}"
                        f" {cpu / max(len(gcs), 1):6.2f} {procs:2d} {row['demand_s_per_ingress'] * 1e6:7.1f}"
                        f" {row.get('cap_throttled_period_fraction', 0):10.2f}"
                        f" {row['latency_p50_s'] * 1e3:7.2f} {row['latency_p99_s'] * 1e3:7.2f}"
                        f" {row['latency_any_p50_s'] * 1e3:11.2f} {row['latency_any_p99_s'] * 1e3:11.2f}"
                        f"  {row['sustainability']:.3f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [float(r) for r in sys.argv[3].split(",")], int(sys.argv[4]))
