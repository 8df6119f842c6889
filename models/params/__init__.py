"""The user vocabulary: parameter dataclasses, provenance, mapping/validation helpers, topic syntax,
and the one table of refused feature combinations (:mod:`.features`).

Lowest layer of :mod:`pubsim.models`: imports only :mod:`pubsim.sim` (and the
shipped presets, :mod:`pubsim.models.presets`)."""
