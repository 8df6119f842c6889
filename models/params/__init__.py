"""The user vocabulary: parameter dataclasses, provenance, mapping/validation helpers, topic syntax.

Lowest layer of :mod:`pubsim.models`: imports only :mod:`pubsim.sim`."""
