"""pubsim: a discrete-event simulator of publish/subscribe middleware networks.

The curated API (everything a notebook or a script needs to build, run and
read a simulation)::

    import pubsim as ps

    g = ps.star(broker=ps.BrokerParams(ingress_cost_s=ps.Exponential(mean_value=1e-3)),
                publishers={"p": ps.PublisherParams(topics=("t",), rate_per_s=100.0)},
                subscribers={"s": ps.SubscriberParams(subscriptions=("t",))},
                link=ps.LinkParams(latency_s=1e-3))
    result = ps.simulate(g, duration_s=60, warmup_s=5, seed=1)
    result.summary()

Subpackages, from the bottom layer up (each imports only from those below
it; the contract is checked by ``lint-imports``, see ``setup.cfg``):

- :mod:`pubsim.sim`: the engine kernel (stations, disciplines, numba
  kernels, route plans, drivers, records, random streams, distributions,
  units, queueing theory);
- :mod:`pubsim.models`: parameters, model stations, mechanisms, loads,
  presets and the compiler from a topology to a runtime network;
- :mod:`pubsim.run` and :mod:`pubsim.scenario`: one run, scenario files;
- :mod:`pubsim.study`, :mod:`pubsim.analysis`, :mod:`pubsim.report`:
  sweeps, the virtual benchmark and figures, reports;
- :mod:`pubsim.calibration`: the real-broker harness, fitting, validation;
- :mod:`pubsim.cli`: the ``pubsim`` command.
"""

from __future__ import annotations

from ._version import __version__
from .models.loads import Trace
from .models.params.bridge import BridgeParams
from .models.params.broker import BrokerParams
from .models.params.client import PublisherParams, SubscriberParams
from .models.params.disk import DiskParams
from .models.params.link import LinkParams
from .models.params.provenance import Provenance
from .models.params.relay import RelayParams
from .models.params.serialization import SerializationParams
from .models.params.zmq import ZmqSocketParams
from .models.topology import brokerless, chain, read_graphml, star, validate, write_graphml
from .run import RunResult, simulate
from .scenario import Scenario, load_scenario
from .sim.distributions import Constant, Empirical, Exponential, Gamma, LogNormal, Shifted, Uniform, parse_distribution
from .sim.errors import ConfigError

__all__ = [
    "__version__",
    # running
    "simulate",
    "RunResult",
    "load_scenario",
    "Scenario",
    "ConfigError",
    # topology builders and files
    "star",
    "chain",
    "brokerless",
    "validate",
    "read_graphml",
    "write_graphml",
    # parameters
    "BrokerParams",
    "LinkParams",
    "PublisherParams",
    "SubscriberParams",
    "RelayParams",
    "BridgeParams",
    "DiskParams",
    "SerializationParams",
    "ZmqSocketParams",
    "Provenance",
    # distributions
    "Constant",
    "Exponential",
    "Uniform",
    "LogNormal",
    "Gamma",
    "Empirical",
    "Shifted",
    "parse_distribution",
    # loads
    "Trace",
]
