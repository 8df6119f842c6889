"""Trace: validation, Parquet/CSV round trips with a schema check, schedule publishers, summary,
and an end-to-end replay through the simulator."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsim.models import topology as T
from pubsim.models.loads import generators as G
from pubsim.models.loads.trace import Trace
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.client import SubscriberParams
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from pubsim.sim.rng import StreamFactory
from pubsim.testing import ZERO_LINK


def _small():
    return Trace.from_arrays(
        [0.0, 0.5, 0.5, 2.0],
        ["a", "b", "a", "b"],
        ["x", "y", "x", "x"],
        [10, 0, 30, 40],
        qos=[0, 1, 2, 0],
        t0_of_day_s=3600.0,
    )


def test_from_arrays_sorts_and_types():
    t = Trace.from_arrays([2.0, 0.0, 1.0], ["b", "a", "a"], ["t", "t", "u"], [3, 1, 2])
    assert list(t.t_s) == [0.0, 1.0, 2.0]
    assert list(t.frame["publisher"].astype(str)) == ["a", "a", "b"]
    assert t.frame["size_bytes"].dtype == np.int64
    assert isinstance(t.frame["topic"].dtype, pd.CategoricalDtype)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".csv.gz"])
def test_save_load_round_trip(tmp_path, suffix):
    t = _small()
    path = t.save(tmp_path / f"trace{suffix}")
    back = Trace.load(path)
    assert back == t
    assert back.t0_of_day_s == 3600.0
    assert back.frame["qos"].dtype == np.int8


@pytest.mark.parametrize(
    "frame, field, value",
    [
        (
            pd.DataFrame({"t_s": [0.0, 2.0, 1.0], "publisher": ["a"] * 3, "topic": ["t"] * 3, "size_bytes": [1, 2, 3]}),
            "row 2",
            "1.0",
        ),
        (
            pd.DataFrame({"t_s": [0.0, 1.0], "publisher": ["a"] * 2, "topic": ["t"] * 2, "size_bytes": [1, -5]}),
            "row 1",
            "-5",
        ),
        (
            pd.DataFrame({"t_s": [0.0, np.nan], "publisher": ["a"] * 2, "topic": ["t"] * 2, "size_bytes": [1, 2]}),
            "row 1",
            "nan",
        ),
        (
            pd.DataFrame({"t_s": [0.0, 1.0], "publisher": ["a"] * 2, "topic": ["t"] * 2, "size_bytes": [1, 2.5]}),
            "row 1",
            "2.5",
        ),
        (
            pd.DataFrame({"t_s": [0.0, 1.0], "publisher": ["a", None], "topic": ["t"] * 2, "size_bytes": [1, 2]}),
            "row 1",
            "publisher",
        ),
        (
            pd.DataFrame(
                {"t_s": [0.0, 1.0], "publisher": ["a"] * 2, "topic": ["t"] * 2, "size_bytes": [1, 2], "qos": [0, 3]}
            ),
            "row 1",
            "qos",
        ),
    ],
)
def test_bad_rows_name_the_row_and_value(frame, field, value):
    with pytest.raises(ConfigError) as err:
        Trace(frame)
    msg = str(err.value)
    assert field in msg and value in msg and "\n" not in msg


def test_missing_and_unknown_columns():
    with pytest.raises(ConfigError, match="missing 'size_bytes'"):
        Trace(pd.DataFrame({"t_s": [0.0], "publisher": ["a"], "topic": ["t"]}))
    with pytest.raises(ConfigError, match="colour"):
        Trace(pd.DataFrame({"t_s": [0.0], "publisher": ["a"], "topic": ["t"], "size_bytes": [1], "colour": [1]}))


def test_csv_errors_name_the_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("t_s,publisher,topic,size_bytes\n0.0,a,t,1\n1.0,a,t,2\n0.5,a,t,3\n")
    with pytest.raises(ConfigError, match=r"row 2 \(line 4\): t_s: 0.5"):
        Trace.load(path)
    path.write_text("t_s,publisher,topic,size_bytes\n0.0,a,t,1\nsoon,a,t,2\n")
    with pytest.raises(ConfigError, match="row 1.*'soon'"):
        Trace.load(path)
    path.write_text("time,publisher,topic,size_bytes\n0.0,a,t,1\n")
    with pytest.raises(ConfigError, match="missing 't_s'"):
        Trace.load(path)
    with pytest.raises(ConfigError, match=".parquet"):
        Trace.load(tmp_path / "trace.txt")


def test_parquet_schema_check(tmp_path):
    path = tmp_path / "bad.parquet"
    pd.DataFrame({"t_s": [0.0, 1.0], "publisher": ["a", "a"], "topic": ["t", "t"], "size_bytes": [1, -1]}).to_parquet(
        path
    )
    with pytest.raises(ConfigError, match="row 1: size_bytes: -1"):
        Trace.load(path)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(ConfigError, match="Parquet"):
        Trace.load(tmp_path / "junk.parquet")


def test_to_publishers_schedules():
    pubs = _small().to_publishers()
    assert set(pubs) == {"a", "b"}
    a = pubs["a"]
    assert a.arrival == "schedule"
    assert a.schedule_time_s == (0.0, 0.5) and a.schedule_size_bytes == (10, 30) and a.topics == ("x",)
    assert pubs["b"].topics == ("y", "x") and pubs["b"].schedule_topic == ("y", "x")


def test_to_publishers_priority_must_be_constant():
    t = Trace.from_arrays([0.0, 1.0], ["a", "a"], ["t", "t"], [1, 1], priority=[2, 2])
    assert t.to_publishers()["a"].priority == 2
    t = Trace.from_arrays([0.0, 1.0], ["a", "a"], ["t", "t"], [1, 1], priority=[2, 0])
    with pytest.raises(ConfigError, match="one priority per publisher"):
        t.to_publishers()


def test_summary():
    s = _small().summary()
    assert s["devices"] == 2 and s["messages"] == 4 and s["span_s"] == 2.0
    assert s["mean_rate_per_s"] == 2.0
    assert s["size_bytes"]["max"] == 40 and s["size_bytes"]["min"] == 0
    assert s["rate_by_hour_per_s"][1] == pytest.approx(2.0)  # t0 at 01:00, 4 messages over 2 s
    assert s["rate_by_hour_per_s"][5] is None
    assert s["gap_s"]["min"] == 0.5 and s["gap_s"]["max"] == 1.5  # a: 0 -> 0.5, b: 0.5 -> 2
    assert s["qos_counts"] == {"0": 2, "1": 1, "2": 1}


def test_hourly_rate_of_a_diurnal_trace_follows_the_profile():
    rng = StreamFactory(3).generator("loads", "diurnal")
    t = G.diurnal(rng, mean_rate_per_s=1.0, duration_s=2 * 86400, n_publishers=2)
    hourly = np.array(t.summary()["rate_by_hour_per_s"])
    profile = np.array(G.DEFAULT_DIURNAL_PROFILE) / np.mean(G.DEFAULT_DIURNAL_PROFILE) * 2.0
    assert np.allclose(hourly, profile, rtol=0.1)


def test_replay_through_the_simulator_delivers_every_matched_copy():
    rng = StreamFactory(11).generator("loads", "e2e")
    trace = G.poisson(rng, rate_per_s=5.0, duration_s=4.0, n_publishers=3, topics=("a", "b"), size_bytes=100)
    subs = {
        "s_a": SubscriberParams(subscriptions=("a",)),
        "s_b": SubscriberParams(subscriptions=("b",)),
        "s_ab": SubscriberParams(subscriptions=("a", "b")),
    }
    g = T.star(
        broker=BrokerParams(ingress_cost_s=Constant(value=1e-4)),
        publishers=trace.to_publishers(),
        subscribers=subs,
        link=ZERO_LINK,
        protocol="none",
    )
    r = simulate(g, duration_s=5.0, seed=1)
    topics = trace.frame["topic"].astype(str)
    expected = int((topics == "a").sum() * 2 + (topics == "b").sum() * 2)
    assert len(trace) > 20
    assert len(r.deliveries()) == expected
    assert len(r.drops()) == 0
