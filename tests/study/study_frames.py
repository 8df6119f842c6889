"""Study-shaped frames (the sim.study storage contract) built from simulate().

Used by the report and figure tests independently of the study runner.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from pubsim.models import topology as T
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import PublisherParams, SubscriberParams
from pubsim.models.params.link import LinkParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant

QUANTILES = np.linspace(0.005, 0.995, 200)
PRESET_COL = "topology.broker.preset"
RATE_COL = "topology.publishers[0].rate_per_s"
SERVICE_S = {"fast": 50e-6, "slow": 100e-6}  # capacities 20k and 10k msg/s (one worker, fan-out 1)


def star(service_s, rate_per_s, n_pub=4):
    broker = BrokerParams(ingress_cost_s=Constant(value=service_s), queue_messages=200)
    pubs = {f"p{i}": PublisherParams(topics=("t",), rate_per_s=rate_per_s / n_pub) for i in range(n_pub)}
    subs = {"s": SubscriberParams(subscriptions=("t",))}
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=LinkParams(latency_s=1e-4), protocol="none")


def study_frames(loads=(5000, 15000, 30000), reps=2, duration_s=1.0):
    """(manifest, summary, latency, stations, series, parameters) of a small sweep."""
    rows, lat, st, se, par, points = [], [], [], [], [], []
    pid = 0
    for preset, service in SERVICE_S.items():
        for load in loads:
            points.append({"point_id": pid, PRESET_COL: preset, RATE_COL: f"{load}/s"})
            for rep in range(reps):
                r = simulate(star(service, load), duration_s=duration_s, warmup_s=0.2, seed=3, replication=rep)
                key = {"point_id": pid, "replication": rep}
                rows.append({**key, PRESET_COL: preset, RATE_COL: f"{load}/s", **r.summary()})
                d = r.deliveries()["latency_s"].to_numpy()
                lat.append(pd.DataFrame({**key, "quantile": QUANTILES, "latency_s": np.quantile(d, QUANTILES)}))
                st.append(r.stations().assign(**key))
                se.append(r.throughput_series().assign(**key))
                p = r.parameters().assign(point_id=pid)
                p["parameters"] = p["parameters"].map(lambda x: json.dumps(x, default=str))
                par.append(p)
            pid += 1
    manifest = {
        "study": "tiny",
        "config_hash": "abc123",
        "git_revision": "deadbeef",
        "versions": {"pubsim": "0.1", "numpy": np.__version__},
        "points": points,
        "replications": reps,
    }
    return (
        manifest,
        pd.DataFrame(rows),
        pd.concat(lat, ignore_index=True),
        pd.concat(st, ignore_index=True),
        pd.concat(se, ignore_index=True),
        pd.concat(par, ignore_index=True),
    )
