"""Measurement harness for real brokers.

* :mod:`.brokers` -- start / stop Mosquitto, NATS, RabbitMQ (MQTT) and a
  ZeroMQ proxy on loopback ports, with guaranteed cleanup; Mosquitto ``$SYS``.
* :mod:`.cpu` -- core pinning and cgroup CPU caps.
* :mod:`.procstat` -- a process's CPU time, run-queue wait and context
  switches from ``/proc``.
* :mod:`.loadgen`, :mod:`.mqttwire`, :mod:`.natswire` -- the load generator.
* :mod:`.zmqproxy` -- the ZeroMQ XSUB/XPUB forwarder run as a broker.

Submodules are imported on demand (some need pyzmq or a Linux ``/proc``).
"""
