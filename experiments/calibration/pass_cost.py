"""CPU per message of Mosquitto with 1, 8 and 32 connection pairs, interleaved, with the
broker's passes, sleeps, wake-ups and transmitted segments counted by perf (issue 18).

Runs each configuration of a campaign file at each rate in turn, ``reps``
times, so that the machine's drift (about 15 % between minutes) falls on
every shape alike; writes one JSON line per run. calibration/README.md, "A
pass cost, measured in interleaved runs", has the result and the fit.

    .venv/bin/python experiments/calibration/pass_cost.py experiments/calibration/pass-cost.yaml \
        '{"rates": [2000, 8000, 16000], "configs": ["c1", "c8", "c32"]}' 2 runs.jsonl

Needs the brokers (scripts/install_brokers.sh) and perf (Debian linux-perf) with tracepoints.
"""

import json
import signal
import subprocess
import sys
from pathlib import Path

from pubsim.calibration.campaign import load_campaign
from pubsim.calibration.harness import procfs
from pubsim.calibration.runner import RealHarness, _cap_fields, _cap_stat, _cpu_s, run_load

EVENTS = [
    "sched:sched_wakeup",
    "sched:sched_waking",
    "sched:sched_switch",
    "irq:softirq_entry",
    "net:net_dev_xmit",
    "syscalls:sys_enter_epoll_wait",
    "syscalls:sys_enter_read",
    "syscalls:sys_enter_write",
]


def ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]), int(f[12])


class Perf:
    def __init__(self, pid):
        self.pid = pid

    def start(self):
        self.p = subprocess.Popen(
            ["perf", "stat", "-x", ",", "-e", ",".join(EVENTS), "-p", str(self.pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        err = self.p.communicate()[1]
        out = {}
        for line in err.splitlines():
            parts = line.split(",")
            if len(parts) >= 3 and parts[2] in EVENTS:
                out[parts[2].split(":")[1]] = float(parts[0]) if parts[0].replace(".", "", 1).isdigit() else None
        return out


class H(RealHarness):
    def _measure(self, spec):
        broker = self._ensure_broker(spec)
        first = procfs.sample(broker.pid)
        marks = {}
        perf = Perf(broker.pid)

        def started():
            marks["settle_s"] = self._settle(spec)
            marks["cap"], marks["cpu"] = _cap_stat(broker), procfs.sample(broker.pid)
            marks["ticks"] = ticks(broker.pid)
            perf.start()

        result = run_load(self._load_spec(spec, broker), on_start=started)
        after = procfs.sample(broker.pid)
        t1 = ticks(broker.pid)
        ev = perf.stop()
        cpu = procfs.diff(marks["cpu"], after)
        cpu["syscalls"] = {}
        cpu["setup_cpu_s"] = _cpu_s(procfs.diff(first, marks["cpu"]))
        cpu["probe_settle_s"] = marks["settle_s"] or float("nan")
        self.extra = {"utime": t1[0] - marks["ticks"][0], "stime": t1[1] - marks["ticks"][1], **ev}
        return broker, result, cpu, _cap_fields(marks["cap"], _cap_stat(broker), cpu["wall_s"])


camp = load_campaign(sys.argv[1])
cfgs = {c.name: c for c in camp.configurations}
plan = json.loads(sys.argv[2])
reps = int(sys.argv[3])
out = Path(sys.argv[4])
with H(camp) as h:
    for rep in range(reps):
        for rate in plan["rates"]:
            for name in plan["configs"]:
                spec = camp.run_spec("mosquitto", cfgs[name], rate, "probe")
                row, _ = h(spec)
                n = row["sent_total"]
                rec = {
                    "rep": rep,
                    "config": name,
                    "rate": rate,
                    **{
                        k: row.get(k)
                        for k in (
                            "sent_total",
                            "sustainability",
                            "demand_s_per_ingress",
                            "wakeups_per_ingress",
                            "broker_utilization",
                            "broker_cpu_s",
                            "broker_setup_cpu_s",
                            "cap_throttled_period_fraction",
                            "latency_p50_s",
                        )
                    },
                    **h.extra,
                }
                per = {k: (v / n if isinstance(v, (int, float)) and v is not None else v) for k, v in h.extra.items()}
                us = rec["demand_s_per_ingress"] * 1e6
                tot = h.extra["utime"] + h.extra["stime"]
                print(
                    f"{rep} {name:10s} {rate:>6} sus={rec['sustainability']:.3f} cpu={us:6.2f}us user={us * h.extra['utime'] / max(tot, 1):5.2f} sys={us * h.extra['stime'] / max(tot, 1):5.2f} "
                    + " ".join(
                        f"{k[-9:]}={v:.3f}" for k, v in per.items() if k not in ("utime", "stime") and v is not None
                    ),
                    flush=True,
                )
                with out.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
