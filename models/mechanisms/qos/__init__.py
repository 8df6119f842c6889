"""MQTT/AMQP per-hop QoS: windowed links, visit QoS, handshake packets at brokers."""
