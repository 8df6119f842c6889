"""Study files: parsing, bad input, and point generation (grid, zip, LHS)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pubsim.sim.errors import ConfigError
from pubsim.study import load_study, parse_study
from pubsim.study.fieldpath import apply_overrides, parse_path
from tests import ROOT
from tests.study.study_cases import SCENARIO, study_dict, write_study

RATE = "topology.publishers[0].rate_per_s"
PRESET = "topology.broker.preset"


def _error(data, match):
    with pytest.raises(ConfigError) as err:
        parse_study(data)
    msg = str(err.value)
    assert "\n" not in msg
    assert re.search(match, msg), msg
    return msg


def test_path_parsing_and_overrides_leave_the_base_alone():
    assert parse_path("topology.publishers[0].rate_per_s", "f") == ("topology", "publishers", 0, "rate_per_s")
    assert parse_path("a[1][2].b", "f") == ("a", 1, 2, "b")
    for bad in ("", "a..b", "a[x]", "[0]", "a.[0]"):
        with pytest.raises(ConfigError):
            parse_path(bad, "f")
    out = apply_overrides(SCENARIO, {RATE: "1k/s", "topology.link.latency_s": "1ms"})
    assert out["topology"]["publishers"][0]["rate_per_s"] == "1k/s"
    assert out["topology"]["link"] == {"preset": "gigabit-lan", "latency_s": "1ms"}  # a new key is allowed
    assert SCENARIO["topology"]["publishers"][0]["rate_per_s"] == "2k/s"
    assert "latency_s" not in SCENARIO["topology"]["link"]


def test_grid_zip_sample_combine_as_a_product_in_order():
    study = parse_study(
        study_dict(
            vary={
                "grid": {PRESET: ["mosquitto", "rabbitmq-mqtt"], RATE: ["1k/s", "2k/s", "3k/s"]},
                "zip": {"topology.publishers[0].count": [2, 4], "topology.subscribers[0].count": [4, 8]},
                "sample": {
                    "method": "random",
                    "n": 3,
                    "seed": 1,
                    "ranges": {"topology.link.latency_s": ["1ms", "2ms"]},
                },
            }
        )
    )
    assert len(study.points) == 2 * 3 * 2 * 3
    assert study.varied == (
        PRESET,
        RATE,
        "topology.publishers[0].count",
        "topology.subscribers[0].count",
        "topology.link.latency_s",
    )
    first = [p.overrides for p in study.points[:7]]
    assert first[0][PRESET] == "mosquitto" and first[0][RATE] == "1k/s"
    assert [o["topology.publishers[0].count"] for o in first[:6]] == [2, 2, 2, 4, 4, 4]  # sample fastest
    assert first[6][RATE] == "2k/s"
    for o in first[:6]:
        assert o["topology.subscribers[0].count"] == 2 * o["topology.publishers[0].count"]
        assert 1e-3 <= o["topology.link.latency_s"] <= 2e-3
    ids = [p.point_id for p in study.points]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"p\d{4}-[0-9a-f]{8}", i) for i in ids)
    assert ids == [
        p.point_id
        for p in parse_study(
            study_dict(
                vary={
                    "grid": {PRESET: ["mosquitto", "rabbitmq-mqtt"], RATE: ["1k/s", "2k/s", "3k/s"]},
                    "zip": {"topology.publishers[0].count": [2, 4], "topology.subscribers[0].count": [4, 8]},
                    "sample": {
                        "method": "random",
                        "n": 3,
                        "seed": 1,
                        "ranges": {"topology.link.latency_s": ["1ms", "2ms"]},
                    },
                }
            )
        ).points
    ]


def _lhs(n, ranges, seed=3):
    study = parse_study(study_dict(vary={"sample": {"method": "lhs", "n": n, "seed": seed, "ranges": ranges}}))
    return [p.overrides for p in study.points]


def test_latin_hypercube_hits_every_stratum_once_per_dimension():
    n = 13
    ranges = {
        "topology.link.latency_s": ["1ms", "20ms"],
        "topology.broker.queue_messages": [10, 1000],
        "topology.publishers[0].rate_per_s": [20.0, 2000.0],
    }
    pts = _lhs(n, ranges)
    lat = np.array([p["topology.link.latency_s"] for p in pts])
    size = np.array([p["topology.publishers[0].rate_per_s"] for p in pts])
    for x, lo, hi in ((lat, 1e-3, 20e-3), (size, 20.0, 2000.0)):
        strata = np.floor((x - lo) / (hi - lo) * n).astype(int)
        assert sorted(strata) == list(range(n))
    queue = [p["topology.broker.queue_messages"] for p in pts]
    assert all(isinstance(q, int) and 10 <= q <= 1000 for q in queue)  # integer ends give integers
    # n integers over n values: each value exactly once
    five = _lhs(5, {"topology.broker.queue_messages": [1, 5]})
    assert sorted(p["topology.broker.queue_messages"] for p in five) == [1, 2, 3, 4, 5]
    assert _lhs(n, ranges) == pts  # explicit seed: the same samples
    assert _lhs(n, ranges, seed=4) != pts


def test_sample_seed_defaults_to_the_study_seed():
    spec = {"method": "random", "n": 4, "ranges": {"topology.link.latency_s": [0.001, 0.002]}}
    a = parse_study(study_dict(vary={"sample": spec}, seed=5))
    b = parse_study(study_dict(vary={"sample": {**spec, "seed": 5}}, seed=9))
    assert [p.overrides for p in a.points] == [p.overrides for p in b.points]
    assert a.seed == 5 and parse_study(study_dict()).seed == SCENARIO["seed"]


def test_no_vary_is_one_point_and_set_applies_to_every_point():
    study = parse_study(study_dict(set={"run.duration": "0.3s"}, vary={"grid": {RATE: ["1k/s", "2k/s"]}}))
    assert [study.raw(p)["run"]["duration"] for p in study.points] == ["0.3s", "0.3s"]
    assert len(parse_study(study_dict()).points) == 1


@pytest.mark.parametrize(
    "vary, match",
    [
        ({"grid": {"topology.nosuch.x": [1]}}, r"^vary\.grid\.topology\.nosuch\.x: .*topology has no key nosuch"),
        (
            {"grid": {"topology.publishers[3].count": [1]}},
            r"^vary\.grid\.topology\.publishers\[3\]\.count: .*no index 3",
        ),
        ({"grid": {"topology.broker.preset[0]": [1]}}, r"^vary\.grid\.topology\.broker\.preset\[0\]: "),
        ({"grid": {RATE: []}}, r"^vary\.grid\.topology\.publishers\[0\]\.rate_per_s: .*non-empty list"),
        ({"grid": {RATE: "1k/s"}}, r"^vary\.grid\.topology\.publishers\[0\]\.rate_per_s: "),
        (
            {"zip": {RATE: ["1k/s", "2k/s"], PRESET: ["mosquitto"]}},
            r"^vary\.zip\.topology\.broker\.preset: .*as long as the other zip lists \(2 values, not 1\)",
        ),
        ({"sample": {"method": "sobol", "n": 4, "ranges": {RATE: [1, 2]}}}, r"^vary\.sample\.method: 'sobol'"),
        ({"sample": {"method": "lhs", "n": 0, "ranges": {RATE: [1, 2]}}}, r"^vary\.sample\.n: 0"),
        (
            {"sample": {"n": 4, "ranges": {"topology.link.latency_s": ["20ms", "1ms"]}}},
            r"^vary\.sample\.ranges\.topology\.link\.latency_s: .*lo <= hi",
        ),
        (
            {"sample": {"n": 4, "ranges": {"topology.link.latency_s": ["1ms", "2KiB"]}}},
            r"^vary\.sample\.ranges\.topology\.link\.latency_s: .*one kind",
        ),
        ({"sample": {"n": 4, "ranges": {"topology.link.latency_s": [1]}}}, r"^vary\.sample\.ranges\.topology"),
        (
            {"grid": {RATE: ["1k/s"]}, "zip": {RATE: ["2k/s"]}},
            r"^vary\.zip\.topology\.publishers\[0\]\.rate_per_s: .*only once",
        ),
        ({"grid": {"seed": [1, 2]}}, r"^vary\.grid\.seed: .*other than seed"),
        ({"latin": {}}, r"^vary\.latin: "),
        (
            {"grid": {PRESET: ["mosquitto", "nosuch-broker"]}},
            r"^point 1 \(topology\.broker\.preset=nosuch-broker\): topology\.broker\.preset: 'nosuch-broker'",
        ),
        (
            {"grid": {RATE: ["1k/s", "fast"]}},
            r"^point 1 \(topology\.publishers\[0\]\.rate_per_s=fast\): topology\.publishers\[0\]\(p0\)\.rate_per_s",
        ),
        ({"grid": {"topology.link.latncy_s": ["1ms"]}}, r"^point 0 \(topology\.link\.latncy_s=1ms\): topology\.link"),
    ],
)
def test_bad_vary_is_one_line_naming_the_field(vary, match):
    _error(study_dict(vary=vary), match)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"replications": 0}, r"^replications: 0"),
        ({"seed": -1}, r"^seed: -1"),
        ({"colour": 1}, r"^colour: "),
        ({"base": "x.yaml"}, r"^base: .*either base"),
        ({"set": {"run.duration": "-1s"}}, r"^base scenario: run\.duration"),
        ({"set": {"topology.nosuch.a": 1}}, r"^set\.topology\.nosuch\.a: "),
        ({"name": ""}, r"^name: "),
    ],
)
def test_bad_study_fields(change, match):
    _error({**study_dict(), **change}, match)


def test_base_file_relative_to_the_study_file(tmp_path):
    (tmp_path / "scen").mkdir()
    write_study(tmp_path / "scen", SCENARIO, "tiny.yaml")
    (tmp_path / "studies").mkdir()
    path = write_study(
        tmp_path / "studies", {"base": "../scen/tiny.yaml", "vary": {"grid": {RATE: ["1k/s"]}}}, "s.yaml"
    )
    study = load_study(path)
    assert study.name == "s" and study.replications == 1 and study.seed == 11
    assert study.raw(study.points[0])["topology"]["publishers"][0]["rate_per_s"] == "1k/s"
    path.write_text("base: ../scen/missing.yaml\n")
    with pytest.raises(ConfigError, match=r"^base: '../scen/missing.yaml'"):
        load_study(path)
    path.write_text("base: [unclosed\n")
    with pytest.raises(ConfigError, match="malformed YAML"):
        load_study(path)


def test_example_study_file_parses():

    study = load_study(ROOT / "experiments" / "studies" / "load_sweep.yaml")
    assert len(study.points) == 8 and study.replications == 2
    assert study.varied == (PRESET, RATE)


def test_the_study_keeps_its_file_path_when_fields_are_set():
    # the manifest's study_file: a `set:` block must not overwrite it

    path = ROOT / "experiments" / "studies" / "main.yaml"
    study = load_study(path)
    assert study.path == str(path)
