"""Does a copy cost Mosquitto more when its subscriber is asleep?

Runs Mosquitto (capped, pinned to core 1; clients on core 0; :mod:`broker_perf`) at
fan-out F and a few rates, and counts on the broker process, over 3 s of each run's window, its
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

from broker_perf import count_run

EVENTS = ("task-clock", "sched:sched_waking")


def run(fanout, rate_per_s):
    per, summary = count_run(fanout=fanout, rate_per_s=rate_per_s, payload_bytes=64, events=EVENTS)
    cpu_us = per["task-clock"] * 1e6 / fanout
    wakings = per["sched:sched_waking"] / fanout
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
