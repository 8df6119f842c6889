"""Model stations (links, brokers, subscribers, encoders) and publication sources.

Imports only :mod:`pubsim.models.params` (and the protocol framing) and :mod:`pubsim.sim`."""
