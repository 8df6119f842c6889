"""The parameter table of a topology: one row per component, with provenance."""

from __future__ import annotations

from .. import topology as T
from ..params.mapping import to_mapping

__all__ = ["parameter_table"]


def parameter_table(g):
    """One row per component: kind, parameters and their provenance.

    Parameters
    ----------
    g : networkx.Graph
        A topology.

    Returns
    -------
    list of dict
        ``component``, ``kind``, ``parameters`` (a mapping), ``provenance``,
        ``placeholder``; relays, bridges, disks and serialization get rows of their own.
    """
    rows = []
    for n, data in g.nodes(data=True):
        params = data[T.PARAMS]
        rows.append(
            {
                "component": str(n),
                "kind": data[T.KIND],
                "parameters": to_mapping(params),
                "provenance": str(params.provenance),
                "placeholder": params.provenance.is_placeholder,
            }
        )
        if data.get(T.RELAY) is not None:
            rows.append(_row(f"relay:{n}", "relay", data[T.RELAY]))
        disk = getattr(params, "disk", None)  # a broker's disk carries its own provenance
        if disk is not None:
            rows.append(
                {
                    "component": f"{n}.disk",
                    "kind": "disk",
                    "parameters": to_mapping(disk),
                    "provenance": str(disk.provenance),
                    "placeholder": disk.provenance.is_placeholder,
                }
            )
        codec = getattr(params, "serialization", None)
        if codec is not None:
            rows.append(
                {
                    "component": f"{n}.serialization",
                    "kind": "serialization",
                    "parameters": to_mapping(codec),
                    "provenance": str(codec.provenance),
                    "placeholder": codec.provenance.is_placeholder,
                }
            )
    for u, v, data in g.edges(data=True):
        params = data[T.PARAMS]
        rows.append(
            {
                "component": f"{u}<->{v}",
                "kind": "link",
                "parameters": to_mapping(params),
                "provenance": str(params.provenance),
                "placeholder": params.provenance.is_placeholder,
            }
        )
        if data.get(T.BRIDGE) is not None:
            rows.append(_row(f"bridge:{u}<->{v}", "bridge", data[T.BRIDGE]))
    return rows


def _row(component, kind, params):
    return {
        "component": component,
        "kind": kind,
        "parameters": to_mapping(params),
        "provenance": str(params.provenance),
        "placeholder": params.provenance.is_placeholder,
    }
