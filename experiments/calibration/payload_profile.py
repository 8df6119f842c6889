"""Where does a large message's CPU go in Mosquitto? (issues 15/18, "Payloads up to 256 KiB")

A 256 KiB message costs Mosquitto 6-7 times a 64 KiB one at the limit (calibration/README.md,
"Payloads up to 256 KiB"), and glibc's heap trimming is not the main cause. This samples where
the broker spends its CPU: Mosquitto capped at :data:`broker_perf.CAP_CORES` on core 1 (clients
on core 0) under an overload (``rate`` above its limit, so it works back to back, as at the
limit), ``perf record -e cpu-clock -g`` on its process for :data:`broker_perf.COUNT_FOR_S` of the
window, then the sampled time per message by the functions that hold it (self time, kernel and
user), for each payload in turn.

    .venv/bin/python experiments/calibration/payload_profile.py 65536:2000,262144:500 [--top 25]

``PAYLOAD:RATE`` pairs (bytes, msg/s). Needs Mosquitto (scripts/install_brokers.sh), perf
(linux-perf) and root (cgroup CPU control, kernel symbols).
"""

import argparse
import os
import subprocess
import tempfile
import time

from broker_perf import CAP_CORES, COUNT_FOR_S, COUNT_FROM_S, measured_run

from pubsim.calibration.harness.perfctl import ControlledPerf

FREQ_HZ = 4999


def _record(pid, path, out):
    perf = ControlledPerf(["record", "-e", "cpu-clock", "-F", FREQ_HZ, "-g", "-o", path, "-p", pid]).start()
    time.sleep(COUNT_FROM_S)
    perf.enable(f"sampling the broker {pid}")
    t0 = time.monotonic()
    time.sleep(COUNT_FOR_S)
    perf.stop(60)
    out["seconds"] = time.monotonic() - t0


def profile(payload_bytes, rate_per_s, workdir):
    """``(summary, report text, sampled seconds)`` of one overloaded run."""
    path = os.path.join(workdir, f"perf-{payload_bytes}.data")
    info = {}
    summary = measured_run(
        fanout=1,
        rate_per_s=rate_per_s,
        payload_bytes=payload_bytes,
        measure=lambda pid: _record(pid, path, info),
        workdir=workdir,
    )
    report = subprocess.run(
        [
            "perf",
            "report",
            "-i",
            path,
            "--stdio",
            "--no-children",
            "--sort",
            "symbol",
            "-g",
            "none",
            "--percent-limit",
            "0.5",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return summary, report, info["seconds"]


def main(pairs, top):
    workdir = tempfile.mkdtemp()
    for payload, rate in pairs:
        summary, report, seconds = profile(payload, rate, workdir)
        delivered = summary.get(
            "egress_received_in_window_per_s", summary["egress_rate_per_s"]
        )  # processed in the window
        cpu_s = CAP_CORES * seconds  # the quota, all spent under overload
        print(
            f"\n== payload {payload} B, offered {rate:g}/s, delivered {delivered:.0f}/s: "
            f"{cpu_s / (delivered * seconds) * 1e6:.0f} us of quota per message",
            flush=True,
        )
        lines = [ln for ln in report.splitlines() if ln.strip() and not ln.startswith("#")]
        for ln in lines[:top]:
            share = float(ln.split("%")[0]) / 100
            print(f"{share * cpu_s / (delivered * seconds) * 1e6:8.1f} us  {ln.strip()}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", help="PAYLOAD:RATE,... (bytes:msg/s)")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    main([(int(p), float(r)) for p, r in (x.split(":") for x in a.pairs.split(","))], a.top)
