"""``pubsim presets``: list the shipped presets with their provenance.

``pubsim presets [--kind broker|link|serialization|socket|disk|host|store]`` prints a
compact table, one row per preset (name, kind, source, where it comes from,
the first sentence of its note), placeholders in red; ``--wide`` adds the
family, reference, date and key parameters; ``--long NAME`` prints one
preset in full. User presets (:func:`pubsim.models.presets.user_dir`) are
listed with their file; one that shadows a built-in name says so.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ...sim.errors import ConfigError
from . import kinds, load, names, origin
from .families import family_of

__all__ = ["add_commands", "preset_rows"]

_KEYS = {
    "broker": (
        "workers",
        "ingress_cost_s",
        "delivery_cost_s",
        "per_byte_cost_s",
        "idle_wakeup_cost_s",
        "topic_syntax",
        "overflow",
    ),
    "link": ("latency_s", "jitter_s", "bandwidth_Bps", "overhead_bytes", "jitter_on"),
    "serialization": (
        "format",
        "size_ratio",
        "encode_cost_s",
        "encode_cost_per_byte_s",
        "decode_cost_s",
        "decode_cost_per_byte_s",
    ),
    "socket": ("socket_type", "send_cost_s", "copy_cost_s", "per_byte_cost_s", "sndhwm", "batch_max_bytes"),
    "disk": ("sync_latency_s", "bandwidth_Bps", "batch_max_messages", "read_bandwidth_Bps", "op_latency_s"),
    "store": ("product", "message_ops", "overhead_bytes", "sync", "sync_delay_s", "large_message_bytes", "ack_bytes"),
    "host": ("cores", "speed", "card_Bps", "loopback_latency_s"),
}


def preset_rows(kind=None):
    """One dict per preset: name, kind, family, source, reference, date, parameters, note."""
    rows = []
    for k in [kind] if kind else kinds():
        for name in names(k):
            spec = load(k, name)
            prov = spec.get("provenance") or {}
            params = {key: spec[key] for key in _KEYS.get(k, ()) if key in spec}
            family, example = family_of(name) if k == "broker" else ("", "")
            rows.append(
                {
                    "name": name,
                    "kind": k,
                    "origin": origin(k, name),
                    "family": f"{family}: {example}" if family else "",
                    "source": str(prov.get("source", "")),
                    "reference": str(prov.get("reference", "")),
                    "date": str(prov.get("date", "")),
                    "parameters": params,
                    "note": " ".join(str(prov.get("note", "")).split()),
                }
            )
    return rows


def _short(params):
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _table(rows):
    table = Table(title="presets and provenance (placeholders in red: estimates, not calibrated)")
    # short identifiers are never cut, so a name can be copied from the table
    table.add_column("name", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("family", overflow="fold")
    table.add_column("source", no_wrap=True)
    for col in ("reference", "date", "parameters", "note"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["name"],
            r["kind"],
            r["family"],
            r["source"],
            escape(r["reference"]),
            r["date"],
            escape(_short(r["parameters"])),
            escape(r["note"]),
            style="bold red" if r["source"] == "placeholder" else None,
        )
    return table


def _first_sentence(text, limit=90):
    head = text.split(". ")[0].rstrip(".")
    return head if len(head) <= limit else head[: limit - 1] + "…"


def _compact(rows):
    table = Table(title="presets (placeholders in red: estimates, not calibrated; --long NAME for one in full)")
    for col in ("name", "kind", "source", "from"):
        table.add_column(col, no_wrap=True)
    table.add_column("note", overflow="ellipsis", no_wrap=True)
    for r in rows:
        table.add_row(
            r["name"],
            r["kind"],
            r["source"],
            escape(r["origin"]),
            escape(_first_sentence(r["note"])),
            style="bold red" if r["source"] == "placeholder" else None,
        )
    return table


def _accuracy_rows(acc):
    """``(field, text)`` rows of a profile's ``provenance.accuracy`` (see pubsim.models.params.accuracy)."""
    if not isinstance(acc, dict):
        return [("provenance.accuracy", str(acc))]
    rows = [("provenance.accuracy", f"{acc.get('basis', '?')} ({acc.get('reference', '')})")]
    for split in ("train", "holdout"):
        errors = acc.get(split)
        if isinstance(errors, dict):
            parts = [
                f"{metric.replace('_error_pct', '')} {e['low']:+g}..{e['high']:+g} % (median |e| {e['median_abs']:g} %)"
                for metric, e in errors.items()
                if isinstance(e, dict)
            ]
            rows.append((f"  {split} ({errors.get('configurations', '?')} configurations)", ", ".join(parts)))
    fit = acc.get("fit")
    if isinstance(fit, dict):
        rows.append(("  fit", ", ".join(f"{k} {v}" for k, v in fit.items())))
    ranges = acc.get("fitted_range") or {}
    rows.append(("  fitted range", ", ".join(f"{k} {lo:g}..{hi:g}" for k, (lo, hi) in ranges.items())))
    return rows


def _one(kind, name):
    found = [k for k in ([kind] if kind else kinds()) if name in names(k)]
    if not found:
        every = sorted(n for k in ([kind] if kind else kinds()) for n in names(k))
        raise ConfigError("--long", name, f"one of {every}")
    out = Table(title=f"preset {name}", show_header=False)
    out.add_column("field")
    out.add_column("value", overflow="fold")
    for k in found:
        spec = load(k, name)
        out.add_row("kind", k)
        out.add_row("from", origin(k, name))
        if k == "broker" and family_of(name)[0]:
            out.add_row("family", ": ".join(family_of(name)))
        for key, value in spec.items():
            if key == "provenance":
                for pk, pv in (value or {}).items():
                    if pk == "accuracy":
                        for field, text in _accuracy_rows(pv):
                            out.add_row(field, escape(text))
                        continue
                    out.add_row(
                        f"provenance.{pk}",
                        escape(" ".join(str(pv).split())),
                        style="bold red" if pk == "source" and pv == "placeholder" else None,
                    )
                if k == "broker" and "accuracy" not in (value or {}):
                    out.add_row("provenance.accuracy", "none: no validation, so its predictions have no error band")
            else:
                out.add_row(key, escape(str(value)))
    return out


def _presets(args, console):
    if args.kind is not None and args.kind not in kinds():
        raise ConfigError("--kind", args.kind, f"one of {kinds()}")
    if args.long:
        console.print(_one(args.kind, args.long))
    elif args.wide:
        console.print(_table(preset_rows(args.kind)))
    else:
        console.print(_compact(preset_rows(args.kind)))
    return 0


def add_commands(sub):
    """Register ``presets`` on the ``pubsim`` subcommand parser."""
    p = sub.add_parser("presets", help="list presets with their provenance")
    p.add_argument("--kind", help=f"only presets of this kind ({', '.join(kinds())})")
    p.add_argument("--long", "--name", dest="long", metavar="NAME", help="show one preset in full")
    p.add_argument("--wide", action="store_true", help="every column: family, reference, date, key parameters")
    p.set_defaults(func=_presets)
