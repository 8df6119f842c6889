"""Write the ILDM client-placement scenarios of SYSTEMS.md §3 (Banno et al. 2017).

    python experiments/ildm/generate.py      # rewrites placement_{a,b,c,d}_{pf,sf}.yaml here

and ``placement_b_sf_table.yaml``: placement B under SF with the node's
inter-subscription table matching charged (``table_entry_cost_s``,
``table_match_cost_s``; assumed values, see ``TABLE_COSTS``), so SF and PF
differ at the nodes even where their copies are the same.

5 topics, each with 10 publishers and 10 subscribers (sp-ratio 10), 5
broker+node pairs in a chain, 20 clients per node (A: all on one broker with
one node); payload 32 bytes, QoS 0; plus the latency topic: a publisher at one
end of the chain sends once a second, one latency subscriber at every node.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # run as a script from anywhere
NODES = 5
TOPICS = 5
RATE = "50/s"  # per publisher: an assumption (the study searched for the limit)

PLACEMENT_TEXT = {
    "a": "A: one broker with one node (overhead of the node alone)",
    "b": "B (no locality): every node has 2 publishers and 2 subscribers of every topic",
    "c": "C (high locality): every node has the 10 publishers and 10 subscribers of one topic",
    "d": "D (low locality): every node has 8 pubs + 8 subs of its own topic and 1 pub + 1 sub of two other topics",
}

CLIENT_PROV = {
    "source": "publication",
    "reference": "Banno et al. 2017 client placement (SYSTEMS.md §3)",
    "note": f"placement, topic counts and 32-byte payload from SYSTEMS.md; Poisson arrivals at {RATE} "
    "per publisher assumed",
}


def relay_params():
    """Relay costs derived from the calibrated Mosquitto preset (stated assumption)."""
    from pubsim.models import presets
    from pubsim.sim.units import parse_duration_s

    m = presets.load("broker", "mosquitto")
    ingress, delivery = (parse_duration_s(m[k], k) for k in ("ingress_cost_s", "delivery_cost_s"))
    us = lambda s: f"{s * 1e6:.4g}us"  # noqa: E731
    return {
        "relay_cost_s": us(ingress + delivery),
        "forward_cost_s": us(delivery),
        "control_cost_s": us(delivery),
        "hop_qos": 0,
        "provenance": {
            "source": "assumption",
            "reference": "pubsim ILDM model (models/mechanisms/ildm/relay.py)",
            "note": "the interworking node is an MQTT endpoint like the broker: per PUBLISH it pays the calibrated "
            f"Mosquitto ingress + one delivery ({us(ingress)} + {us(delivery)}, "
            "models/presets/calibrated/mosquitto.yaml), per forwarded copy or control packet one delivery; "
            "not measured",
        },
    }


#: Subscription Flooding's matching at the node (not measured: assumptions, stated in the provenance).
TABLE_COSTS = {
    "table_entry_cost_s": "0.1us",
    "table_match_cost_s": "0.5us",
    "charge_inbound_acks": True,
}
TABLE_NOTE = (
    "; SF table matching (Banno et al. 2017: a PUBLISH is forwarded only to neighbours that inter-subscribed to "
    "its topic, so the node matches it against their inter-subscriptions): 0.1 us per installed inter-subscription "
    "scanned (a short-string comparison on one core, assumed) and 0.5 us per matching one (recording the forward "
    "target, assumed); not measured. Inbound per-hop acks charged at the receiving node (none at QoS 0)"
)


def table_relay_params():
    """Relay costs of :func:`relay_params` plus SF table matching (assumed values)."""
    out = {**relay_params(), **TABLE_COSTS}
    out["provenance"] = {**out["provenance"], "note": out["provenance"]["note"] + TABLE_NOTE}
    return out


BRIDGE = {
    "preset": "gigabit-lan",
    "latency_s": "5ms",
    "provenance": {
        "source": "assumption",
        "reference": "pubsim ILDM scenarios",
        "note": "nodes at different edge sites of a metro network: 5 ms one-way between neighbouring nodes assumed; 1 Gbit/s, "
        "IEEE 802.3 + IPv4 + TCP framing (78 bytes) as gigabit-lan",
    },
}


def groups(kind):
    """Client groups [(name pattern, count, topic pattern, node pattern)] of the 50 publishers
    (subscribers are placed alike); ``{i}`` expressions as in scenario files."""
    if kind == "a":
        return [("{i}", 50, "ildm/t{i//10}", "n0")]
    if kind == "b":
        return [("{i}", 50, "ildm/t{i%5}", "n{i//10}")]
    if kind == "c":
        return [("{i}", 50, "ildm/t{i//10}", "n{i//10}")]
    own = [("own{i}", 40, "ildm/t{i//8}", "n{i//8}")]
    return own + [(f"x{n}-{k}", 1, f"ildm/t{(n + k) % TOPICS}", f"n{n}") for n in range(NODES) for k in (1, 2)]


def scenario(kind, forwarding, table=False):
    nodes = 1 if kind == "a" else NODES
    pubs, subs = [], []
    for name, count, topic, node in groups(kind):
        pubs.append(
            {
                "name": f"pub-{name}",
                "count": count,
                "broker": node,
                "topics": [topic],
                "arrival": "poisson",
                "rate_per_s": RATE,
                "size_bytes": "32B",
                "provenance": CLIENT_PROV,
            }
        )
        subs.append(
            {"name": f"sub-{name}", "count": count, "broker": node, "subscriptions": [topic], "processing_s": "0s"}
        )
    pubs.append(
        {
            "name": "latency-pub",
            "broker": "n0",
            "topics": ["ildm/latency"],
            "arrival": "constant",
            "rate_per_s": "1/s",
            "size_bytes": "32B",
            "provenance": CLIENT_PROV,
        }
    )
    subs.append(
        {
            "name": "latency-sub{i}",
            "count": nodes,
            "broker": "n{i}",
            "subscriptions": ["ildm/latency"],
            "processing_s": "0s",
        }
    )
    mode = {"pf": "flood", "sf": "subscription"}[forwarding]
    variant = " with the node's inter-subscription table matching charged" if table else ""
    return {
        "name": f"ildm-placement-{kind}-{forwarding}" + ("-table" if table else ""),
        "description": f"ILDM {forwarding.upper()} ({mode} forwarding){variant}, placement {PLACEMENT_TEXT[kind]}; "
        "5 topics x 10 publishers x 10 subscribers, 32-byte payload, QoS 0, latency topic "
        "(SYSTEMS.md §3)",
        "seed": 2017,
        "replications": 1,
        "run": {"duration": "5s", "warmup": "1s", "cooldown": "0s", "record": "full"},
        "topology": {
            "builder": "chain",
            "protocol": "mqtt",
            "forwarding": mode,
            "brokers": [
                {
                    "name": "n{i}",
                    "count": nodes,
                    "preset": "mosquitto",
                    "relay": table_relay_params() if table else relay_params(),
                }
            ],
            "bridge": BRIDGE,
            "link": {"preset": "gigabit-lan"},
            "publishers": pubs,
            "subscribers": subs,
        },
    }


def main():
    for kind in "abcd":
        for fwd in ("pf", "sf"):
            path = HERE / f"placement_{kind}_{fwd}.yaml"
            text = f"# Generated by experiments/ildm/generate.py: do not edit by hand.\n# {PLACEMENT_TEXT[kind]}\n"
            path.write_text(text + yaml.safe_dump(scenario(kind, fwd), sort_keys=False, width=110, allow_unicode=True))
    path = HERE / "placement_b_sf_table.yaml"
    text = f"# Generated by experiments/ildm/generate.py: do not edit by hand.\n# {PLACEMENT_TEXT['b']}\n"
    doc = scenario("b", "sf", table=True)
    path.write_text(text + yaml.safe_dump(doc, sort_keys=False, width=110, allow_unicode=True))


if __name__ == "__main__":
    main()
