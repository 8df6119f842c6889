"""The compiler: the registry of mechanisms (:mod:`.registry`), :func:`.build.build_network`,
the parameter table (:mod:`.table`) and the features of a topology with the per-connection check (:mod:`.features`).

Top layer of :mod:`pubsim.models`: it imports the mechanisms, nothing imports it
except the application layer (:mod:`pubsim.run`, :mod:`pubsim.cli`).
"""
