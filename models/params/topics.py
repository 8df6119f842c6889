"""Topic filters and topic matching for three protocol families.

``TopicSyntax.MQTT``
    MQTT 3.1.1 section 4.7 / MQTT 5.0 section 4.7. Levels are separated by
    ``/``; ``+`` matches exactly one level (possibly empty); ``#`` matches the
    parent level and any number of child levels, so ``a/#`` matches ``a``,
    ``a/b`` and ``a/b/c``. ``+`` must fill a whole level; ``#`` must fill the
    last level. A filter starting with a wildcard does not match a topic name
    starting with ``$`` (4.7.2), so ``#`` does not match ``$SYS/uptime`` but
    ``$SYS/#`` does.
``TopicSyntax.AMQP``
    AMQP 0-9-1 topic exchange as implemented by RabbitMQ. Binding and routing
    keys are words separated by ``.``; ``*`` matches exactly one word and
    ``#`` zero or more words, anywhere in the key (``#.b``, ``a.#.c``). The
    empty key has zero words, so ``#`` matches ``""`` and ``*`` does not.
    RabbitMQ treats a word such as ``a*`` as a literal; here such binding keys
    are rejected, since they are almost always a mistake.
``TopicSyntax.PREFIX``
    ZeroMQ SUB sockets: a subscription matches when the topic's bytes (UTF-8
    for strings) start with the filter's bytes; the empty filter matches all.

:class:`SubscriptionTable` compiles filters into a trie of levels (MQTT,
AMQP) or a table of prefixes, so matching a topic costs about the number of
levels it has rather than the number of subscriptions.

Shared subscriptions (MQTT 5.0 §4.8.2): a filter ``$share/{group}/{filter}``
subscribes to ``filter`` as a member of the share group ``group``; each
matching message goes to the group once, to one member. The group is the
pair (share name, filter) in MQTT (``$share/g/a`` and ``$share/g/b`` are
two groups); with the AMQP syntax ``$share/{queue}/{binding key}`` names
the consumers of one queue ``queue`` bound with that key (AMQP competing
consumers: a message matching several bindings of a queue enters it once,
RabbitMQ tutorial 2 "Work Queues"). ZeroMQ prefix filters have no shared
subscriptions.
"""

from __future__ import annotations

import bisect
import enum
import functools
from collections.abc import Callable, Hashable
from typing import Any

from ...sim.errors import ConfigError

__all__ = [
    "TopicSyntax",
    "validate_filter",
    "validate_topic",
    "matches",
    "SubscriptionTable",
    "SHARE_PREFIX",
    "split_shared",
    "is_shared",
]

SHARE_PREFIX = "$share/"

MQTT_MAX_BYTES = 65535  # MQTT 3.1.1 section 1.5.3: UTF-8 strings have a 16-bit length
AMQP_MAX_BYTES = 255  # AMQP 0-9-1: routing keys are short strings


class TopicSyntax(enum.Enum):
    """Protocol family whose filter rules apply."""

    MQTT = "mqtt"
    AMQP = "amqp"
    PREFIX = "prefix"


def _syntax(value: Any) -> TopicSyntax:
    """Return ``value`` as a :class:`TopicSyntax`; strings are case-insensitive."""
    if isinstance(value, TopicSyntax):
        return value
    try:
        return TopicSyntax(str(value).lower()) if isinstance(value, str) else TopicSyntax(value)
    except ValueError:
        raise ConfigError("syntax", value, f"one of {[s.value for s in TopicSyntax]}") from None


def _utf8(text: Any, field: str, kind: str, max_bytes: float) -> None:
    """Check that ``text`` is a str encodable as UTF-8 in ``max_bytes`` bytes."""
    if not isinstance(text, str):
        raise ConfigError(field, text, f"{kind} must be a str")
    try:
        size_bytes = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ConfigError(field, text, f"{kind} must be valid UTF-8 (no lone surrogates)") from None
    if size_bytes > max_bytes:
        raise ConfigError(field, text, f"{kind} must be at most {max_bytes} bytes in UTF-8")


def _check_mqtt_string(text: Any, field: str, kind: str) -> None:
    """Rules common to MQTT filters and topic names: UTF-8, non-empty, no NUL."""
    _utf8(text, field, kind, MQTT_MAX_BYTES)
    if text == "":
        raise ConfigError(field, text, f"an MQTT {kind} must not be empty (MQTT 4.7.3)")
    if "\x00" in text:
        raise ConfigError(field, text, f"an MQTT {kind} must not contain U+0000 (MQTT 1.5.3)")


def _validate_mqtt_filter(text: Any, field: str) -> None:
    """Enforce MQTT 4.7.1: ``+`` alone in its level, ``#`` alone in the last level."""
    _check_mqtt_string(text, field, "filter")
    levels = text.split("/")
    for position, level in enumerate(levels):
        if "+" in level and level != "+":
            raise ConfigError(field, text, "an MQTT filter; '+' must fill a whole level (MQTT 4.7.1.3)")
        if "#" in level and (level != "#" or position != len(levels) - 1):
            raise ConfigError(field, text, "an MQTT filter; '#' must fill the last level (MQTT 4.7.1.2)")


def _validate_mqtt_topic(text: Any, field: str) -> None:
    """Enforce MQTT 4.7.1.1: topic names contain no wildcard characters."""
    _check_mqtt_string(text, field, "topic name")
    if "+" in text or "#" in text:
        raise ConfigError(field, text, "an MQTT topic name without wildcards '+' or '#' (MQTT 4.7.1.1)")


def _validate_amqp_filter(text: Any, field: str) -> None:
    """Binding key: at most 255 bytes; ``*`` and ``#`` only as whole words."""
    _utf8(text, field, "binding key", AMQP_MAX_BYTES)
    for word in _amqp_words(text):
        if ("*" in word or "#" in word) and word not in ("*", "#"):
            raise ConfigError(field, text, "an AMQP binding key; '*' and '#' must be whole words between dots")


def _validate_amqp_topic(text: Any, field: str) -> None:
    """Routing key: any str of at most 255 bytes in UTF-8."""
    _utf8(text, field, "routing key", AMQP_MAX_BYTES)


def _prefix_bytes(value: Any, field: str, kind: str) -> bytes:
    """A ZeroMQ filter or topic as bytes (str is encoded as UTF-8)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    _utf8(value, field, kind, float("inf"))
    return value.encode("utf-8")


_FILTER_CHECKS: dict[TopicSyntax, Callable[[Any, str], object]] = {
    TopicSyntax.MQTT: _validate_mqtt_filter,
    TopicSyntax.AMQP: _validate_amqp_filter,
    TopicSyntax.PREFIX: lambda value, field: _prefix_bytes(value, field, "filter"),
}
_TOPIC_CHECKS: dict[TopicSyntax, Callable[[Any, str], object]] = {
    TopicSyntax.MQTT: _validate_mqtt_topic,
    TopicSyntax.AMQP: _validate_amqp_topic,
    TopicSyntax.PREFIX: lambda value, field: _prefix_bytes(value, field, "topic"),
}


def is_shared(topic_filter: Any) -> bool:
    """Whether ``topic_filter`` is written as a shared subscription ``$share/...``."""
    return isinstance(topic_filter, str) and topic_filter.startswith(SHARE_PREFIX)


def split_shared(topic_filter: Any, field: str = "subscriptions") -> tuple[str, str] | None:
    """``(share name, filter)`` of a shared subscription ``$share/{name}/{filter}``, or None.

    Raises :class:`ConfigError` if it starts with ``$share/`` but has no share
    name, a name with ``+`` or ``#``, or no filter (MQTT 5.0 §4.8.2).
    """
    if not is_shared(topic_filter):
        return None
    name, sep, inner = topic_filter[len(SHARE_PREFIX) :].partition("/")
    if not name or not sep or not inner or "+" in name or "#" in name:
        raise ConfigError(
            field,
            topic_filter,
            "a shared subscription $share/{group}/{filter}: a group name of at least one character "
            "without '/', '+' or '#', then a filter (MQTT 5.0 §4.8.2)",
        )
    return name, inner


def _group_key(syntax: TopicSyntax, topic_filter: str) -> str:
    """The share group of a shared subscription: ``$share/g/f`` in MQTT, the queue ``$share/g`` in AMQP."""
    name, inner = split_shared(topic_filter) or ("", "")
    return f"{SHARE_PREFIX}{name}" if syntax is TopicSyntax.AMQP else topic_filter


def validate_filter(syntax: TopicSyntax | str, topic_filter: Any, field: str = "filter") -> None:
    """Raise :class:`ConfigError` unless ``topic_filter`` is a valid filter.

    Parameters
    ----------
    syntax : TopicSyntax or str
        Protocol family (``"mqtt"``, ``"amqp"``, ``"prefix"``).
    topic_filter : str (or bytes for PREFIX)
        Subscription filter / binding key.
    field : str
        Name of the field, used in error messages.

    A shared subscription ``$share/{group}/{filter}`` (MQTT and AMQP syntax)
    is valid when its group name and its filter are.
    """
    syntax = _syntax(syntax)
    shared = split_shared(topic_filter, field) if syntax is not TopicSyntax.PREFIX else None
    _FILTER_CHECKS[syntax](topic_filter if shared is None else shared[1], field)


def validate_topic(syntax: TopicSyntax | str, topic: Any, field: str = "topic") -> None:
    """Raise :class:`ConfigError` unless ``topic`` is a valid topic name.

    Parameters
    ----------
    syntax : TopicSyntax or str
        Protocol family.
    topic : str (or bytes for PREFIX)
        Topic name / routing key of a published message.
    field : str
        Name of the field, used in error messages.
    """
    _TOPIC_CHECKS[_syntax(syntax)](topic, field)


def _amqp_words(key: str) -> list[str]:
    """Split an AMQP key into words; ``""`` has no words (as in RabbitMQ)."""
    return key.split(".") if key else []


class _Node:
    """Trie node: literal children, the one-level and multi-level wildcard
    children, and the indices of the subscriptions whose filter ends here."""

    __slots__ = ("children", "one", "rest", "ends")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.one: _Node | None = None
        self.rest: _Node | None = None
        self.ends: list[int] = []


class _TrieIndex:
    """Filters stored as a trie of levels; subclasses define the syntax."""

    ONE = "+"
    REST = "#"

    def __init__(self) -> None:
        self.root = _Node()

    def split(self, text: str) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def insert(self, topic_filter: str, index: int) -> None:
        """Store subscription ``index`` under the (validated) ``topic_filter``."""
        node = self.root
        for level in self.split(topic_filter):
            node = self._child(node, level)
        node.ends.append(index)

    def _child(self, node: _Node, level: str) -> _Node:
        """The child of ``node`` for ``level``, created if missing."""
        if level == self.ONE:
            node.one = node.one or _Node()
            return node.one
        if level == self.REST:
            node.rest = node.rest or _Node()
            return node.rest
        return node.children.setdefault(level, _Node())


class _MqttIndex(_TrieIndex):
    """MQTT filters: ``/`` levels, ``+`` and a trailing ``#``."""

    ONE = "+"

    def split(self, text: str) -> list[str]:
        return text.split("/")

    def lookup(self, topic: str) -> list[int]:
        """Indices of the subscriptions matching ``topic`` (unordered).

        Walks the trie depth-first with an explicit stack; a node is reached
        by one path only, so no index is reported twice.
        """
        levels = topic.split("/")
        dollar = levels[0].startswith("$")
        found: list[int] = []
        stack: list[tuple[_Node, int]] = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            wild = depth > 0 or not dollar  # MQTT 4.7.2
            if wild and node.rest is not None:
                found.extend(node.rest.ends)  # '#' also matches the parent level
            if depth == len(levels):
                found.extend(node.ends)
                continue
            child = node.children.get(levels[depth])
            if child is not None:
                stack.append((child, depth + 1))
            if wild and node.one is not None:
                stack.append((node.one, depth + 1))
        return found


class _AmqpIndex(_TrieIndex):
    """AMQP binding keys: ``.`` words, ``*`` and ``#`` anywhere."""

    ONE = "*"

    def split(self, text: str) -> list[str]:
        return _amqp_words(text)

    def lookup(self, topic: str) -> list[int]:
        """Indices of the subscriptions matching ``topic`` (unordered).

        ``#`` may consume any number of words, so several paths can reach the
        same (node, position); each is expanded once, which bounds the work
        by (trie nodes) x (words + 1)^2.
        """
        words = _amqp_words(topic)
        found: list[int] = []
        stack: list[tuple[_Node, int]] = [(self.root, 0)]
        seen: set[tuple[_Node, int]] = set()
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            node, position = state
            if node.rest is not None:
                stack.extend((node.rest, j) for j in range(position, len(words) + 1))
            if position == len(words):
                found.extend(node.ends)
                continue
            child = node.children.get(words[position])
            if child is not None:
                stack.append((child, position + 1))
            if node.one is not None:
                stack.append((node.one, position + 1))
        return found


class _PrefixIndex:
    """ZeroMQ filters: subscriptions grouped by filter bytes and by length."""

    def __init__(self) -> None:
        self.by_filter: dict[bytes, list[int]] = {}
        self.lengths: list[int] = []

    def insert(self, topic_filter: Any, index: int) -> None:
        """Store subscription ``index`` under the filter's bytes."""
        key = _prefix_bytes(topic_filter, "filter", "filter")
        if key not in self.by_filter:
            self.by_filter[key] = []
            position = bisect.bisect_left(self.lengths, len(key))
            if position == len(self.lengths) or self.lengths[position] != len(key):
                self.lengths.insert(position, len(key))
        self.by_filter[key].append(index)

    def lookup(self, topic: Any) -> list[int]:
        """Indices of the subscriptions whose filter is a prefix of ``topic``."""
        data = _prefix_bytes(topic, "topic", "topic")
        found: list[int] = []
        for length in self.lengths:
            if length > len(data):
                break
            found.extend(self.by_filter.get(data[:length], ()))
        return found


_INDEX_CLASSES: dict[TopicSyntax, type[_MqttIndex | _AmqpIndex | _PrefixIndex]] = {
    TopicSyntax.MQTT: _MqttIndex,
    TopicSyntax.AMQP: _AmqpIndex,
    TopicSyntax.PREFIX: _PrefixIndex,
}


@functools.lru_cache(maxsize=4096)
def _compiled(syntax: TopicSyntax, topic_filter: Any) -> _MqttIndex | _AmqpIndex | _PrefixIndex:
    """A one-filter index for :func:`matches`, built once per filter."""
    index = _INDEX_CLASSES[syntax]()
    index.insert(topic_filter, 0)
    return index


def matches(syntax: TopicSyntax | str, topic_filter: Any, topic: Any) -> bool:
    """Whether ``topic_filter`` matches ``topic`` under ``syntax``.

    Parameters
    ----------
    syntax : TopicSyntax or str
        Protocol family.
    topic_filter : str (or bytes for PREFIX)
        Subscription filter / binding key; validated.
    topic : str (or bytes for PREFIX)
        Topic name / routing key; validated.

    Returns
    -------
    bool

    Raises
    ------
    ConfigError
        If the filter or the topic is invalid for ``syntax``.
    """
    syntax = _syntax(syntax)
    validate_filter(syntax, topic_filter)
    validate_topic(syntax, topic)
    if syntax is TopicSyntax.PREFIX:
        topic_filter = _prefix_bytes(topic_filter, "filter", "filter")
    return bool(_compiled(syntax, topic_filter).lookup(topic))


class SubscriptionTable:
    """Subscriptions (subscriber id, filter) of one broker or exchange.

    Parameters
    ----------
    syntax : TopicSyntax or str
        Protocol family of every filter in the table.

    Notes
    -----
    Adding the same (subscriber id, filter) pair again has no effect, as a
    repeated MQTT SUBSCRIBE replaces the existing subscription. Subscriber ids
    must be hashable, and mutually orderable for :meth:`subscribers`.
    Shared subscriptions (``$share/{group}/{filter}``, MQTT and AMQP syntax)
    match by their filter; :meth:`subscribers` lists only the plain ones and
    :meth:`groups` the share groups (see the module docstring).
    """

    def __init__(self, syntax: TopicSyntax | str) -> None:
        self.syntax = _syntax(syntax)
        self._index = _INDEX_CLASSES[self.syntax]()
        self._subscriptions: list[tuple[Hashable, Any]] = []
        self._positions: dict[tuple[Hashable, Any], int] = {}
        self._group: dict[int, str] = {}  # position of a shared subscription -> its share group

    def add(self, subscriber_id: Hashable, topic_filter: Any) -> None:
        """Subscribe ``subscriber_id`` to ``topic_filter`` (validated)."""
        shared = split_shared(topic_filter, "filter") if self.syntax is not TopicSyntax.PREFIX else None
        inner = topic_filter if shared is None else shared[1]
        validate_filter(self.syntax, inner)
        if isinstance(topic_filter, (bytearray, memoryview)):
            topic_filter = inner = bytes(topic_filter)
        key = (subscriber_id, topic_filter)
        if key in self._positions:
            return
        self._positions[key] = len(self._subscriptions)
        if shared is not None:
            self._group[len(self._subscriptions)] = _group_key(self.syntax, topic_filter)
        self._index.insert(inner, len(self._subscriptions))
        self._subscriptions.append(key)

    def match(self, topic: Any) -> list[tuple[Hashable, Any]]:
        """All subscriptions matching ``topic``, in order of addition.

        Returns
        -------
        list of (subscriber_id, filter)
        """
        validate_topic(self.syntax, topic)
        return [self._subscriptions[i] for i in sorted(self._index.lookup(topic))]

    def _matching(self, topic: Any) -> list[int]:
        validate_topic(self.syntax, topic)
        return sorted(self._index.lookup(topic))

    def subscribers(self, topic: Any) -> list[Any]:
        """Sorted distinct ids of the subscribers with a plain (not shared) filter matching ``topic``."""
        return sorted({self._subscriptions[i][0] for i in self._matching(topic) if i not in self._group})

    def groups(self, topic: Any) -> list[tuple[str, list[Any]]]:
        """Share groups with a member's filter matching ``topic``: ``(group, members)`` sorted by
        group, members in order of subscription."""
        members: dict[str, list] = {}
        for i in self._matching(topic):
            if i in self._group:
                m = members.setdefault(self._group[i], [])
                if self._subscriptions[i][0] not in m:
                    m.append(self._subscriptions[i][0])
        return [(g, members[g]) for g in sorted(members)]

    def members(self) -> dict[str, list[Any]]:
        """Every share group with its members in order of subscription."""
        out: dict[str, list[Any]] = {}
        for i, g in self._group.items():
            if self._subscriptions[i][0] not in out.setdefault(g, []):
                out[g].append(self._subscriptions[i][0])
        return out

    def matched(self, topic: Any) -> int:
        """Subscriptions a message on ``topic`` is matched against for delivery:
        matching plain subscriptions, plus one per matching share group."""
        found = self._matching(topic)
        return sum(i not in self._group for i in found) + len({self._group[i] for i in found if i in self._group})

    def __len__(self) -> int:
        """Number of distinct (subscriber id, filter) subscriptions."""
        return len(self._subscriptions)

    def __repr__(self) -> str:
        return f"SubscriptionTable({self.syntax.value!r}, {len(self)} subscriptions)"
