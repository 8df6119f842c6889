"""Is it glibc's heap trimming that makes Mosquitto's 256 KiB messages dear?

Runs Mosquitto (:mod:`broker_perf`: 0.2 core, fan-out 1, a light rate below every
limit) at a few payload sizes, each twice in turn: with glibc's defaults, and with the
heap's trim and mmap thresholds raised to 64 MiB (``GLIBC_TUNABLES``, glibc(7)
tunables ``glibc.malloc.trim_threshold`` and ``glibc.malloc.mmap_threshold``), so that a
freed payload stays in the heap. Prints CPU, page faults and ``brk`` calls per message.
If trimming is the cause, the tuned broker's CPU per byte at 256 KiB falls to that of
64 KiB. calibration/README.md, "Payloads up to 256 KiB", has the result.

    .venv/bin/python experiments/calibration/payload_allocator.py 150 65536,131072,262144
"""

import sys

from broker_perf import count_run

EVENTS = ("task-clock", "page-faults", "syscalls:sys_enter_brk", "syscalls:sys_enter_mmap")
KEEP = {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=67108864:glibc.malloc.mmap_threshold=67108864"}


def main(rate_per_s, payloads):
    print("payload_B  glibc     cpu_us/msg  ns/B   faults/msg  brk/msg  mmap/msg")
    for payload in payloads:
        for name, env in (("default", None), ("keep", KEEP)):
            per, _ = count_run(fanout=1, rate_per_s=rate_per_s, payload_bytes=payload, events=EVENTS, env=env)
            cpu_s = per["task-clock"]
            print(
                f"{payload:9d}  {name:8s} {cpu_s * 1e6:11.1f} {cpu_s * 1e9 / payload:6.2f}"
                f" {per['page-faults']:11.2f} {per['syscalls:sys_enter_brk']:8.2f}"
                f" {per['syscalls:sys_enter_mmap']:8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main(float(sys.argv[1]), [int(p) for p in sys.argv[2].split(",")])
