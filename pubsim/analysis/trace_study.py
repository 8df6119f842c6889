"""A real sensor trace scaled up to a city, on several brokers.

The main study's trace-driven section (``bash scripts/study.sh``): a
CampusIoT device trace (``../shared/traces/campusiot``, read with
:func:`pubsim.models.loads.readers.read_campusiot`) is resampled without bias and
superposed into ``gateways`` gateways of N devices each
(:func:`pubsim.models.loads.replay.scale_up`, SYSTEMS.md §5), replayed through one
broker per calibrated profile (``Trace.to_publishers()``) to one application
subscriber (fan-out 1). The resampled copies are stationary from t = 0
(each one's first message follows the equilibrium residual of a gap, see
:mod:`pubsim.models.loads.replay`); the first ``settle_s`` seconds are still cut
off, as a margin for the broker's own start.

:func:`run_trace_study` returns tidy frames shaped like a study's
(``summary`` with ``point_id``/``replication``, ``latency`` quantiles,
``parameters``); :func:`main` (``python -m pubsim.analysis.trace_study``) writes
them as CSV/Parquet under ``--out`` or, when the trace directory is absent,
a ``skipped.txt`` saying so (the report shows that note).
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..models import presets
from ..models import topology as T
from ..models.loads import replay
from ..models.loads.readers import read_campusiot
from ..models.params.broker import BrokerParams
from ..models.params.client import SubscriberParams
from ..models.params.link import LinkParams
from ..models.params.mapping import from_mapping
from ..run import simulate

__all__ = ["find_trace", "run_trace_study", "main", "QUANTILES"]

QUANTILES = np.round(np.linspace(0.005, 0.995, 199), 6)
PREFERRED = "d1d1e80000000033"  # the README's example: a reading every ~10 min, 0.6 % upstream loss


def find_trace(traces_dir):
    """The CampusIoT file to use under ``traces_dir`` (the README's example first), or None."""
    files = sorted(
        glob.glob(str(Path(traces_dir) / "campusiot" / "*.ndjson.gz")), key=lambda f: (PREFERRED not in f, f)
    )
    return files[0] if files else None


def _topology(broker, publishers, queue_messages):
    spec = presets.apply("broker", {"preset": broker, "queue_messages": queue_messages})
    b = from_mapping(BrokerParams, spec, f"broker.{broker}")
    lan = from_mapping(LinkParams, presets.load("link", "gigabit-lan"), "link.gigabit-lan")
    return T.star(
        broker=b,
        publishers=publishers,
        subscribers={"city-app": SubscriberParams(subscriptions=("#",))},
        link=lan,
        protocol="mqtt",
    )


def run_trace_study(
    trace,
    *,
    brokers=("mosquitto", "rabbitmq-mqtt"),
    devices_per_gateway=(50_000, 150_000, 250_000),
    gateways=100,
    duration_s=6.0,
    warmup_s=1.5,
    settle_s=1.0,
    replications=2,
    seed=1,
    queue_messages=10_000,
    progress=None,
):
    """Simulate the scaled-up trace on every broker and city size.

    Parameters
    ----------
    trace : models.loads.Trace
        The source trace (one or a few devices).
    devices_per_gateway : sequence of int
        City sizes: ``gateways x n`` devices.
    replications : int
        Independent resamplings (and simulation streams) per point.

    Returns
    -------
    dict of DataFrame
        ``summary`` (``point_id, replication, broker, devices`` + the run
        summary), ``latency`` (``point_id, replication, quantile,
        latency_s``), ``parameters`` (of each point's first replication,
        without the per-gateway schedules).
    """

    rows, lat, params = [], [], []
    points = [(b, n) for b in brokers for n in devices_per_gateway]
    for rep in range(replications):
        for n in devices_per_gateway:
            rng = np.random.default_rng([seed, rep, n])
            city = replay.scale_up(
                trace, rng, n_gateways=gateways, devices_per_gateway=int(n), duration_s=duration_s + settle_s
            ).window(settle_s, duration_s + settle_s)
            pubs = city.to_publishers()
            for b in brokers:
                pid = points.index((b, n))
                r = simulate(
                    _topology(b, pubs, queue_messages),
                    duration_s=duration_s,
                    warmup_s=warmup_s,
                    seed=seed,
                    replication=rep,
                    record="stream",
                )
                key = {"point_id": pid, "replication": rep}
                rows.append({**key, "broker": b, "devices": gateways * int(n), **r.summary()})
                x, f = r.latency_ecdf()["latency_s"].to_numpy(), r.latency_ecdf()["fraction"].to_numpy()
                if len(x):
                    q = x[np.minimum(np.searchsorted(f, QUANTILES), len(x) - 1)]
                    lat.append(pd.DataFrame({**key, "quantile": QUANTILES, "latency_s": q}))
                if rep == 0:
                    p = r.parameters()
                    p = p[p["kind"] != "publisher"].assign(point_id=pid)
                    p["parameters"] = p["parameters"].map(lambda v: json.dumps(v, default=str))
                    params.append(p)
                if progress is not None:
                    progress(rows[-1])
    return {
        "summary": pd.DataFrame(rows),
        "latency": pd.concat(lat, ignore_index=True) if lat else pd.DataFrame(),
        "parameters": pd.concat(params, ignore_index=True),
    }


def load_trace_results(out_dir):
    """``(frames, note)`` from a directory written by :func:`main`; frames None when skipped/absent."""
    d = Path(out_dir)
    if (d / "skipped.txt").is_file():
        return None, (d / "skipped.txt").read_text().strip()
    if not (d / "summary.csv").is_file():
        return None, None
    frames = {"summary": pd.read_csv(d / "summary.csv"), "parameters": pd.read_csv(d / "parameters.csv")}
    frames["latency"] = pd.read_parquet(d / "latency.parquet") if (d / "latency.parquet").is_file() else None
    info = json.loads((d / "trace.json").read_text()) if (d / "trace.json").is_file() else {}
    return frames, info


def main(argv=None):
    """``python -m pubsim.analysis.trace_study --traces DIR --out OUT [--quick]``."""
    ap = argparse.ArgumentParser(prog="python -m pubsim.analysis.trace_study", description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="../shared/traces", help="directory holding campusiot/*.ndjson.gz")
    ap.add_argument("--out", required=True, help="directory for summary.csv, latency.parquet, parameters.csv")
    ap.add_argument("--quick", action="store_true", help="small cities and short runs (tests)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = find_trace(args.traces)
    if path is None:
        (out / "skipped.txt").write_text(
            f"Trace-driven section skipped: no CampusIoT trace under {args.traces!r} (the traces are not part "
            "of the repository; see README 'Trace-driven loads').\n"
        )
        print(f"no CampusIoT trace under {args.traces}: trace section skipped")
        return 0
    (out / "skipped.txt").unlink(missing_ok=True)

    trace, info = read_campusiot(path)
    kw = dict(devices_per_gateway=(5_000, 50_000), duration_s=3.0, warmup_s=1.0, replications=2) if args.quick else {}
    frames = run_trace_study(
        trace,
        progress=lambda r: print(
            f"trace study: {r['broker']} {r['devices']:,} devices rep {r['replication']}: "
            f"{r['offered_per_s']:,.0f} msg/s, sustainability {r['sustainability']:.3f}",
            flush=True,
        ),
        **kw,
    )
    frames["summary"].to_csv(out / "summary.csv", index=False)
    frames["parameters"].to_csv(out / "parameters.csv", index=False)
    if len(frames["latency"]):
        frames["latency"].to_parquet(out / "latency.parquet", index=False)
    (out / "trace.json").write_text(json.dumps({"trace_file": Path(path).name, "summary": str(info)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
