"""Figures of a study (matplotlib Figure objects; saving is the caller's).

Inputs are the tidy frames a study stores (:mod:`pubsim.study` loaders):
summary rows per (point, replication), latency quantiles, station records
and throughput series, each carrying ``point_id`` and ``replication``.
"""

from __future__ import annotations

import numpy as np

from .ci import with_ci
from .run_figures import plt, style_latency_axes, throughput

__all__ = ["latency_cdfs", "load_curves", "station_load", "series_over_time", "tree_traffic", "throughput"]


def _label(labels, key):
    return str(labels.get(key, key)) if labels else str(key)


def latency_cdfs(latency, labels=None, *, ci=True, confidence=0.95, ax=None):
    """Latency CDFs (the latency axis as :func:`style_latency_axes` sets it), one line per point.

    Parameters
    ----------
    latency : pandas.DataFrame
        ``point_id, replication, quantile, latency_s``.
    labels : dict, optional
        ``point_id -> legend label``; points absent from it are not drawn
        when it is given.
    ci : bool
        Shade the confidence band of the latency at each quantile over the
        replications (Student t; drawn when there are >= 2).
    """
    fig, ax = plt.subplots(figsize=(6.5, 4)) if ax is None else (ax.figure, ax)
    keep = latency if labels is None else latency[latency["point_id"].isin(list(labels))]
    table = with_ci(keep, ["point_id", "quantile"], ["latency_s"], confidence)
    for pid, grp in table.groupby("point_id", sort=False):
        grp = grp.sort_values("quantile")
        x = grp["latency_s_mean"].to_numpy() * 1e3
        ok = x > 0
        (line,) = ax.plot(x[ok], grp["quantile"].to_numpy()[ok], label=_label(labels, pid))
        hw = grp["latency_s_hw"].to_numpy() * 1e3
        if ci and np.isfinite(hw).any():
            lo = np.clip(x - hw, x[ok].min() if ok.any() else 0, None)
            ax.fill_betweenx(
                grp["quantile"].to_numpy()[ok], lo[ok], (x + hw)[ok], color=line.get_color(), alpha=0.2, linewidth=0
            )
    style_latency_axes(ax)
    fig.tight_layout()
    return fig


def _configs(df, by):
    return df.groupby(list(by), sort=True, dropna=False) if by else [("all", df)]


def load_curves(summary, by, *, load_col="offered_per_s", knees=None, confidence=0.95):
    """Throughput (ingress, egress / sp-ratio) and loss against offered load.

    The loss panel also shows ``1 - delivery_ratio`` (dotted): the share of
    owed copies not delivered in the window, which shows the overload of a
    broker that holds publishers back (back-pressure) instead of dropping.

    One colour per configuration (``by`` columns); error bars are confidence
    half-widths over replications; a dashed vertical line marks each
    configuration's last sustainable load (``knees`` from
    :func:`pubsim.analysis.knees`).
    """
    df = summary.assign(
        egress_per_pub_s=summary["egress_per_s"] / summary["sp_ratio"], shortfall=1.0 - summary["delivery_ratio"]
    )
    fig, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(12, 4.2))
    by = list(by)
    for key, grp in _configs(df, by):
        label = ", ".join(map(str, key if isinstance(key, tuple) else (key,)))
        t = with_ci(
            grp, ["point_id"], [load_col, "ingress_per_s", "egress_per_pub_s", "loss_rate", "shortfall"], confidence
        ).sort_values(f"{load_col}_mean")
        x = t[f"{load_col}_mean"]
        line = ax_t.errorbar(
            x,
            t["egress_per_pub_s_mean"],
            yerr=t["egress_per_pub_s_hw"].fillna(0),
            marker="o",
            label=f"{label} egress / sp",
        )[0]
        ax_t.plot(x, t["ingress_per_s_mean"], ls=":", marker=".", color=line.get_color(), label=f"{label} ingress")
        ax_l.errorbar(
            x, t["loss_rate_mean"], yerr=t["loss_rate_hw"].fillna(0), marker="o", color=line.get_color(), label=label
        )
        ax_l.plot(x, t["shortfall_mean"].clip(lower=0), ls=":", color=line.get_color())
        if knees is not None and by:
            k = knees
            for col, v in zip(by, key if isinstance(key, tuple) else (key,)):
                k = k[k[col] == v]
            if len(k) and np.isfinite(k["last_sustainable_per_s"].iloc[0]):
                for ax in (ax_t, ax_l):
                    ax.axvline(k["last_sustainable_per_s"].iloc[0], color=line.get_color(), ls="--", alpha=0.7)
    lo, hi = df[load_col].min(), df[load_col].max()
    log = lo > 0 and hi / lo > 20  # configurations of very different capacity
    ax_t.plot([lo if log else 0, hi], [lo if log else 0, hi], "k:", lw=0.8, label="offered")
    for ax, ylabel in ((ax_t, "messages per second"), (ax_l, "loss rate")):
        if log:
            ax.set_xscale("log")
            if ax is ax_t:
                ax.set_yscale("log")
        ax.set_xlabel("offered load (msg/s)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    ax_t.set_title("throughput (dashed: last sustainable load)")
    ax_l.set_title("loss (solid); 1 - delivery ratio (dotted)")
    ax_t.legend(fontsize="small")
    ax_l.legend(fontsize="small")
    fig.tight_layout()
    return fig


def station_load(stations, summary, by, *, roles=("broker",), load_col="offered_per_s"):
    """Utilization and mean queue length of stations against offered load.

    Station records are window averages (utilization = busy time / (workers
    x window); ``mean_waiting`` = time-average of waiting messages), so
    this plots one point per study point, averaged over replications.
    """
    keys = ["point_id", "replication"]
    st = stations[stations["role"].isin(roles)].merge(summary[keys + list(by) + [load_col]], on=keys)
    fig, (ax_u, ax_q) = plt.subplots(1, 2, figsize=(12, 4.2))
    for key, grp in _configs(st, list(by) + ["station"]):
        label = ", ".join(map(str, key if isinstance(key, tuple) else (key,)))
        t = grp.groupby("point_id")[[load_col, "utilization", "mean_waiting"]].mean().sort_values(load_col)
        ax_u.plot(t[load_col], t["utilization"], marker="o", label=label)
        ax_q.plot(t[load_col], t["mean_waiting"], marker="o", label=label)
    ax_u.set_ylabel("utilization")
    ax_q.set_ylabel("mean waiting messages")
    ax_q.set_yscale("symlog", linthresh=1.0)
    lo, hi = st[load_col].min(), st[load_col].max()
    for ax in (ax_u, ax_q):
        if lo > 0 and hi / lo > 20:
            ax.set_xscale("log")
        ax.set_xlabel("offered load (msg/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def series_over_time(series, labels=None, *, window=None):
    """Published and delivered messages per second over time, per point
    (first replication); one panel, solid delivered, dotted published."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    df = series if labels is None else series[series["point_id"].isin(list(labels))]
    for pid, grp in df.groupby("point_id", sort=False):
        grp = grp[grp["replication"] == grp["replication"].min()]
        (line,) = ax.plot(grp["time_s"], grp["delivered_per_s"], label=f"{_label(labels, pid)} delivered")
        ax.plot(grp["time_s"], grp["published_per_s"], ls=":", color=line.get_color())
    if window is not None:
        ax.axvspan(*window, color="grey", alpha=0.1, label="measurement window")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("messages per second (dotted: published)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def broker_edges(stations):
    """Station names of links whose two ends are brokers (``link:a->b``)."""
    brokers = {s.split(":", 1)[1] for s in stations.loc[stations["role"] == "broker", "station"]}
    out = []
    for name in stations.loc[stations["role"] == "link", "station"].unique():
        a, _, b = name.split(":", 1)[1].partition("->")
        if a in brokers and b in brokers:
            out.append(name)
    return out


def tree_traffic(stations, *, window_s=1.0, by=None):
    """Traffic per broker and per inter-broker link of a broker tree.

    Parameters
    ----------
    stations : pandas.DataFrame
        Station records (``station, role, arrivals, served``) of one run, or
        several runs told apart by the ``by`` column (one bar colour each).
    window_s : float
        Window length, s: bars show messages per second (1: counts).
    by : str, optional
        Column naming the configuration (e.g. ``forwarding``).
    """
    edges = broker_edges(stations)
    keep = stations[(stations["role"] == "broker") | stations["station"].isin(edges)]
    groups = [(None, keep)] if by is None else list(keep.groupby(by, sort=True))
    names = list(dict.fromkeys(keep["station"]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(names) + 2), 4))
    width = 0.8 / len(groups)
    x = np.arange(len(names))
    for i, (key, grp) in enumerate(groups):
        per = grp.groupby("station")["arrivals"].mean().reindex(names).fillna(0) / window_s
        ax.bar(x + i * width - 0.4 + width / 2, per.to_numpy(), width, label=str(key) if by else "arrivals")
    ax.set_xticks(x)
    ax.set_xticklabels([n.split(":", 1)[1] for n in names], rotation=45, ha="right")
    ax.set_ylabel("messages per second" if window_s != 1.0 else "messages")
    ax.set_title("traffic per broker and inter-broker link")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
