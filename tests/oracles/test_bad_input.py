"""Bad scenario input: a one-line ConfigError naming the field and the value,
and through ``pubsim run`` one line on stderr and exit status 2."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pubsim.scenario import load_scenario, parse_scenario
from pubsim.sim.errors import ConfigError
from tests import ROOT

QUICKSTART = ROOT / "experiments" / "quickstart.yaml"


def base():
    """The quickstart scenario, shrunk so that a valid copy runs in a blink."""
    data = yaml.safe_load(QUICKSTART.read_text())
    data["run"].update(duration="1s", warmup="0.2s")
    data["topology"]["publishers"][0].update(count=2, rate_per_s="20/s")
    data["topology"]["subscribers"][0].update(count=6)
    return data


def write(tmp_path, data, name="bad.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def error_of(tmp_path, data):
    """The ConfigError of loading ``data`` from a file; its text must be one line."""
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    text = str(e.value)
    assert "\n" not in text and "\r" not in text
    return e.value, text


def test_base_scenario_is_valid(tmp_path):
    sc = load_scenario(write(tmp_path, base(), "ok.yaml"))
    assert sc.replications == 1 and sc.seed == 20170605
    assert sc.run["duration_s"] == 1.0 and sc.run["warmup_s"] == 0.2
    assert sorted(sc.topology.nodes) == sorted(["broker", "gw0", "gw1"] + [f"app{i}" for i in range(6)])


def _set(path, value):
    def edit(d):
        *head, last = path
        for key in head:
            d = d[key]
        d[last] = value

    return edit


def _both(*edits):
    def edit(d):
        for e in edits:
            e(d)

    return edit


BAD = {
    # id: (edit, field, value, words in the message)
    "negative publisher rate": (
        _set(["topology", "publishers", 0, "rate_per_s"], "-5/s"),
        "topology.publishers[0](gw0).rate_per_s",
        "-5/s",
        ">= 0",
    ),
    "negative publisher rate number": (
        _set(["topology", "publishers", 0, "rate_per_s"], -5),
        "topology.publishers[0](gw0).rate_per_s",
        -5,
        ">= 0",
    ),
    "zero publisher rate": (
        _set(["topology", "publishers", 0, "rate_per_s"], 0),
        "topology.publishers[0](gw0).rate_per_s",
        0.0,
        "> 0",
    ),
    "unknown broker field": (
        _set(["topology", "broker", "workerz"], 2),
        "topology.broker.workerz",
        2,
        "not a BrokerParams field",
    ),
    "unknown broker preset": (
        _set(["topology", "broker", "preset"], "mosquito"),
        "topology.broker.preset",
        "mosquito",
        "mosquitto-placeholder",
    ),
    "unknown link preset": (
        _set(["topology", "link", "preset"], "ethernet-10g"),
        "topology.link.preset",
        "ethernet-10g",
        "gigabit-lan",
    ),
    "preset on a client": (
        _set(["topology", "subscribers", 0, "preset"], "fast"),
        "topology.subscribers[0](app0).preset",
        "fast",
        "not a SubscriberParams field",
    ),
    "duration in parsecs": (_set(["run", "duration"], "10 parsecs"), "run.duration", "10 parsecs", "'2ms'"),
    "zero duration": (_set(["run", "duration"], "0s"), "run.duration", "0s", "> 0"),
    "negative duration": (_set(["run", "duration"], "-3s"), "run.duration", "-3s", ">= 0"),
    "warm-up longer than the run": (_set(["run", "warmup"], "5s"), "run.warmup", "5s", "shorter than the duration"),
    "zero replications": (_set(["replications"], 0), "replications", 0, ">= 1"),
    "negative seed": (_set(["seed"], -1), "seed", -1, ">= 0"),
    "fractional seed": (_set(["seed"], 1.5), "seed", 1.5, "integer"),
    "unknown record mode": (_set(["run", "record"], "partial"), "run.record", "partial", "stream"),
    "unknown driver": (_set(["run", "driver"], "fast"), "run.driver", "fast", "reference"),
    "drain not a boolean": (_set(["run", "drain"], "no"), "run.drain", "no", "true or false"),
    "zero series bin": (_set(["run", "series_bin"], "0s"), "run.series_bin", "0s", "> 0"),
    "unknown run key": (_set(["run", "durration"], "3s"), "run.durration", "3s", "duration"),
    "unknown top-level key": (_set(["replicas"], 3), "scenario.replicas", 3, "replications"),
    "unknown builder": (_set(["topology", "builder"], "ring"), "topology.builder", "ring", "star"),
    "unknown protocol": (_set(["topology", "protocol"], "http"), "graph.protocol", "http", "mqtt"),
    "zero count": (_set(["topology", "subscribers", 0, "count"], 0), "topology.subscribers[0].count", 0, ">= 1"),
    "bad index expression": (
        _set(["topology", "subscribers", 0, "subscriptions"], ["weather/gw{i//0}"]),
        "topology.subscribers[0].subscriptions",
        ["weather/gw{i//0}"],
        "N >= 1",
    ),
    "topic weights not numbers": (
        _set(["topology", "publishers", 0, "topic_weights"], "heavy"),
        "topology.publishers[0](gw0).topic_weights",
        "heavy",
        "float",
    ),
    "bad MQTT filter": (
        _set(["topology", "subscribers", 0, "subscriptions"], ["weather/#/x"]),
        "node 'app0'.subscriptions",
        "weather/#/x",
        "'#' must fill the last level",
    ),
    "background CPU above the whole core": (
        _set(["topology", "broker", "background_cpu_fraction"], 1.5),
        "topology.broker.background_cpu_fraction",
        1.5,
        "[0, 1)",
    ),
    "background CPU above the broker's CPU": (
        _both(
            _set(["topology", "broker", "cpu_fraction"], 0.2),
            _set(["topology", "broker", "background_cpu_fraction"], 0.5),
        ),
        "topology.broker.background_cpu_fraction",
        0.5,
        "less than the broker's CPU",
    ),
    "negative link latency": (
        _set(["topology", "link", "latency_s"], "-1ms"),
        "topology.link.latency_s",
        "-1ms",
        ">= 0",
    ),
}


@pytest.mark.parametrize("edit, field, value, words", BAD.values(), ids=BAD.keys())
def test_bad_field(tmp_path, edit, field, value, words):
    data = base()
    edit(data)
    err, text = error_of(tmp_path, data)
    assert err.field == field
    assert err.value == value
    assert text.startswith(f"{field}: {value!r} is invalid: ")
    assert words in text


def test_parse_scenario_same_error_without_a_file():
    data = base()
    data["topology"]["broker"]["workerz"] = 2
    with pytest.raises(ConfigError) as e:
        parse_scenario(copy.deepcopy(data))
    assert e.value.field == "topology.broker.workerz" and e.value.value == 2


def test_malformed_yaml_unbalanced_bracket(tmp_path):
    text = QUICKSTART.read_text().replace('topics: ["weather/gw{i}"]', 'topics: ["weather/gw{i}"')
    lineno = next(i for i, line in enumerate(text.splitlines(), 1) if 'topics: ["weather/gw{i}"' in line)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert e.value.field.startswith(f"{path}:")  # file:line:column of the parser's complaint
    assert e.value.value == 'malformed YAML: topics: ["weather/gw{i}"'  # the line with the open bracket
    assert f"opened at line {lineno}" in msg
    assert "expected ',' or ']'" in msg


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_scenario(tmp_path / "nope.yaml")
    assert e.value.field == str(tmp_path / "nope.yaml")
    assert str(e.value) == f"{tmp_path / 'nope.yaml'}: 'unreadable' is invalid: No such file or directory"


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    assert e.value.field == str(path) and e.value.value == "not UTF-8 text"


def test_top_level_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    assert (e.value.field, e.value.value) == ("scenario", "list")


# -------- dangling links: chain clients on a missing broker, GraphML edge to nowhere

CHAIN = {
    "name": "c",
    "seed": 1,
    "run": {"duration": "1s"},
    "topology": {
        "builder": "chain",
        "forwarding": "flood",
        "brokers": [{"name": "b0"}, {"name": "b1"}],
        "publishers": [{"name": "p", "broker": "b0", "topics": ["t"], "rate_per_s": 10}],
        "subscribers": [{"name": "s", "broker": "b9", "subscriptions": ["t"]}],
    },
}


def test_chain_client_on_missing_broker(tmp_path):
    err, text = error_of(tmp_path, copy.deepcopy(CHAIN))
    assert err.field == "topology.subscribers[0](s).broker" and err.value == "b9"
    assert "['b0', 'b1']" in text


def test_chain_duplicate_broker(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["topology"]["brokers"].append({"name": "b0"})
    err, _ = error_of(tmp_path, data)
    assert err.field == "topology.brokers[2].name" and err.value == "b0"


GRAPHML = """<?xml version='1.0' encoding='utf-8'?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="k" for="node" attr.name="kind" attr.type="string"/>
<key id="t" for="node" attr.name="topics" attr.type="string"/>
<key id="r" for="node" attr.name="rate_per_s" attr.type="string"/>
<key id="s" for="node" attr.name="subscriptions" attr.type="string"/>
<graph edgedefault="undirected">
<node id="b"><data key="k">broker</data></node>
<node id="p"><data key="k">publisher</data><data key="t">t</data><data key="r">5/s</data></node>
<node id="s"><data key="k">subscriber</data><data key="s">t</data></node>
<edge source="p" target="b"/>
<edge source="s" target="TARGET"/>
</graph></graphml>"""


def test_graphml_dangling_link(tmp_path):
    (tmp_path / "net.graphml").write_text(GRAPHML.replace("TARGET", "b2"))
    data = {"run": {"duration": "1s"}, "topology": {"builder": "graphml", "path": "net.graphml"}}
    err, text = error_of(tmp_path, data)
    assert err.field == "edge ('s', 'b2')" and err.value == "b2"
    assert "dangling link" in text


def test_graphml_valid_file_loads(tmp_path):
    (tmp_path / "net.graphml").write_text(GRAPHML.replace("TARGET", "b"))
    data = {"run": {"duration": "1s"}, "topology": {"builder": "graphml", "path": "net.graphml"}}
    sc = load_scenario(write(tmp_path, data, "ok.yaml"))
    assert sorted(sc.topology.nodes) == ["b", "p", "s"]


# -------- through the command line


def pubsim_cmd():
    return [sys.executable, "-m", "pubsim"]


def run_cli(*args, cwd):
    return subprocess.run([*pubsim_cmd(), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def _assert_one_line_error(proc):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pubsim: error: ")
    return lines[0]


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            _set(["run", "duration"], "10 parsecs"),
            "pubsim: error: run.duration: '10 parsecs' is invalid: a duration >= 0 such as 2.5, '2ms', '100us', "
            "'1.5 s', '3min', '1h'",
        ),
        (_set(["topology", "broker", "workerz"], 2), "pubsim: error: topology.broker.workerz: 2 is invalid: "),
        (_set(["replications"], 0), "pubsim: error: replications: 0 is invalid: an integer >= 1"),
    ],
    ids=["parsecs", "workerz", "replications"],
)
def test_cli_bad_scenario(tmp_path, edit, expected):
    data = base()
    edit(data)
    write(tmp_path, data)
    proc = run_cli("run", "bad.yaml", "--out", tmp_path / "out", cwd=tmp_path)
    line = _assert_one_line_error(proc)
    assert line.startswith(expected)
    assert not (tmp_path / "out").exists()  # nothing ran


def test_cli_malformed_yaml(tmp_path):
    (tmp_path / "bad.yaml").write_text(QUICKSTART.read_text().replace('["weather/gw{i}"]', '["weather/gw{i}"'))
    line = _assert_one_line_error(run_cli("run", "bad.yaml", cwd=tmp_path))
    assert line.startswith("pubsim: error: bad.yaml:")
    assert "malformed YAML" in line


def test_cli_missing_file_and_bad_arguments(tmp_path):
    line = _assert_one_line_error(run_cli("run", "nope.yaml", cwd=tmp_path))
    assert line == "pubsim: error: nope.yaml: 'unreadable' is invalid: No such file or directory"
    line = _assert_one_line_error(run_cli("run", cwd=tmp_path))
    assert line == "pubsim: error: the following arguments are required: scenario (see 'pubsim run --help')"
    write(tmp_path, base(), "ok.yaml")
    line = _assert_one_line_error(run_cli("run", "ok.yaml", "--driver", "fast", cwd=tmp_path))
    assert "--driver" in line and "'fast'" in line
    (tmp_path / "afile").write_text("")
    line = _assert_one_line_error(run_cli("run", "ok.yaml", "--out", "afile", cwd=tmp_path))
    assert line == "pubsim: error: --out: 'afile' is invalid: a directory (or a path where one can be made)"


def test_console_script_matches_module(tmp_path):
    """The installed ``pubsim`` entry point behaves as ``python -m pubsim``."""
    exe = Path(sys.executable).parent / "pubsim"
    if not exe.exists():
        pytest.skip("pubsim entry point not installed next to this Python")
    data = base()
    data["seed"] = -3
    write(tmp_path, data)
    proc = subprocess.run([str(exe), "run", "bad.yaml"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert _assert_one_line_error(proc) == "pubsim: error: seed: -3 is invalid: an integer >= 0"
