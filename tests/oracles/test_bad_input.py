"""Bad scenario input: a one-line ConfigError naming the field and the value,
and through ``pubsim run`` one line on stderr and exit status 2."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pubsim import budget
from pubsim.scenario import load_scenario, parse_scenario
from pubsim.sim.errors import ConfigError, short_repr
from pubsim.study.spec import load_study
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


# -------- issue 17: input that used to crash, hang or eat memory (fuzzing signatures)

# a name or preset given as a list or mapping: "TypeError: unhashable type" before the fix
UNHASHABLE = {
    "broker preset a list": (["topology", "broker", "preset"], ["mosquitto-placeholder"], "topology.broker.preset"),
    "link preset a mapping": (["topology", "link", "preset"], {"name": "gigabit-lan"}, "topology.link.preset"),
    "empty preset": (["topology", "broker", "preset"], None, "topology.broker.preset"),
    "protocol a list": (["topology", "protocol"], ["mqtt"], "graph.protocol"),
    "builder a list": (["topology", "builder"], ["star"], "topology.builder"),
    "record a list": (["run", "record"], ["full"], "run.record"),
    "publisher name a mapping": (["topology", "publishers", 0, "name"], {"gw": 1}, "topology.publishers[0].name"),
    "subscriber name a list": (["topology", "subscribers", 0, "name"], ["app"], "topology.subscribers[0].name"),
    "scenario name a list": (["name"], ["q"], "name"),
}


@pytest.mark.parametrize("where, value, field", UNHASHABLE.values(), ids=UNHASHABLE.keys())
def test_name_that_is_not_text_is_refused(tmp_path, where, value, field):
    data = base()
    _set(where, value)(data)
    err, _ = error_of(tmp_path, data)
    assert err.field == field and err.value == value


def test_pattern_kind_that_is_not_text(tmp_path):
    data = base()
    data["patterns"] = [{"kind": ["push_pull"]}]
    err, _ = error_of(tmp_path, data)
    assert err.field == "patterns[0].kind" and err.value == ["push_pull"]


def test_chain_names_that_are_not_text(tmp_path):
    data = copy.deepcopy(CHAIN)
    data["topology"]["brokers"][1]["name"] = ["b1"]
    err, _ = error_of(tmp_path, data)
    assert err.field == "topology.brokers[1].name" and err.value == ["b1"]
    data = copy.deepcopy(CHAIN)
    data["topology"]["subscribers"][0]["broker"] = ["b0"]
    err, _ = error_of(tmp_path, data)
    assert err.field == "topology.subscribers[0](s).broker" and err.value == ["b0"]


HUGE = {
    # numbers that used to reach numpy ("Maximum allowed dimension exceeded", "Unable to allocate N TiB")
    "queue of 1e300 messages": (["topology", "broker", "queue_messages"], 1e300, "an integer in [0, "),
    "queue of 10**30 messages": (["topology", "link", "queue_messages"], 10**30, "an integer in [0, "),
    "a billion workers": (["topology", "broker", "workers"], 10**9, "an integer in [1, 100,000]"),
    "replications 10**9": (["replications"], 10**9, "an integer in [1, 1,000,000]"),
    "seed 2**200": (["seed"], 2**200, "an integer in [0, 2**128 - 1]"),
    "NaN topic weight": (["topology", "publishers", 0, "topic_weights"], [float("nan")], "finite"),
    "infinite topic weight": (["topology", "publishers", 0, "topic_weights"], [float("inf")], "finite"),
}


@pytest.mark.parametrize("where, value, words", HUGE.values(), ids=HUGE.keys())
def test_huge_or_non_finite_number_is_refused(where, value, words):
    data = base()
    _set(where, value)(data)
    with pytest.raises(ConfigError) as e:
        parse_scenario(data)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_seed_of_thousands_of_digits_is_quoted_short():
    data = base()
    data["seed"] = 10**5000  # repr() of it raises ValueError (int string conversion limit)
    with pytest.raises(ConfigError) as e:
        parse_scenario(data)
    assert e.value.field == "seed"
    assert "integer of about 5,000 digits" in str(e.value) and len(str(e.value)) < 300


@pytest.mark.parametrize("count", [10**6, 2**63], ids=["10**6", "2**63"])
def test_client_count_refused_before_expansion(tmp_path, count):
    data = base()
    data["topology"]["subscribers"][0]["count"] = count
    err, text = error_of(tmp_path, data)  # expanding 2**63 copies would never end
    assert err.field == "topology.subscribers[0].count" and err.value == count
    assert "at most 200,000 clients in all (2 declared before this group)" in text
    assert "--max-clients / PUBSIM_MAX_CLIENTS" in text


def test_client_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv("PUBSIM_MAX_CLIENTS", "5")
    with pytest.raises(ConfigError) as e:
        parse_scenario(base())  # 2 publishers + 6 subscribers
    assert e.value.field == "topology.subscribers[0].count" and "at most 5 clients" in str(e.value)
    monkeypatch.setenv("PUBSIM_MAX_CLIENTS", "8")
    assert len(parse_scenario(base()).topology) == 9


def _yaml_error_of(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_scenario(path)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400
    assert e.value.field.startswith(f"{path}:")  # file:line:column
    return msg


def test_integer_of_thousands_of_digits_in_yaml(tmp_path):
    msg = _yaml_error_of(tmp_path, "seed: " + "9" * 5000 + "\n")
    assert "an integer of at most 100 digits (this one has 5,000)" in msg


@pytest.mark.parametrize("depth", [101, 999, 5000, 100_000])
def test_deeply_nested_yaml(tmp_path, depth):
    # over 1,000 flow levels libyaml's own scanner refuses first, with its own words
    msg = _yaml_error_of(tmp_path, "run: " + "[" * depth + "]" * depth + "\n")
    assert "nesting deeper than 100 levels" in msg or "exceeded maximum nesting depth" in msg
    block = "run:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(min(depth, 3000)))
    assert "nesting deeper than 100 levels" in _yaml_error_of(tmp_path, block)


def test_a_long_list_for_a_count_is_refused_and_libyaml_reads_it(tmp_path):
    """Found by the fuzzer: a count given as a list of 100,000 numbers took 10-20 s to refuse
    (the pure-Python composer); read by libyaml, the refusal costs about a second (not asserted)."""
    data = base()
    data["topology"]["subscribers"][0]["count"] = list(range(100_000))
    err, _ = error_of(tmp_path, data)
    assert err.field == "topology.subscribers[0].count" and "cut: list of 100,000 items" in str(err)
    assert yaml.__with_libyaml__, "PyYAML without libyaml reads YAML about 20x slower"


def test_yaml_alias_bomb_is_not_expanded(tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]" for k in range(1, 10)]  # 10**10 values expanded
    msg = _yaml_error_of(tmp_path, "\n".join(lines) + "\n")
    assert "more than 2,000,000 values once aliases are expanded" in msg


def test_yaml_recursive_alias(tmp_path):
    assert "an alias inside its own anchor" in _yaml_error_of(tmp_path, "name: &a [x, *a]\n")


def test_yaml_python_tag_is_refused(tmp_path):
    msg = _yaml_error_of(tmp_path, "name: !!python/object/apply:os.system ['true']\n")
    assert "could not determine a constructor" in msg


def test_yaml_anchors_within_limits_still_work(tmp_path):
    data = base()
    text = yaml.safe_dump(data, sort_keys=False).replace("run:\n", "run: &r\n", 1) + "description: *r\n"
    del data["description"]
    path = tmp_path / "ok.yaml"
    path.write_text(text.replace("description: weather-class load on one MQTT broker, past saturation\n", ""))
    with pytest.raises(ConfigError) as e:  # an alias works; a mapping as the description is refused
        load_scenario(path)
    assert e.value.field == "description" and isinstance(e.value.value, dict)


def test_study_base_uses_the_safe_reader(tmp_path):
    (tmp_path / "base.yaml").write_text("seed: " + "1" * 500 + "\n")
    (tmp_path / "study.yaml").write_text("base: base.yaml\n")
    with pytest.raises(ConfigError) as e:
        load_study(tmp_path / "study.yaml")
    assert e.value.field.startswith(str(tmp_path / "base.yaml") + ":") and "digits" in str(e.value)


def test_study_base_unreadable_names_the_path_once_and_short(tmp_path):
    """Found by the fuzzer: the OS error's own text repeated a 1 MB base path whole."""
    (tmp_path / "study.yaml").write_text("base: " + "x" * 1_000_000 + "\n")
    with pytest.raises(ConfigError) as e:
        load_study(tmp_path / "study.yaml")
    text = str(e.value)
    assert e.value.field == "base" and "File name too long" in text and len(text) < 500


@pytest.mark.parametrize(
    "vary, field",
    [
        ({"sample": {"n": 10**12, "ranges": {"run.warmup": ["0s", "0.1s"]}}}, "vary.sample.n"),
        ({"grid": {"run.warmup": ["0s"] * 1000, "run.cooldown": ["0s"] * 1000}}, "vary.grid"),
    ],
    ids=["sample n 10**12", "grid of 10**6 points"],
)
def test_study_with_too_many_points(tmp_path, vary, field):
    write(tmp_path, base(), "base.yaml")
    write(tmp_path, {"base": "base.yaml", "vary": vary}, "study.yaml")
    with pytest.raises(ConfigError) as e:
        load_study(tmp_path / "study.yaml")
    assert e.value.field == field and "at most 100,000 points" in str(e.value)


# -------- error values quoted short


def test_error_quotes_a_huge_value_short(tmp_path):
    data = base()
    data["topology"]["publishers"][0]["topics"] = [1] * 1_000_000  # about 3 MB of YAML, 3 MB of repr
    with pytest.raises(ConfigError) as e:
        parse_scenario(data)
    text = str(e.value)
    assert len(text) < 400
    assert "[1, 1, 1, " in text and "(cut: list of 1,000,000 items)" in text
    assert e.value.value == [1] * 1_000_000  # the value itself is kept whole


def test_short_repr():
    assert short_repr("-5/s") == "'-5/s'" and short_repr({"a": [1, 2]}) == "{'a': [1, 2]}"
    assert short_repr("x" * 1000) == "'" + "x" * 199 + "... (cut: str of 1,000 characters)"
    assert short_repr(10**5000).startswith("<integer of about 5,000 digits>")
    deep = [[[[[[[[[[[1]]]]]]]]]]]
    assert len(short_repr(deep)) < 60 and "cut" in short_repr(deep)


# -------- the budget: estimated before a run, refused with one line


def test_estimate_of_the_base_scenario():
    est = budget.estimate(parse_scenario(base()))
    assert est.messages == 2 * 20 * 1.0  # 2 publishers at 20/s for 1 s
    assert est.deliveries == est.messages * 3  # each gateway's topic has 3 subscribers
    assert est.clients == 8 and est.stations == 9 + 2 * 8
    slots = (1000 + 1) + 6 * (1000 + 1) + 2 * 8 * 1  # broker, per-subscriber queues, unbounded links both ways
    bins = 1.0 / 0.25 + 1  # the quickstart's series_bin: 0.25 s
    assert est.memory_bytes == budget.BYTES_PER_SLOT * slots + 8 * 1 + 24 * bins


def test_budget_refuses_many_messages():
    data = base()
    data["topology"]["publishers"][0]["rate_per_s"] = "1G/s"
    data["run"]["duration"] = "1h"
    data["replications"] = 10
    scenario = parse_scenario(data)  # well formed: only the budget refuses it
    with pytest.raises(ConfigError) as e:
        budget.check(scenario, budget.Budget())
    text = str(e.value)
    assert text == (
        "estimated messages: '7.2e+13' is invalid: at most the budget of 2e+09 (10 replications): shorten "
        "run.duration, lower rates or replications, or raise the budget with --max-messages / PUBSIM_MAX_MESSAGES"
    )
    assert budget.check(scenario, budget.Budget(max_messages=1e14)).messages == pytest.approx(7.2e13, rel=1e-6)


@pytest.mark.parametrize(
    "where, value",
    [
        (["topology", "broker", "queue_messages"], 10**15),  # was "Maximum allowed dimension exceeded"
        (["topology", "broker", "client_queue_messages"], 10**12),
        (["topology", "link", "queue_messages"], 2**40),
        (["run", "series_bin"], "1ns"),  # 10**9 bins of throughput series
    ],
    ids=["broker queue", "client queues", "link queues", "series bins"],
)
def test_budget_refuses_memory(where, value):
    data = base()
    _set(where, value)(data)
    with pytest.raises(ConfigError) as e:
        budget.check(parse_scenario(data))
    assert e.value.field == "estimated memory up front"
    assert "at most the budget of 8GiB" in str(e.value) and "--max-memory / PUBSIM_MAX_MEMORY" in str(e.value)


def test_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("PUBSIM_MAX_MESSAGES", "1e3")
    monkeypatch.setenv("PUBSIM_MAX_MEMORY", "1GiB")
    b = budget.Budget.from_env()
    assert (b.max_messages, b.max_memory_bytes, b.max_clients) == (1e3, 2**30, 200_000)
    assert budget.Budget.from_env(max_messages="5").max_messages == 5.0  # the command line wins
    monkeypatch.setenv("PUBSIM_MAX_MESSAGES", "nan")
    with pytest.raises(ConfigError) as e:
        budget.Budget.from_env()
    assert e.value.field == "PUBSIM_MAX_MESSAGES"


def test_every_shipped_scenario_and_study_fits_the_default_budget():
    b = budget.Budget()
    studies = sorted((ROOT / "experiments" / "studies").glob("*.yaml"))
    scenarios = [p for p in sorted((ROOT / "experiments").glob("*.yaml"))]
    scenarios += sorted((ROOT / "experiments" / "ildm").glob("*.yaml"))
    assert studies and len(scenarios) > 10
    for path in scenarios:
        est = budget.check(load_scenario(path), b)
        assert est.messages < b.max_messages / 100 and est.memory_bytes < b.max_memory_bytes / 100, path
    for path in studies:
        assert load_study(path, budget=b).points


def test_cli_run_refuses_beyond_the_budget_and_runs_within_a_raised_one(tmp_path):
    write(tmp_path, base(), "ok.yaml")  # 40 messages
    line = _assert_one_line_error(run_cli("run", "ok.yaml", "--max-messages", "10", cwd=tmp_path))
    assert line.startswith("pubsim: error: estimated messages: '40' is invalid: at most the budget of 10 ")
    assert "--max-messages / PUBSIM_MAX_MESSAGES" in line
    proc = run_cli("run", "ok.yaml", "--max-messages", "100", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_cli_run_memory_budget_and_environment(tmp_path):
    data = base()
    data["topology"]["broker"]["queue_messages"] = 10**15
    write(tmp_path, data)
    line = _assert_one_line_error(run_cli("run", "bad.yaml", "--out", tmp_path / "out", cwd=tmp_path))
    assert line.startswith("pubsim: error: estimated memory up front: '1.49e+07GiB' is invalid:")
    assert not (tmp_path / "out").exists()
    write(tmp_path, base(), "ok.yaml")
    env = {**os.environ, "PUBSIM_MAX_CLIENTS": "3"}
    proc = subprocess.run([*pubsim_cmd(), "run", "ok.yaml"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert "at most 3 clients in all" in _assert_one_line_error(proc)


def test_cli_study_run_checks_every_point(tmp_path):
    write(tmp_path, base(), "base.yaml")
    study = {"base": "base.yaml", "vary": {"grid": {"topology.publishers[0].rate_per_s": ["10/s", "10G/s"]}}}
    write(tmp_path, study, "study.yaml")
    line = _assert_one_line_error(run_cli("study", "run", "study.yaml", "--out", tmp_path / "out", cwd=tmp_path))
    assert line.startswith("pubsim: error: point 1 (topology.publishers[0].rate_per_s=10G/s): estimated messages:")
    assert not (tmp_path / "out").exists()


def test_cli_saturate_checks_its_costliest_probe(tmp_path):
    write(tmp_path, base(), "ok.yaml")
    line = _assert_one_line_error(run_cli("saturate", "ok.yaml", "--start", "1ns", "--duration", "10s", cwd=tmp_path))
    assert line.startswith("pubsim: error: estimated messages: '2e+10' is invalid: at most the budget of 2e+09")


def test_study_point_label_quotes_values_short(tmp_path):
    write(tmp_path, base(), "base.yaml")
    write(tmp_path, {"base": "base.yaml", "vary": {"grid": {"topology.broker.preset": ["x" * 5000]}}}, "study.yaml")
    with pytest.raises(ConfigError) as e:
        load_study(tmp_path / "study.yaml")
    assert e.value.field.startswith("point 0 (topology.broker.preset='xxx")
    assert "(cut: str of 5,000 characters)" in e.value.field and len(str(e.value)) < 1200


@pytest.mark.parametrize("field", ["offline_s", "online_s"])
def test_nan_in_a_session_interval_is_refused(tmp_path, field):
    """Found by the fuzzer: NaN compares false, so [[100, .nan]] passed every interval check."""
    data = base()
    data["topology"]["publishers"][0][field] = [[0.1, float("nan")]]
    err, _ = error_of(tmp_path, data)
    assert err.field.endswith(field) or field in str(err)
