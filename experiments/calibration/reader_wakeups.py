"""Does a copy cost Mosquitto more when its subscriber is asleep?

Runs Mosquitto (capped, pinned to core 1; clients on core 0) at fan-out F and a
few rates, and counts on the broker process, over 3 s of each run's window, its
CPU time and the tasks it wakes (``perf stat -e task-clock,sched:sched_waking -p
PID``: ``sched_waking`` fires in the waker's context, so these are the wake-ups
the broker's writes make). Prints, per run, CPU and wake-ups per copy.

A broker's write to a loopback socket runs the receiver's TCP input in the
broker's own context and wakes the reading task if it sleeps in ``select``
(``sk_data_ready`` -> ``try_to_wake_up``, an inter-processor interrupt to the
client core, a VM exit on this machine). A subscriber that is still busy with the
previous copy is not woken. calibration/README.md, "Fan-out up to 100", has the
result.

    .venv/bin/python experiments/calibration/reader_wakeups.py 16 200,400,700 100 40,64,95

(pairs of fan-out and comma-separated rates). Needs Mosquitto
(scripts/install_brokers.sh), perf (linux-perf) and cgroup CPU control (root).
"""

import sys
import tempfile
import threading
import time

from pubsim.calibration.harness.brokers import BrokerSpec, broker
from pubsim.calibration.harness.loadgen import LoadSpec, run_load
from pubsim.calibration.harness.perfctl import ControlledPerf

CAP_CORES = 0.2
COUNT_FROM_S, COUNT_FOR_S = 3.0, 3.0  # after the clients' set-up and the warm-up; inside the window
EVENTS = ("task-clock", "sched:sched_waking")


def _count(pid, out):
    """Count EVENTS on ``pid`` for COUNT_FOR_S, from COUNT_FROM_S after the call."""
    perf = ControlledPerf(["stat", "-x", ",", "-e", ",".join(EVENTS), "-p", pid]).start()
    time.sleep(COUNT_FROM_S)
    perf.enable(f"counting on the broker {pid}")
    time.sleep(COUNT_FOR_S)
    for line in perf.stop(30).splitlines():
        parts = line.split(",")
        if len(parts) >= 3 and parts[2] in EVENTS:
            out[parts[2]] = float(parts[0])


def run(fanout, rate_per_s):
    with broker(BrokerSpec(kind="mosquitto", cpus=(1,), cpu_cap_fraction=CAP_CORES), tempfile.mkdtemp()) as rb:
        spec = LoadSpec(
            protocol="mqtt",
            rate_per_s=rate_per_s,
            duration_s=COUNT_FROM_S + COUNT_FOR_S + 2.0,
            warmup_s=1.0,
            cooldown_s=0.5,
            pub_port=rb.port,
            sub_port=rb.port,
            subscribers=fanout,
            fanout=fanout,
            payload_bytes=64,
            pub_cpus=(0,),
            sub_cpus=(0,),
        )
        counts = {}
        counter = threading.Thread(target=_count, args=(rb.pid, counts))
        counter.start()
        summary = run_load(spec).summary()
        counter.join()
    copies = rate_per_s * fanout * COUNT_FOR_S
    cpu_us = counts["task-clock"] * 1e3 / copies  # perf's task-clock is in ms
    wakings = counts["sched:sched_waking"] / copies
    print(
        f"{fanout:6d} {rate_per_s:8.0f} {rate_per_s * fanout:8.0f} {cpu_us:12.1f} {wakings:13.2f}"
        f" {summary['latency_p50_s'] * 1e6:8.0f} {summary['lost']:5d}",
        flush=True,
    )


def main(args):
    print("fanout   rate/s  copies/s  cpu_us/copy  wakings/copy  p50_us  lost")
    for fanout, rates in zip(args[::2], args[1::2], strict=True):
        for rate in rates.split(","):
            run(int(fanout), float(rate))


if __name__ == "__main__":
    main(sys.argv[1:])
