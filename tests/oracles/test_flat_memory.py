"""With ``record: stream`` what a run keeps does not grow with its length (issue 12).

Each case runs at ``T`` and ``4 T`` simulated seconds in chunks of a few
thousand publications (so both runs span many chunks), and the test counts
what the finished driver still holds: the bytes of every NumPy array and
eight bytes per element of every list, dict, set and deque reachable from
it (stations, disciplines, sources, the sink, the cycle solvers). Not RSS
(noisy) and not time: a per-message structure kept from chunk to chunk grows
by at least a byte per message, twice the bound. Measured (seeded, so
deterministic): the ILDM, priority and QoS cases keep the same bytes to
within 0.7 KB at both lengths; the star's publishers' look-ahead buffers of
drawn arrivals differ by 7.6 KB (0.1 byte per extra message, and not growing:
their size depends on where the last chunk ended).
"""

from __future__ import annotations

import collections
import gc
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from pubsim.scenario import parse_scenario

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
CHUNK = 2_000
GROWTH_BYTES_PER_MESSAGE = 0.5  # a leak of one bool per published message is twice this


def _qos_window(data):
    """QoS 1 and 2 publishers with windows of 1 on a lossy link, dashboards with windows of 4."""
    topo = data["topology"]
    pubs, subs = topo["publishers"][0], topo["subscribers"][0]
    topo["publishers"] = [
        {**pubs, "name": f"q{q}-sensor{{i}}", "count": 15, "qos": q, "inflight_messages": 1} for q in (1, 2)
    ]
    topo["subscribers"] = [{**subs, "name": f"dash-q{q}", "count": 1, "qos": q, "inflight_messages": 4} for q in (1, 2)]


def _star(data):
    """A small star past saturation: exponential broker, drops at a 200-message buffer, fan-out 3."""
    data.clear()
    data.update(
        name="star",
        seed=3,
        run={"duration": "1s"},
        topology={
            "builder": "star",
            "protocol": "none",
            "broker": {"ingress_cost_s": {"dist": "exponential", "mean": "1ms"}, "queue_messages": 200},
            "link": {"latency_s": "1ms", "bandwidth_Bps": 12.5e6},
            "publishers": [{"name": "p{i}", "count": 10, "topics": ["t"], "rate_per_s": 120.0}],
            "subscribers": [{"name": "s{i}", "count": 3, "subscriptions": ["t"]}],
        },
    )


# name: (scenario file, T in simulated s, change to its YAML data)
CASES = {
    "star": ("quickstart.yaml", 20.0, _star),
    "ildm_tree_sf": ("ildm/placement_b_sf.yaml", 8.0, None),
    "ildm_tree_pf": ("ildm/placement_c_pf.yaml", 8.0, None),
    "priority": ("priority_channels.yaml", 1.0, None),
    "qos_window": ("qos_lossy_link.yaml", 60.0, _qos_window),
}


def _run(name, duration_s):
    path, _, change = CASES[name]
    data = yaml.safe_load((EXPERIMENTS / path).read_text())
    if change is not None:
        change(data)
    scenario = parse_scenario(data, base_dir=(EXPERIMENTS / path).parent)
    return scenario.simulate(
        duration_s=duration_s, warmup_s=0.1 * duration_s, record="stream", driver="batch", chunk_messages=CHUNK
    )


_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType)


def retained_bytes(root) -> int:
    """Bytes of the NumPy arrays and 8 per container element reachable from ``root`` (each counted once)."""
    seen, stack, total = set(), [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE) or type(obj).__module__.startswith(("numba", "networkx")):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj if obj.base is None else obj.base
            if base is obj:
                total += obj.nbytes
            elif isinstance(base, np.ndarray):
                stack.append(base)
            continue
        if isinstance(obj, (list, tuple, dict, set, frozenset, collections.deque)):
            total += 8 * len(obj)
        stack.extend(gc.get_referents(obj))
    return total


def _published(result):
    return int(result.sink._series["published"].sum())


@pytest.mark.parametrize("name", list(CASES))
def test_what_a_streaming_run_keeps_is_bounded_in_its_length(name):
    t = CASES[name][1]
    short, long = _run(name, t), _run(name, 4 * t)
    extra_messages = _published(long) - _published(short)
    assert extra_messages > 10 * CHUNK  # both runs span many chunks; the long one many more
    kept_short, kept_long = retained_bytes(short.driver), retained_bytes(long.driver)
    assert kept_long - kept_short < GROWTH_BYTES_PER_MESSAGE * extra_messages, (kept_short, kept_long, extra_messages)


def test_retained_bytes_sees_a_per_message_leak():
    """The measure itself: a list holding one array per chunk counts their bytes."""

    class Holder:
        def __init__(self, n):
            self.kept = [np.zeros(CHUNK, dtype=bool) for _ in range(n)]
            self.view = self.kept[0][:10]

    assert retained_bytes(Holder(40)) - retained_bytes(Holder(10)) == 30 * (CHUNK + 8)
