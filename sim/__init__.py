"""pubsim.sim: the engine kernel."""

from ._jitcache import configure as _configure_jit_cache

_configure_jit_cache()
