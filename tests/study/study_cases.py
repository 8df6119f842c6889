"""Tiny study files shared by the study tests (each task runs in well under a second)."""

from __future__ import annotations

import copy

import yaml

SCENARIO = {
    "name": "tiny",
    "seed": 11,
    "replications": 1,
    "run": {"duration": "0.5s", "warmup": "0.1s", "record": "full", "series_bin": "0.05s"},
    "topology": {
        "builder": "star",
        "protocol": "mqtt",
        "broker": {"preset": "mosquitto-placeholder", "queue_messages": 200},
        "link": {"preset": "gigabit-lan"},
        "publishers": [{"name": "p{i}", "count": 4, "topics": ["t/{i}"], "rate_per_s": "2k/s", "size_bytes": "36B"}],
        "subscribers": [{"name": "s{i}", "count": 8, "subscriptions": ["t/{i//2}"]}],
    },
}


def study_dict(vary=None, replications=2, seed=None, **extra):
    """A study mapping with the tiny scenario inline."""
    data = {"name": "tiny-study", "scenario": copy.deepcopy(SCENARIO), "replications": replications, **extra}
    if seed is not None:
        data["seed"] = seed
    if vary is not None:
        data["vary"] = vary
    return data


def write_study(tmp_path, data, name="study.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
