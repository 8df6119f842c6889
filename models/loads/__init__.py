"""Trace-driven IoT loads (issue 4).

- :mod:`pubsim.models.loads.trace`: :class:`Trace`, the one in-memory form of a load
  (columns ``t_s``, ``publisher``, ``topic``, ``size_bytes``, optional ``qos``,
  ``priority``, ``retain``, ``connection``), Parquet/CSV I/O with a schema check,
  conversion to schedule publishers.
- :mod:`pubsim.models.loads.readers`: CampusIoT NDJSON.gz and MQTT pcap/pcapng readers.
- :mod:`pubsim.models.loads.generators`: vectorised synthetic loads and the three
  IoT classes of SYSTEMS.md §5.
- :mod:`pubsim.models.loads.replay`: exact, time-scaled and unbiased resampled
  replay, scale-up to N gateways x M devices.
- :mod:`pubsim.models.loads.cli`: ``pubsim trace inspect|convert``.
"""

from .trace import Trace

__all__ = ["Trace"]
