"""The middleware families of SYSTEMS.md §1 and the broker presets that model them.

``FAMILIES`` maps a family to its examples, and each example to the broker
preset names that stand for it (calibrated first, then estimates). Tests
check that every family has at least one preset; ``pubsim presets`` shows
the family of each preset.
"""

from __future__ import annotations

__all__ = ["FAMILIES", "family_of"]

FAMILIES = {
    "MQTT broker": {
        "Mosquitto": ("mosquitto", "mosquitto-placeholder"),
        "HiveMQ": ("hivemq-placeholder",),
        "EMQX": ("emqx-placeholder",),
        "Moquette": ("moquette-placeholder",),
        "ActiveMQ MQTT plug-in": ("activemq-mqtt", "activemq-mqtt-placeholder"),
        "RabbitMQ MQTT plug-in": ("rabbitmq-mqtt",),
    },
    "AMQP broker": {
        "RabbitMQ": ("rabbitmq-placeholder", "rabbitmq-priority-placeholder"),
        "Apache Qpid": ("qpid-java-placeholder", "qpid-cpp-placeholder"),
        "ActiveMQ": ("activemq-placeholder",),
        "Artemis": ("artemis-placeholder",),
    },
    "brokerless": {
        "ZeroMQ XPUB/XSUB proxy": ("zmq-proxy", "zeromq-proxy-placeholder"),
        "ZeroMQ PUB/SUB, PUSH/PULL": ("zeromq-pubsub-placeholder",),
    },
    "brokered or brokerless with priorities": {
        "YAMI4": ("yami4-placeholder", "yami4-channel"),
    },
    "others named by the studies": {
        "NATS": ("nats",),
        "XMPP/ejabberd": ("ejabberd-mqtt", "ejabberd-xmpp-placeholder", "ejabberd-placeholder"),
    },
}


def family_of(name):
    """``(family, example)`` of broker preset ``name``, or ``("", "")``."""
    for family, examples in FAMILIES.items():
        for example, presets in examples.items():
            if name in presets:
                return family, example
    return "", ""
