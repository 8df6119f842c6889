"""``pubsim trace inspect|convert``: look at a trace, write it in the common Parquet form.

Wire into ``sim/cli.py`` with::

    from pubsim.models.loads.cli import add_commands as trace_commands
    trace_commands(sub)

Handlers follow the ``func(args, console)`` convention of ``pubsim.cli.main``
(``console`` may be None: plain ``print``) and return an exit status; bad
input raises :class:`~pubsim.sim.errors.ConfigError`, which ``main`` prints as one line.

Readable inputs: a saved trace (``.parquet``, ``.pq``, ``.csv``, ``.csv.gz``),
CampusIoT NDJSON (``.ndjson``, ``.ndjson.gz``, ``.json.gz``), MQTT captures
(``.pcap``, ``.pcapng``, ``.cap``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...sim.errors import ConfigError
from .readers import read_campusiot, read_mqtt_pcap
from .trace import Trace

__all__ = ["add_commands", "load_any", "inspect_command", "convert_command", "plot_trace", "format_summary"]


def add_commands(subparsers):
    """Add ``trace inspect`` and ``trace convert`` to an argparse subparsers object."""
    trace = subparsers.add_parser("trace", help="inspect and convert load traces")
    tsub = trace.add_subparsers(dest="trace_command", required=True)
    ins = tsub.add_parser("inspect", help="print a trace's summary (and plot it)")
    ins.add_argument("file", help="trace file: .parquet, .csv, CampusIoT .ndjson.gz, MQTT .pcap/.pcapng")
    ins.add_argument("--plot", metavar="OUT.png", help="plot message rate and size over time")
    ins.add_argument("--json", action="store_true", help="print the summary as JSON")
    ins.set_defaults(func=inspect_command)
    conv = tsub.add_parser("convert", help="write a trace in the common Parquet (or CSV) form")
    conv.add_argument("input", help="trace file (as for inspect)")
    conv.add_argument("output", help="OUT.parquet (or .csv)")
    conv.set_defaults(func=convert_command)
    return trace


def load_any(path):
    """(Trace, reader summary or None) of any readable trace file, chosen by its suffix."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(str(path), "missing", "an existing trace file")
    name = path.name.lower()
    if name.endswith((".parquet", ".pq", ".csv", ".csv.gz")):
        return Trace.load(path), None
    if name.endswith((".ndjson", ".ndjson.gz", ".json.gz", ".jsonl", ".jsonl.gz")):
        return read_campusiot(path)
    if name.endswith((".pcap", ".pcapng", ".cap")):
        return read_mqtt_pcap(path)
    raise ConfigError(str(path), path.suffix, "a .parquet, .csv, .ndjson.gz, .pcap or .pcapng file")


def _fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def format_summary(summary: dict) -> str:
    """The summary of :meth:`Trace.summary` as readable lines."""
    lines = [
        f"devices    {summary['devices']}    topics {summary['topics']}",
        f"messages   {summary['messages']}    bytes {summary['bytes_total']}",
        f"span       {summary['span_s']:.6g} s ({summary['span_s'] / 86400:.3g} days)",
        f"mean rate  {summary['mean_rate_per_s']:.6g} msg/s",
    ]
    for key, label in (("size_bytes", "size (B)"), ("gap_s", "gap (s)")):
        q = summary.get(key) or {}
        lines.append(f"{label:<10} " + "  ".join(f"{k} {_fmt(v)}" for k, v in q.items()))
    hourly = summary.get("rate_by_hour_per_s") or []
    if hourly:
        lines.append("rate by hour of day (msg/s, UTC for recorded traces):")
        for h0 in (0, 12):
            lines.append("  " + "  ".join(f"{h:02d}h {_fmt(hourly[h])}" for h in range(h0, h0 + 12)))
    for col in ("qos_counts", "retain_counts", "priority_counts"):
        if col in summary:
            lines.append(f"{col[:-7]:<10} {summary[col]}")
    return "\n".join(lines)


def _say(console, text):
    if console is None:
        print(text)
    else:
        console.print(text, markup=False, highlight=False)


def _say_report(console, report):
    """The reader's summary (counts of skipped records per reason) and its first skipped records."""
    if report is None:
        return
    _say(console, str(report))
    first = report.first_skipped()
    if first:
        _say(console, first)


def inspect_command(args, console=None):
    """``trace inspect FILE [--plot OUT.png] [--json]``."""
    trace, report = load_any(args.file)
    summary = trace.summary()
    if getattr(args, "json", False):
        out = {"trace": summary}
        if report is not None:
            out["reader"] = report.as_dict()
        _say(console, json.dumps(out, indent=2, default=str))
    else:
        _say(console, f"{args.file}")
        _say_report(console, report)
        _say(console, format_summary(summary))
    if getattr(args, "plot", None):
        plot_trace(trace, args.plot)
        _say(console, f"plot written to {args.plot}")
    return 0


def convert_command(args, console=None):
    """``trace convert IN OUT.parquet``."""
    trace, report = load_any(args.input)
    out = Path(args.output)
    if not out.name.lower().endswith((".parquet", ".pq", ".csv", ".csv.gz")):
        raise ConfigError(str(out), out.suffix, "an output ending in .parquet (or .csv)")
    trace.save(out)
    _say_report(console, report)
    _say(console, f"{len(trace)} messages from {trace.frame['publisher'].nunique()} publishers written to {out}")
    return 0


def plot_trace(trace: Trace, path, bins=200):
    """Message rate and size over time (two panels) into ``path`` (PNG); no pyplot, no backend chosen."""
    # optional heavy dependency: matplotlib, only when a trace is plotted
    from matplotlib.figure import Figure

    t = trace.t_s
    fig = Figure(figsize=(9, 5.5), constrained_layout=True)
    ax_rate, ax_size = fig.subplots(2, 1, sharex=True)
    if len(t):
        span = max(float(t[-1]), 1e-9)
        unit, scale = ("days", 86400.0) if span > 3 * 86400 else (("h", 3600.0) if span > 3 * 3600 else ("s", 1.0))
        edges = np.linspace(0.0, span * (1 + 1e-12), bins + 1)
        counts, _ = np.histogram(t, edges)
        width = edges[1] - edges[0]
        centres = (edges[:-1] + edges[1:]) / 2 / scale
        ax_rate.plot(centres, counts / width, drawstyle="steps-mid")
        idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
        sizes = trace.size_bytes.astype(float)
        sums = np.bincount(idx, sizes, minlength=bins)
        mean = np.divide(sums, counts, out=np.full(bins, np.nan), where=counts > 0)
        step = max(1, len(t) // 20000)
        ax_size.scatter(t[::step] / scale, sizes[::step], s=2, alpha=0.3, label="messages")
        ax_size.plot(centres, mean, color="C1", label="mean per bin")
        ax_size.legend(loc="upper right")
        ax_size.set_xlabel(f"time from start ({unit})")
    ax_rate.set_ylabel("messages / s")
    ax_size.set_ylabel("size (bytes)")
    ax_rate.set_title(f"{len(t)} messages, {trace.frame['publisher'].nunique()} publishers")
    fig.savefig(path, dpi=100)
    return path
