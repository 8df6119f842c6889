"""What a load run measured: :class:`LoadResult` and its summary."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .spec import LoadSpec

__all__ = ["LoadResult"]


@dataclass
class LoadResult:
    """What one :func:`run_load` measured.

    Attributes
    ----------
    spec : LoadSpec
    offered_per_s : float
        ``spec.rate_per_s``.
    t0_ns : int
        Common start time (CLOCK_MONOTONIC ns); times in seconds below are
        relative to it.
    window_s : (float, float)
        Measurement window of send times, s after ``t0``.
    sent : numpy.ndarray
        Messages sent per publisher (whole run).
    sent_in_window : numpy.ndarray
        Messages sent per publisher with a send time in the window.
    send_windows : list of (float, float)
        First and last send time of each publisher, s after ``t0`` (NaN when
        it sent nothing).
    deliveries : pandas.DataFrame
        One row per received copy of a message sent in the window:
        ``subscriber``, ``publisher``, ``seq``, ``topic``, ``t_send_s``,
        ``t_recv_s`` (read by the subscriber's code), ``t_kernel_s`` (the
        kernel's receive time of that read, NaN where the socket gave none;
        all s after ``t0``), ``latency_s`` (from the publisher's clock read
        just before the ``sendall`` of the message's batch where known, else
        from ``t_send_s``, to ``t_kernel_s`` where known, else to
        ``t_recv_s``), ``app_latency_s`` (``t_send_s`` to ``t_recv_s``: what
        the applications see), ``send_delay_s`` (``t_send_s`` to that
        write: the publisher's own code, and any wait for the client core
        in between), ``socket_wait_s`` (the write to the kernel's transmit
        stamp of the batch's last byte: the time the broker's TCP window
        held it, NaN where unknown, :mod:`..txstamp`),
        ``client_delay_s`` (``t_recv_s - t_kernel_s``: the subscriber's own
        delay), ``stamp_exact`` (the receive stamp is this message's own, not
        a later one's read with it: :func:`_exact_stamps`), ``duplicate`` (a
        second or later copy), ``out_of_order``.
    publishers, subscribers : list of dict
        Per-client figures (batch size, lag, CPU; received, duplicates,
        out-of-order, disconnection).
    wall : dict
        Wall times, s: ``setup_s``, ``run_s``, ``drain_s``, ``total_s``.
    drain_complete : bool
        Every copy owed for every message sent (whole run) arrived before
        the drain ended.
    batch_sends : list of dict
        Per publisher (in index order): ``batch`` (messages per batch),
        ``interval_ns`` (pacing interval of its batches) and ``send_ns``
        (each batch's write: the publisher's clock read just before its
        ``sendall``, ns after ``t0``): the arrival process the generator
        really produced (:mod:`pubsim.calibration.pacing`).
    """

    spec: LoadSpec
    offered_per_s: float
    t0_ns: int
    window_s: tuple
    sent: np.ndarray
    sent_in_window: np.ndarray
    send_windows: list
    deliveries: object
    publishers: list
    subscribers: list
    wall: dict
    drain_complete: bool
    _scheduled_in_window: int = field(default=0, repr=False)
    batch_sends: list = field(default_factory=list, repr=False)

    @classmethod
    def _build(cls, spec, t0, pub_reports, sub_reports, wall, drain_complete, sub_topics):
        w0 = t0 + int(round(spec.warmup_s * 1e9))
        w1 = t0 + int(round((spec.duration_s - spec.cooldown_s) * 1e9))
        sent, in_window, send_windows, publishers, batch_sends = [], [], [], [], []
        scheduled = 0
        writes, transmits = {}, {}  # per publisher: (batch size, per-batch times)
        for r in sorted(pub_reports, key=lambda r: r["index"]):
            ts = r["batch_t_send_ns"]
            for times, key in ((writes, "batch_write_ns"), (transmits, "batch_tx_ns")):
                if r.get(key) is not None and len(r[key]) == len(ts):
                    times[r["index"]] = (r["batch"], np.asarray(r[key], dtype=np.int64))
            written = _known_or(writes[r["index"]][1], ts) if r["index"] in writes else ts
            batch_sends.append({"batch": r["batch"], "interval_ns": r["interval_ns"], "send_ns": written - t0})
            lo, hi = np.searchsorted(ts, [w0, w1], side="left")
            sent.append(r["sent"])
            in_window.append(int(hi - lo) * r["batch"])
            send_windows.append(((ts[0] - t0) / 1e9, (ts[-1] - t0) / 1e9) if len(ts) else (math.nan, math.nan))
            due = t0 + (np.arange(len(ts)) * r["interval_ns"]).astype(np.int64)
            lag = ts - due
            # batches due in the window, whether sent or not
            n_lo = math.ceil((w0 - t0) / r["interval_ns"])
            n_hi = math.ceil((w1 - t0) / r["interval_ns"])
            scheduled += (n_hi - n_lo) * r["batch"]
            publishers.append(
                {
                    "index": r["index"],
                    "batch": r["batch"],
                    "batch_interval_s": r["interval_ns"] / 1e9,
                    "sent": r["sent"],
                    "sent_in_window": in_window[-1],
                    "lag_max_s": r["lag_max_ns"] / 1e9,
                    "lag_end_s": float(lag[hi - 1]) / 1e9 if hi > 0 else math.nan,
                    "cpu_fraction": r["cpu_fraction"],
                    "runnable_fraction": r["runnable_fraction"],
                    "flushed": r["flushed"],
                    "flush_s": r["flush_s"],
                    "acks": r["acks"],
                }
            )
        frames, subscribers = [], []
        for r in sorted(sub_reports, key=lambda r: r["index"]):
            rec = r["records"]
            ts = rec["t_send_ns"].astype(np.int64)
            m = (ts >= w0) & (ts < w1)
            exact = _exact_stamps(rec["t_kernel_ns"])[m]
            sel = rec[m]
            tr = sel["t_recv_ns"].astype(np.int64)
            tk = sel["t_kernel_ns"].astype(np.int64)
            tsw = ts[m]
            twr = _batch_times(sel["pub"], sel["seq"], writes)
            ttx = _batch_times(sel["pub"], sel["seq"], transmits)
            origin = _known_or(twr, tsw)
            t_kernel_s = np.where(tk != 0, (tk - t0) / 1e9, np.nan)
            app_s = (tr - tsw) / 1e9
            send_delay_s = np.where(twr != 0, (twr - tsw) / 1e9, np.nan)
            socket_wait_s = np.where((ttx != 0) & (twr != 0), (ttx - twr) / 1e9, np.nan)
            kernel_s = np.where(tk != 0, (tk - origin) / 1e9, np.nan)
            frames.append(
                pd.DataFrame(
                    {
                        "subscriber": np.full(len(sel), r["index"], np.int32),
                        "publisher": sel["pub"].astype(np.int32),
                        "seq": sel["seq"].astype(np.int64),
                        "topic": sel["topic"].astype(np.int32),
                        "t_send_s": (tsw - t0) / 1e9,
                        "t_recv_s": (tr - t0) / 1e9,
                        "latency_s": np.where(np.isnan(kernel_s), app_s, kernel_s),
                        "t_kernel_s": t_kernel_s,
                        "app_latency_s": app_s,
                        "send_delay_s": send_delay_s,
                        "socket_wait_s": socket_wait_s,
                        "client_delay_s": np.where(tk != 0, (tr - tk) / 1e9, np.nan),
                        "stamp_exact": exact,
                        "duplicate": r["duplicate"][m],
                        "out_of_order": r["out_of_order"][m],
                    }
                )
            )
            t_recv_all = rec["t_recv_ns"].astype(np.int64)
            first = ~np.asarray(r["duplicate"], dtype=bool)
            subscribers.append(
                {
                    "index": r["index"],
                    "topics": sub_topics[r["index"]],
                    "received": len(rec),
                    # first copies received in the window, whenever sent (SYSTEMS.md §4 egress)
                    "received_in_window": int((first & (t_recv_all >= w0) & (t_recv_all < w1)).sum()),
                    "duplicates": int(r["duplicate"].sum()),
                    "out_of_order": int(r["out_of_order"].sum()),
                    "disconnected": r["disconnected"],
                    "cpu_fraction": r["cpu_fraction"],
                    "runnable_fraction": r["runnable_fraction"],
                    **{k: r.get(k, math.nan) for k in ("sleeps", "cpu_s", "counted")},
                }
            )
        deliveries = pd.concat(frames, ignore_index=True)
        return cls(
            spec=spec,
            offered_per_s=float(spec.rate_per_s),
            t0_ns=t0,
            window_s=(spec.warmup_s, spec.duration_s - spec.cooldown_s),
            sent=np.array(sent, np.int64),
            sent_in_window=np.array(in_window, np.int64),
            send_windows=send_windows,
            deliveries=deliveries,
            publishers=publishers,
            subscribers=subscribers,
            wall=dict(wall),
            drain_complete=drain_complete,
            _scheduled_in_window=scheduled,
            batch_sends=batch_sends,
        )

    def timed(self, exact: bool = True):
        """First copies of the deliveries in the window; with ``exact``, only those whose kernel receive
        stamp is their own (``stamp_exact``), when the run has any (a run without kernel stamps: all)."""
        d = self.deliveries
        first = ~d["duplicate"].to_numpy(dtype=bool)
        if exact and "stamp_exact" in d:
            own = first & d["stamp_exact"].to_numpy(dtype=bool)
            if own.any():
                return d[own]
        return d[first]

    def latencies_s(self, column: str = "latency_s", exact: bool = True) -> np.ndarray:
        """Latency of the first copy of every delivery in the window, s; with ``exact``, of those
        whose receive stamp is their own (:meth:`timed`).

        ``column``: ``"latency_s"`` (the publisher's write to the kernel's
        receive time where known), ``"app_latency_s"`` (publisher code to
        subscriber code), ``"socket_wait_s"``,
        ``"send_delay_s"`` / ``"client_delay_s"`` (the publisher's / the
        subscriber's own delay).
        """
        return self.timed(exact)[column].to_numpy()

    @property
    def latency_clock(self) -> str:
        """``"write_rx"`` when every first copy has its batch's write time and a kernel receive time,
        ``"kernel_rx"`` when every one has a receive time (latency then starts at the header's send
        time), ``"app"`` when none has, ``"mixed"`` otherwise (``latency_s`` then mixes them).
        (``"wire"``: ``data/mosquitto-wire``'s harness, from the kernel's transmit stamp.)"""
        known = ~np.isnan(self.latencies_s("client_delay_s", exact=False))
        if known.all() and known.size:
            return "write_rx" if not np.isnan(self.latencies_s("send_delay_s", exact=False)).any() else "kernel_rx"
        return "mixed" if known.any() else "app"

    def summary(self) -> dict:
        """Headline figures over the measurement window.

        ``published_in_window`` messages sent in the window (send time);
        ``expected_deliveries`` = that x fanout; ``delivered`` distinct
        (subscriber, publisher, seq) copies received; ``lost`` = expected -
        delivered; ``duplicates`` extra copies; ``ingress_rate_per_s`` =
        published in window / window; ``egress_rate_per_s`` = delivered /
        window (copies of messages SENT in the window, whenever received);
        ``egress_received_in_window_per_s`` = first copies RECEIVED in the
        window, whenever sent, / window (the egress of SYSTEMS.md §4 and of
        the simulator's summary);
        ``sustainability`` = egress / (ingress x fanout); ``delivery_ratio``
        = egress / (offered x fanout). Latency figures use first copies:
        ``latency_*`` from the publisher's write to the kernel's receive
        time where known (``latency_clock`` says which), over the
        messages whose receive stamp is their own (``stamp_exact_fraction``
        of them; ``latency_any_*`` over all, the others' stamps being a later
        message's),
        ``app_latency_*`` from the publisher code's clock read to the
        subscriber code's read, ``client_delay_*`` and ``send_delay_*`` the
        subscriber's and the publisher's own parts, ``socket_wait_*`` the
        time batches waited in the publisher's socket for the broker's TCP
        window.
        ``generator_behind``: fewer than 98 % of the messages due in the
        window were sent in it (less two batches per publisher);
        ``generator_saturated``: behind while the publishers were runnable
        (on a CPU or waiting for one) >= 90 % of their sending time, i.e. the
        generator itself could not keep up; behind but not saturated means
        the publishers were blocked by the broker (TCP back-pressure).
        ``subscriber_saturated``: a subscriber was runnable >= 90 % of the
        run.
        """
        span = self.window_s[1] - self.window_s[0]
        d = self.deliveries
        dup = d["duplicate"].to_numpy()
        lat = self.latencies_s()
        published = int(self.sent_in_window.sum())
        expected = published * self.spec.fanout
        delivered = int((~dup).sum())
        ingress = published / span
        egress = delivered / span
        offered = self.offered_per_s
        # two batches per publisher of slack: a late batch can cross a window edge
        slack = 2 * sum(p["batch"] for p in self.publishers)
        behind = published + slack < 0.98 * self._scheduled_in_window
        runnable = float(np.mean([p["runnable_fraction"] for p in self.publishers]))
        sub_runnable = [s["runnable_fraction"] for s in self.subscribers]
        sub_runnable = float(np.nanmax(sub_runnable)) if not all(map(math.isnan, sub_runnable)) else math.nan
        out = {
            "protocol": self.spec.protocol,
            "offered_per_s": offered,
            "window_s": span,
            "scheduled_in_window": self._scheduled_in_window,
            "published_in_window": published,
            "expected_deliveries": expected,
            "delivered": delivered,
            "lost": expected - delivered,
            "duplicates": int(dup.sum()),
            "out_of_order": int(d["out_of_order"].sum()),
            "loss_rate": (expected - delivered) / expected if expected else math.nan,
            "ingress_rate_per_s": ingress,
            "egress_rate_per_s": egress,
            "egress_received_in_window_per_s": sum(x.get("received_in_window", 0) for x in self.subscribers) / span,
            "sustainability": egress / (ingress * self.spec.fanout) if ingress else math.nan,
            "delivery_ratio": egress / (offered * self.spec.fanout),
        }
        if len(lat):
            q = np.quantile(lat, [0.01, 0.5, 0.9, 0.99])
            out.update(
                latency_mean_s=float(lat.mean()),
                latency_std_s=float(lat.std()),
                latency_p01_s=float(q[0]),
                latency_p50_s=float(q[1]),
                latency_p90_s=float(q[2]),
                latency_p99_s=float(q[3]),
                latency_max_s=float(lat.max()),
            )
        else:
            out.update({f"latency_{k}_s": math.nan for k in ("mean", "std", "p01", "p50", "p90", "p99", "max")})
        out.update(self._stamp_fields())
        out.update(self._client_fields())
        out.update(self._reader_fields())
        out.update(self._client_core_fields())
        out.update(
            {
                "publisher_lag_max_s": max(p["lag_max_s"] for p in self.publishers),
                "publisher_lag_end_s": max(
                    (p["lag_end_s"] for p in self.publishers if not math.isnan(p["lag_end_s"])), default=math.nan
                ),
                "publisher_runnable_fraction": runnable,
                "publisher_cpu_fraction": float(np.mean([p["cpu_fraction"] for p in self.publishers])),
                "generator_behind": bool(behind),
                "generator_saturated": bool(behind and runnable >= 0.9),
                "subscriber_runnable_fraction": sub_runnable,
                "subscriber_saturated": bool(sub_runnable >= 0.9),
                "subscriber_disconnects": sum(s["disconnected"] is not None for s in self.subscribers),
                "sent_total": int(self.sent.sum()),
                "received_total": int(sum(s["received"] for s in self.subscribers)),
                "drain_complete": self.drain_complete,
                "batch": self.publishers[0]["batch"],
                "wall_setup_s": self.wall.get("setup_s", math.nan),
                "wall_run_s": self.wall.get("run_s", math.nan),
                "wall_drain_s": self.wall.get("drain_s", math.nan),
                "wall_total_s": self.wall.get("total_s", math.nan),
            }
        )
        return out

    def _stamp_fields(self):
        """``stamp_exact_fraction`` (first copies whose receive stamp is their own) and ``latency_any_p50_s``
        / ``_p99_s`` over every first copy (a shared stamp is an upper bound of its message's arrival)."""
        every = self.timed(exact=False)
        lat = every["latency_s"].to_numpy()
        q = np.quantile(lat, [0.5, 0.99]) if lat.size else (math.nan, math.nan)
        exact = every["stamp_exact"].to_numpy(dtype=bool) if "stamp_exact" in every else np.zeros(len(every), bool)
        return {
            "stamp_exact_fraction": float(exact.mean()) if exact.size else math.nan,
            "latency_any_p50_s": float(q[0]),
            "latency_any_p99_s": float(q[1]),
        }

    def _reader_fields(self):
        """``subscriber_sleeps_per_copy`` (the subscribers' voluntary context switches per message
        they read, from the start to the end of the run: a reader that sleeps between copies is
        woken by the broker's write of each, one that is still busy is not) and
        ``subscriber_cpu_per_copy_s`` (their CPU time per message read, s); nan without them."""
        subs = [s for s in self.subscribers if s.get("counted", 0) and not math.isnan(s.get("sleeps", math.nan))]
        counted = sum(s["counted"] for s in subs)
        if not counted:
            return {"subscriber_sleeps_per_copy": math.nan, "subscriber_cpu_per_copy_s": math.nan}
        return {
            "subscriber_sleeps_per_copy": sum(s["sleeps"] for s in subs) / counted,
            "subscriber_cpu_per_copy_s": sum(s["cpu_s"] for s in subs) / counted,
        }

    def _client_core_fields(self):
        """``client_cpu_cores`` (the publishers' and subscribers' CPU together, cores) and
        ``client_core_busy_fraction`` (that over the client cores they were pinned to; nan unpinned):
        100 subscribers on one core can fill it before the broker is at its limit."""
        fractions = [c["cpu_fraction"] for c in (*self.publishers, *self.subscribers)]
        cores = float(sum(f for f in fractions if not math.isnan(f))) if fractions else math.nan
        pinned = set(self.spec.pub_cpus or ()) | set(self.spec.sub_cpus or ())
        unpinned = self.spec.pub_cpus is None or self.spec.sub_cpus is None
        return {
            "client_cpu_cores": cores,
            "client_core_busy_fraction": math.nan if unpinned or not pinned else cores / len(pinned),
        }

    def _client_fields(self):
        """``latency_clock``, app-side latency, the subscribers' and the publishers' own delays (p50 / p99 / mean, s)."""
        out = {"latency_clock": self.latency_clock}
        for name, column in (
            ("app_latency", "app_latency_s"),
            ("client_delay", "client_delay_s"),
            ("send_delay", "send_delay_s"),
            ("socket_wait", "socket_wait_s"),
        ):
            x = self.latencies_s(column)
            x = x[~np.isnan(x)]
            q = np.quantile(x, [0.5, 0.99]) if x.size else (math.nan, math.nan)
            out.update(
                {
                    f"{name}_p50_s": float(q[0]),
                    f"{name}_p99_s": float(q[1]),
                    f"{name}_mean_s": float(x.mean()) if x.size else math.nan,
                }
            )
        return out


def _known_or(times_ns, fallback_ns):
    """``times_ns`` where known (non-zero), else ``fallback_ns``."""
    times_ns = np.asarray(times_ns, dtype=np.int64)
    return np.where(times_ns != 0, times_ns, np.asarray(fallback_ns, dtype=np.int64))


def _batch_times(pub, seq, by_pub):
    """The time (ns, 0: unknown) of each message ``(pub, seq)``'s batch in ``by_pub`` (publisher ->
    (batch size, per-batch times); batch ``n`` holds messages ``n*b .. n*b + b - 1``)."""
    pub = np.asarray(pub, dtype=np.int64)
    seq = np.asarray(seq, dtype=np.int64)
    out = np.zeros(len(pub), np.int64)
    for p, (b, times) in by_pub.items():
        sel = np.flatnonzero(pub == p)
        n = seq[sel] // b
        ok = n < len(times)
        out[sel[ok]] = times[n[ok]]
    return out


def _exact_stamps(t_kernel_ns):
    """Which records' kernel receive time is their own (records of one subscriber, in arrival order).

    TCP gives a read the stamp of the last segment it consumed, and a segment
    merged into one still queued gives it its stamp (:mod:`..rxstamp`): every
    message read together with later ones carries the stamp of the last. Of a
    run of equal stamps only the last record's is its own arrival; the others
    arrived earlier, by an unknown time (False). Records without a stamp: False.
    """
    tk = np.asarray(t_kernel_ns, dtype=np.int64)
    exact = tk != 0
    exact[:-1] &= tk[1:] != tk[:-1]
    return exact
