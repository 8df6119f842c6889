"""Tests of models.params.topics: MQTT, AMQP (RabbitMQ topic exchange) and prefix matching."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsim.models.params.topics import SubscriptionTable, TopicSyntax, matches, validate_filter, validate_topic
from pubsim.sim.errors import ConfigError, short_repr

MQTT, AMQP, PREFIX = TopicSyntax.MQTT, TopicSyntax.AMQP, TopicSyntax.PREFIX


# --- MQTT: examples from MQTT 3.1.1 / 5.0 section 4.7 ----------------------


@pytest.mark.parametrize(
    "topic_filter, topic, expected",
    [
        # 4.7.1.2 multi-level wildcard
        ("sport/tennis/player1/#", "sport/tennis/player1", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
        ("sport/tennis/player1/#", "sport/tennis/player2", False),
        ("sport/#", "sport", True),
        ("sport/#", "sport/", True),
        ("sport/#", "sports", False),
        ("#", "sport/tennis/player1", True),
        ("#", "/", True),
        ("sport/tennis/#", "sport/tennis", True),
        # 4.7.1.3 single-level wildcard
        ("sport/tennis/+", "sport/tennis/player1", True),
        ("sport/tennis/+", "sport/tennis/player2", True),
        ("sport/tennis/+", "sport/tennis/player1/ranking", False),
        ("sport/+", "sport", False),
        ("sport/+", "sport/", True),
        ("+", "sport", True),
        ("+/tennis/#", "sport/tennis/player1", True),
        ("sport/+/player1", "sport/tennis/player1", True),
        ("+/+", "/finance", True),
        ("/+", "/finance", True),
        ("+", "/finance", False),
        # 4.7.2 topics beginning with $
        ("#", "$SYS/monitor/Clients", False),
        ("+/monitor/Clients", "$SYS/monitor/Clients", False),
        ("$SYS/#", "$SYS/monitor/Clients", True),
        ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
        ("$SYS/#", "$SYS", True),
        ("+", "$SYS", False),
        ("a/+", "a/$b", True),
        ("a/#", "a/$b", True),
        # 4.7.3 topic semantics: case-sensitive, spaces allowed, leading '/'
        ("ACCOUNTS", "Accounts", False),
        ("Accounts payable", "Accounts payable", True),
        ("/finance", "finance", False),
        ("finance", "/finance", False),
        ("/", "/", True),
        ("+/+", "/", True),
        ("a//b", "a//b", True),
        ("a/+/b", "a//b", True),
    ],
)
def test_mqtt_spec_examples(topic_filter, topic, expected):
    assert matches(MQTT, topic_filter, topic) is expected
    assert matches("mqtt", topic_filter, topic) is expected


@pytest.mark.parametrize(
    "topic_filter",
    [
        "#",
        "+",
        "sport/tennis/#",
        "+/tennis/#",
        "sport/+/player1",
        "/",
        "//",
        "$SYS/#",
        "a b/+",
    ],
)
def test_mqtt_valid_filters(topic_filter):
    validate_filter(MQTT, topic_filter)


@pytest.mark.parametrize(
    "topic_filter",
    [
        "sport/tennis#",
        "sport/tennis/#/ranking",
        "sport+",
        "",
        "a/#/b",
        "a/b+",
        "##",
        "#/",
        "+a/b",
        "a/++",
        "a\x00b",
        "x" * 65536,
    ],
)
def test_mqtt_invalid_filters_name_the_filter(topic_filter):
    with pytest.raises(ConfigError, match=re.escape(f"filter: {short_repr(topic_filter)} is invalid")):
        validate_filter(MQTT, topic_filter)
    with pytest.raises(ConfigError, match=re.escape(short_repr(topic_filter))):
        SubscriptionTable(MQTT).add("s1", topic_filter)


@pytest.mark.parametrize("topic_filter", [None, 3, b"a/b", ["a"]])
def test_mqtt_filter_must_be_str(topic_filter):
    with pytest.raises(ConfigError, match="filter"):
        validate_filter(MQTT, topic_filter)


@pytest.mark.parametrize("topic", ["a/+", "a/#", "#", "+", "", "a\x00", "sport/tennis+"])
def test_mqtt_invalid_topic_names(topic):
    with pytest.raises(ConfigError, match=re.escape(f"topic: {short_repr(topic)} is invalid")):
        validate_topic(MQTT, topic)
    with pytest.raises(ConfigError):
        matches(MQTT, "#", topic)


def test_custom_field_name_in_errors():
    with pytest.raises(ConfigError, match=r"^subscribers\.s1\.filter: 'a#' is invalid"):
        validate_filter(MQTT, "a#", field="subscribers.s1.filter")


def test_unknown_syntax():
    with pytest.raises(ConfigError, match="syntax: 'kafka' is invalid"):
        matches("kafka", "a", "a")
    with pytest.raises(ConfigError, match="syntax"):
        SubscriptionTable("kafka")
    assert TopicSyntax("prefix") is PREFIX
    assert matches("MQTT", "a/+", "a/b")


# --- AMQP 0-9-1 topic exchange (RabbitMQ tutorial five and docs) -----------

_TUTORIAL_BINDINGS = [("Q1", "*.orange.*"), ("Q2", "*.*.rabbit"), ("Q2", "lazy.#")]


@pytest.mark.parametrize(
    "routing_key, queues",
    [
        ("quick.orange.rabbit", ["Q1", "Q2"]),
        ("lazy.orange.elephant", ["Q1", "Q2"]),
        ("quick.orange.fox", ["Q1"]),
        ("lazy.brown.fox", ["Q2"]),
        ("lazy.pink.rabbit", ["Q2"]),
        ("quick.brown.fox", []),
        ("orange", []),
        ("quick.orange.new.rabbit", []),
        ("lazy.orange.new.rabbit", ["Q2"]),
        ("lazy", ["Q2"]),
    ],
)
def test_rabbitmq_tutorial(routing_key, queues):
    table = SubscriptionTable(AMQP)
    for queue, binding in _TUTORIAL_BINDINGS:
        table.add(queue, binding)
    assert table.subscribers(routing_key) == queues


def test_rabbitmq_pink_rabbit_matches_two_bindings_of_one_queue():
    table = SubscriptionTable("amqp")
    for queue, binding in _TUTORIAL_BINDINGS:
        table.add(queue, binding)
    assert table.match("lazy.pink.rabbit") == [("Q2", "*.*.rabbit"), ("Q2", "lazy.#")]
    assert table.subscribers("lazy.pink.rabbit") == ["Q2"]


@pytest.mark.parametrize(
    "binding, routing_key, expected",
    [
        ("#", "", True),
        ("#", "a", True),
        ("#", "a.b.c", True),
        ("#.#", "", True),
        ("*", "", False),
        ("*", "a", True),
        ("*", "a.b", False),
        ("*", ".", False),
        ("*.*", ".", True),
        ("", "", True),
        ("", "a", False),
        ("a", "", False),
        ("lazy.#", "lazy", True),
        ("lazy.#", "lazy.a.b", True),
        ("lazy.#", "lazyx", False),
        ("#.b", "b", True),
        ("#.b", "a.b", True),
        ("#.b", "x.y.b", True),
        ("#.b", "b.a", False),
        ("a.#.c", "a.c", True),
        ("a.#.c", "a.b.c", True),
        ("a.#.c", "a.b.d.c", True),
        ("a.#.c", "a.b", False),
        ("a.#.c", "a.c.d", False),
        ("a.#.c", "c", False),
        ("#.a.#", "a", True),
        ("#.a.#", "x.a.y", True),
        ("#.a.#", "x.y", False),
        ("*.#", "", False),
        ("*.#", "a", True),
        ("#.*", "a.b.c", True),
        ("a.*.#", "a", False),
        ("a.*.#", "a.b", True),
        ("a.", "a.", True),
        ("a.", "a", False),
        ("a.*", "a.", True),
        ("stock.usd.nyse", "stock.usd.nyse", True),
        ("stock.usd.nyse", "stock.usd", False),
        ("a.*", "a.*", True),
        ("a.#", "a.#", True),
    ],
)
def test_amqp_matching(binding, routing_key, expected):
    assert matches(AMQP, binding, routing_key) is expected


@pytest.mark.parametrize("binding", ["a*", "a.b#", "*a.b", "a.#b.c", "x" * 256, 5, None])
def test_amqp_invalid_binding_keys(binding):
    with pytest.raises(ConfigError, match=re.escape(f"filter: {short_repr(binding)} is invalid")):
        validate_filter(AMQP, binding)


def test_amqp_routing_key_length_limit():
    validate_topic(AMQP, "x" * 255)
    with pytest.raises(ConfigError, match="255 bytes"):
        validate_topic(AMQP, "x" * 256)
    with pytest.raises(ConfigError, match="255 bytes"):
        validate_topic(AMQP, "\u00e9" * 128)  # 256 bytes in UTF-8


# --- Prefix (ZeroMQ SUB) ---------------------------------------------------


@pytest.mark.parametrize(
    "topic_filter, topic, expected",
    [
        ("", "anything", True),
        ("", "", True),
        (b"", b"", True),
        ("a", "abc", True),
        ("abc", "abc", True),
        ("abcd", "abc", False),
        ("b", "abc", False),
        ("weather.", "weather.paris", True),
        ("weather.", "weatherman", False),
        (b"\x01", b"\x01\x02", True),
        (b"\x02", b"\x01\x02", False),
        ("\u00e9", "\u00e9t\u00e9", True),
        (b"\xc3", "\u00e9", True),
        ("\u00e9", b"\xc3\xa9x", True),
        ("#", "#a", True),
        ("+", "a", False),
    ],
)
def test_prefix_matching(topic_filter, topic, expected):
    assert matches(PREFIX, topic_filter, topic) is expected


@pytest.mark.parametrize("bad", [None, 3, ["a"], "\ud800"])
def test_prefix_invalid(bad):
    with pytest.raises(ConfigError, match=re.escape(repr(bad))):
        validate_filter(PREFIX, bad)
    with pytest.raises(ConfigError, match=re.escape(repr(bad))):
        validate_topic(PREFIX, bad)


def test_prefix_table():
    table = SubscriptionTable(PREFIX)
    table.add("all", "")
    table.add("w", "weather")
    table.add("wp", "weather.paris")
    table.add("w2", b"weather")
    table.add("s", "sport")
    assert len(table) == 5
    assert table.match("weather.paris.temp") == [
        ("all", ""),
        ("w", "weather"),
        ("wp", "weather.paris"),
        ("w2", b"weather"),
    ]
    assert table.subscribers("sports") == ["all", "s"]
    assert table.subscribers(b"") == ["all"]


# --- SubscriptionTable ----------------------------------------------------


def test_table_order_of_addition_and_duplicates():
    table = SubscriptionTable(MQTT)
    table.add("s2", "a/#")
    table.add("s1", "a/b")
    table.add("s1", "+/b")
    table.add("s2", "a/#")  # repeated subscription: no effect
    table.add("s3", "c")
    assert len(table) == 4
    assert table.match("a/b") == [("s2", "a/#"), ("s1", "a/b"), ("s1", "+/b")]
    assert table.subscribers("a/b") == ["s1", "s2"]
    assert table.match("z") == []
    assert table.subscribers("$SYS/b") == []
    assert len(SubscriptionTable(AMQP)) == 0


def test_table_rejects_bad_topic():
    table = SubscriptionTable(MQTT)
    table.add(1, "#")
    with pytest.raises(ConfigError, match=re.escape("topic: 'a/+' is invalid")):
        table.match("a/+")


def test_table_deep_topics_do_not_recurse():
    table = SubscriptionTable(MQTT)
    table.add("deep", "/".join(["+"] * 5000))
    table.add("all", "#")
    assert table.subscribers("/".join(["x"] * 5000)) == ["all", "deep"]
    amqp = SubscriptionTable(AMQP)
    amqp.add("q", "#.x.#.y.#")
    assert amqp.subscribers(".".join(["x", "y"] * 60)) == ["q"]


# --- Property tests against straightforward reference matchers -------------


def _mqtt_levels_match(filter_levels, topic_levels):
    """Level-by-level recursion of MQTT 4.7 (reference, not optimised)."""
    if not filter_levels:
        return not topic_levels
    head, rest = filter_levels[0], filter_levels[1:]
    if head == "#":
        return True
    if not topic_levels:
        return False
    if head in ("+", topic_levels[0]):
        return _mqtt_levels_match(rest, topic_levels[1:])
    return False


def _mqtt_reference(topic_filter, topic):
    if topic.startswith("$") and topic_filter[0] in "+#":
        return False
    return _mqtt_levels_match(topic_filter.split("/"), topic.split("/"))


def _amqp_words_match(binding_words, key_words):
    """Word-by-word recursion of the RabbitMQ topic exchange (reference)."""
    if not binding_words:
        return not key_words
    head, rest = binding_words[0], binding_words[1:]
    if head == "#":
        return any(_amqp_words_match(rest, key_words[i:]) for i in range(len(key_words) + 1))
    if not key_words:
        return False
    if head in ("*", key_words[0]):
        return _amqp_words_match(rest, key_words[1:])
    return False


def _amqp_reference(binding, key):
    def words(text):
        return text.split(".") if text else []

    return _amqp_words_match(words(binding), words(key))


_topic_level = st.sampled_from(["a", "b", "", "$a", "ab"])
_mqtt_topics = st.lists(_topic_level, min_size=1, max_size=5).map("/".join).filter(bool)
_mqtt_filters = st.builds(
    lambda levels, tail: "/".join(levels + tail),
    st.lists(st.sampled_from(["a", "b", "", "+", "$a"]), min_size=0, max_size=5),
    st.sampled_from([[], ["#"]]),
).filter(bool)
_amqp_keys = st.lists(st.sampled_from(["a", "b", ""]), max_size=5).map(".".join)
_amqp_bindings = st.lists(st.sampled_from(["a", "b", "", "*", "#"]), max_size=5).map(".".join)


@given(_mqtt_filters, _mqtt_topics)
@settings(max_examples=500)
def test_mqtt_matches_reference(topic_filter, topic):
    assert matches(MQTT, topic_filter, topic) == _mqtt_reference(topic_filter, topic)


@given(st.lists(_mqtt_filters, max_size=12), st.lists(_mqtt_topics, min_size=1, max_size=5))
@settings(max_examples=200)
def test_mqtt_table_matches_reference(filters, topics):
    table = SubscriptionTable(MQTT)
    for i, topic_filter in enumerate(filters):
        table.add(i % 3, topic_filter)
    expected_pairs = list(dict.fromkeys((i % 3, f) for i, f in enumerate(filters)))
    for topic in topics:
        expected = [(s, f) for s, f in expected_pairs if _mqtt_reference(f, topic)]
        assert table.match(topic) == expected
        assert table.subscribers(topic) == sorted({s for s, _ in expected})


@given(_amqp_bindings, _amqp_keys)
@settings(max_examples=500)
def test_amqp_matches_reference(binding, key):
    assert matches(AMQP, binding, key) == _amqp_reference(binding, key)


@given(st.lists(_amqp_bindings, max_size=12), st.lists(_amqp_keys, min_size=1, max_size=5))
@settings(max_examples=200)
def test_amqp_table_matches_reference(bindings, keys):
    table = SubscriptionTable(AMQP)
    for i, binding in enumerate(bindings):
        table.add(f"q{i}", binding)
    for key in keys:
        expected = [(f"q{i}", b) for i, b in enumerate(bindings) if _amqp_reference(b, key)]
        assert table.match(key) == expected


@given(st.lists(st.binary(max_size=3), max_size=10), st.binary(max_size=6))
def test_prefix_table_matches_startswith(filters, topic):
    table = SubscriptionTable(PREFIX)
    for i, topic_filter in enumerate(filters):
        table.add(i, topic_filter)
    assert table.subscribers(topic) == [i for i, f in enumerate(filters) if topic.startswith(f)]
