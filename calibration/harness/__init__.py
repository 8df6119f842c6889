"""Measurement harness for real brokers.

* :mod:`.brokers` -- start / stop Mosquitto, NATS, RabbitMQ / ActiveMQ /
  ejabberd (MQTT) and a ZeroMQ proxy on loopback ports, with guaranteed
  cleanup; one :class:`~.brokers.BrokerKind` per kind in
  :data:`~.brokers.REGISTRY`; Mosquitto ``$SYS``.
* :mod:`.cpu` -- core pinning and cgroup CPU caps.
* :mod:`.procfs` -- the one ``/proc`` reader: a process's CPU time, run-queue
  wait and context switches, process trees, listening sockets
  (:mod:`.procstat` is its former name).
* :mod:`.loadgen` -- the load generator, a package split by role (spec,
  records, publisher, subscriber, runner, result); :mod:`.mqttwire` (socket
  client over the shared codec :mod:`pubsim.models.protocol.mqtt`) and
  :mod:`.natswire` speak the wire protocols.
* :mod:`.zmqproxy` -- the ZeroMQ XSUB/XPUB forwarder run as a broker.

Submodules are imported on demand (some need pyzmq or a Linux ``/proc``).
"""
