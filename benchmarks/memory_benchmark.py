"""Peak memory against run length with ``record: stream``, one scenario per mechanism.

Each case is an experiments/ scenario (some with a few settings changed, see
``CASES``), run with ``record="stream"`` at 1x, 10x and 100x of a base
duration, each run in a fresh Python process. Prints the peak resident set
size of each child (``ru_maxrss`` from ``os.wait4``), its wall time and
published messages, and the ratio of the 100x to the 10x peak: with streaming
tallies the state of a run is bounded by what is in flight, so the ratio
should be near 1 (target: at most 1.2).

A run's largest transient arrays are one chunk of publications of the batch
driver (``chunk_messages``) and their copies; a run shorter than a chunk
does not fill it, so its peak says nothing about growth. The benchmark uses
chunks of 5,000 publications (the simulator's default is 250,000) so that
the 10x runs already span several chunks; ``--chunk-messages`` changes it.
State kept from one chunk to the next shows only with full-size chunks:
``--chunk-messages 250000 --scale 10 --only churn,qos_lossy`` runs the
issue-17 setting (the churn scenario at 300 s, 3,000 s and 30,000 s). The base durations are chosen so that the whole benchmark
(24 runs, dominated by the 100x ones) takes a few minutes on a 2-core machine;
``--scale`` multiplies them all.

``--durations 10,40,160`` runs every case at those simulated lengths
instead (seconds, the same for every case; the issue-12 setting with
``--only star,ildm_tree,priority,qos_window``): the peaks should not grow
with the length once a run spans a few chunks.

    python benchmarks/memory_benchmark.py [--scale 1.0] [--only churn,qos_window] [--chunk-messages 5000]
        [--durations 10,40,160]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

from pubsim.scenario import parse_scenario

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
MULTIPLES = (1, 10, 100)


def _persistence_restarts(data, duration_s):
    """Gateways at a tenth of their rate; a 0.1 s restart every second from 0.5 s."""
    for group in data["topology"]["publishers"]:
        if group["name"].startswith("gw"):
            group["rate_per_s"] = "90/s"
    broker = data["topology"]["broker"]
    broker["restart_at_s"] = [k + 0.5 for k in range(int(duration_s))]
    broker["restart_downtime_s"] = "100ms"


def _qos_window(data, duration_s):
    """QoS 1 and 2 only, windows of 1 (publishers) and 4 (dashboards): resends hold slots, the window binds."""
    topo = data["topology"]
    pubs, subs = topo["publishers"][0], topo["subscribers"][0]
    topo["publishers"] = [
        {**pubs, "name": f"q{q}-sensor{{i}}", "count": 15, "qos": q, "inflight_messages": 1} for q in (1, 2)
    ]
    topo["subscribers"] = [{**subs, "name": f"dash-q{q}", "count": 1, "qos": q, "inflight_messages": 4} for q in (1, 2)]


def _standard_star(data, duration_s):
    """The standard star of benchmarks/star_benchmark.py at 120 % load: 100 Poisson publishers, broker
    exponential 1 ms with 1,000 buffered messages, fan-out 10 (issue 12)."""
    data.clear()
    data.update(
        name="standard-star",
        seed=1,
        run={"duration": "1s", "warmup": "0.05s", "cooldown": "0s"},
        topology={
            "builder": "star",
            "protocol": "none",
            "broker": {"ingress_cost_s": {"dist": "exponential", "mean": "1ms"}, "queue_messages": 1000},
            "link": {"latency_s": "1ms", "bandwidth_Bps": 12.5e6},
            "publishers": [{"name": "p{i}", "count": 100, "topics": ["bench/t"], "rate_per_s": 12.0}],
            "subscribers": [{"name": "s{i}", "count": 10, "subscriptions": ["bench/t"]}],
        },
    )


def _no_patterns(data, duration_s):
    """Pattern reports need per-message records: dropped for a streaming run."""
    data.pop("patterns", None)


# name: (scenario file, base duration s, change to the YAML data or None, what it exercises)
CASES = {
    "star": ("quickstart.yaml", 10.0, _standard_star, "standard star at 120 % load (built in code)"),
    "quickstart": ("quickstart.yaml", 0.5, None, "one broker past saturation, queue drops"),
    "churn": ("churn_retained.yaml", 30.0, None, "sessions: churn, held copies, retained, Wills"),
    "qos_lossy": ("qos_lossy_link.yaml", 30.0, None, "QoS 0/1/2 resends on a lossy link"),
    "qos_window": ("qos_lossy_link.yaml", 30.0, _qos_window, "QoS 1/2 with binding in-flight windows"),
    "priority": ("priority_channels.yaml", 0.2, None, "priority channels, ring overflow"),
    "restarts": ("persistence.yaml", 1.0, _persistence_restarts, "disk, durable queue, a restart every second"),
    "request_reply": ("request_reply.yaml", 0.25, _no_patterns, "closed loop, window of 2 requests"),
    "ildm_tree": ("ildm/placement_b_sf.yaml", 0.5, None, "ILDM 5-node chain, subscription forwarding"),
}


def load_case(name, duration_s):
    """The case's scenario with ``duration_s`` (warmup and cooldown kept as fractions)."""
    path, base_s, change, _ = CASES[name]
    data = yaml.safe_load((EXPERIMENTS / path).read_text())
    if change is not None:
        change(data, duration_s)
    scenario = parse_scenario(data, base_dir=(EXPERIMENTS / path).parent)
    run = dict(scenario.run)
    ratio = duration_s / run["duration_s"]
    run.update(duration_s=duration_s, warmup_s=run["warmup_s"] * ratio, cooldown_s=run["cooldown_s"] * ratio)
    run.update(record="stream", driver="batch")
    run.pop("series_bin_s", None)  # default: duration / 100 bins
    return scenario, run


def child(name, multiple, chunk_messages):
    """Run one case in this process and print what it published, as JSON.

    ``multiple`` multiplies the case's base duration; a negative one is an
    absolute duration in seconds (``--durations``)."""
    duration_s = -multiple if multiple < 0 else CASES[name][1] * args_scale() * multiple
    scenario, run = load_case(name, duration_s)
    ready_MB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # interpreter, imports, scenario
    t0 = time.perf_counter()
    result = scenario.simulate(chunk_messages=chunk_messages, **run)
    wall = time.perf_counter() - t0
    published = int(result.sink._series["published"].sum())
    print(json.dumps({"published": published, "wall_s": wall, "duration_s": run["duration_s"], "ready_MB": ready_MB}))


def args_scale():
    return float(os.environ.get("PUBSIM_MEMBENCH_SCALE", "1"))


def measure(name, multiple, chunk_messages, scale):
    """Run a child; returns its JSON line plus ``rss_MB`` (peak resident set, MiB)."""
    env = {**os.environ, "PUBSIM_MEMBENCH_SCALE": str(scale)}
    cmd = [sys.executable, __file__, "--child", name, str(multiple), "--chunk-messages", str(chunk_messages)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} x{multiple} failed:\n{err}")
    row = json.loads(out.strip().splitlines()[-1])
    row["rss_MB"] = usage.ru_maxrss / 1024  # Linux: KiB
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every base duration")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--chunk-messages", type=int, default=5_000, help="publications per batch-driver chunk")
    ap.add_argument("--durations", default="", help="comma-separated simulated seconds for every case (3 values)")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "MULTIPLE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], float(args.child[1]), args.chunk_messages)
        return
    names = [n for n in args.only.split(",") if n] or list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {sorted(CASES)}")
    print(f"python {sys.executable}; record=stream, batch driver, chunk_messages={args.chunk_messages:,}")
    print("rss_*: peak RSS of the run's process, MiB; run_*: the part above the RSS before simulating (imports)")
    durations = [float(v) for v in args.durations.split(",") if v]
    if durations and len(durations) != 3:
        ap.error("--durations takes three lengths, e.g. 10,40,160")
    # a negative multiple asks the child for an absolute duration (s)
    multiples = [-d for d in durations] if durations else list(MULTIPLES)
    labels = [f"{d:g}s" for d in durations] if durations else [f"{m}x" for m in MULTIPLES]
    head = f"{'case':<14} {'base_s':>7}" + "".join(f" {f'rss_{m}':>8} {f'pub_{m}':>10}" for m in labels)
    print(
        head + f" {'last/mid':>8} {f'run_{labels[1]}':>8} {f'run_{labels[2]}':>8} {'run ratio':>9} {'wall_last_s':>11}"
    )
    for name in names:
        rows = [measure(name, m, args.chunk_messages, args.scale) for m in multiples]
        cells = "".join(f" {row['rss_MB']:>8.0f} {row['published']:>10,}" for row in rows)
        run = [row["rss_MB"] - row["ready_MB"] for row in rows]
        ratio = rows[2]["rss_MB"] / rows[1]["rss_MB"]
        run_ratio = run[2] / run[1] if run[1] > 0 else float("nan")
        base = float("nan") if durations else CASES[name][1] * args.scale
        print(
            f"{name:<14} {base:>7g}{cells} {ratio:>8.2f} {run[1]:>8.0f} {run[2]:>8.0f} {run_ratio:>9.2f}"
            f" {rows[2]['wall_s']:>11.1f}",
            flush=True,
        )
    print("cases: " + "; ".join(f"{n}: {CASES[n][3]}" for n in names))


if __name__ == "__main__":
    main()
