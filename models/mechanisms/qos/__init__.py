"""MQTT/AMQP per-hop QoS: windowed links, visit QoS, handshake packets at brokers.

Plug-in: :data:`QOS` (:mod:`.plugin`).
"""

from .plugin import QOS

__all__ = ["QOS"]
