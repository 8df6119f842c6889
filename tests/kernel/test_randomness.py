"""Random streams: explicit generators, stable seeding, no global state."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pandas as pd

from pubsim.run import simulate
from pubsim.sim.distributions import Exponential
from pubsim.sim.rng import DrawStream, StreamFactory, stable_key
from pubsim.testing import single_queue
from tests import ROOT


def test_results_ignore_global_random_state():
    g = single_queue(rate_per_s=800.0, service=Exponential(mean_value=1e-3))
    random.seed(1)
    np.random.seed(1)
    a = simulate(g, duration_s=2.0, seed=3).deliveries()
    random.seed(99)
    np.random.seed(99)
    np.random.random(1000)
    random.random()
    b = simulate(g, duration_s=2.0, seed=3).deliveries()
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_stable_key_is_the_same_in_another_process():
    code = "from pubsim.sim.rng import stable_key; print(stable_key('broker:b1'))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
        cwd=".",
    )
    assert int(out.stdout) == stable_key("broker:b1")


def test_streams_differ_by_component_purpose_and_replication():
    f0, f1 = StreamFactory(7, 0), StreamFactory(7, 1)
    draws = {
        "a": f0.generator("a").random(4).tolist(),
        "b": f0.generator("b").random(4).tolist(),
        "a-other": f0.generator("a", "other").random(4).tolist(),
        "a-rep1": f1.generator("a").random(4).tolist(),
    }
    assert len({tuple(v) for v in draws.values()}) == 4
    assert f0.generator("a").random(4).tolist() == draws["a"]


def test_draw_stream_is_independent_of_batch_sizes():
    dist = Exponential(mean_value=2.0)
    whole = DrawStream(dist, StreamFactory(5).generator("x"), block=64).take(1000)
    s = DrawStream(dist, StreamFactory(5).generator("x"), block=64)
    parts = np.concatenate([s.take(n) for n in [1, 7, 63, 64, 65, 300, 500]])[:1000]
    assert np.array_equal(whole, parts)


def test_replications_are_independent():
    g = single_queue(rate_per_s=800.0, service=Exponential(mean_value=1e-3))
    a = simulate(g, duration_s=2.0, seed=3, replication=0).summary()["latency_mean_s"]
    b = simulate(g, duration_s=2.0, seed=3, replication=1).summary()["latency_mean_s"]
    assert a != b


def test_records_do_not_depend_on_python_string_hashing():
    """Same seed, same records in another process with another PYTHONHASHSEED (station order
    of broker-broker links once followed a set of names)."""
    code = (
        "from tests.oracles.test_drivers_agree import two_way_chain; from pubsim import simulate; "
        "r = simulate(two_way_chain('flood'), duration_s=0.1, seed=3); "
        "print(list(r.stations()['station'])); print(r.deliveries()['delivery_time_s'].sum().hex())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "2", "3")
    }
    assert len(outs) == 1
