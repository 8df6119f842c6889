"""Seed 1 (SYSTEMS.md §5): IoT traffic classes replayed per interval of the day on calibrated brokers.

Each class (weather, car sharing, traffic cameras) is a source trace from
:mod:`pubsim.models.loads.generators` (the published recordings are not
available; ``../shared/traces`` holds LoRaWAN and MQTT captures of other
devices, which are not these classes), replayed without bias by
:func:`pubsim.models.loads.replay.scale_up`: per 15-minute interval of the
day the empirical sizes and inter-message times, every publisher starting at
a random position of the source. Publisher ``p{g}`` publishes under
``p{g}/<topic>`` and one subscriber per publisher reads ``p{g}/...``
(fan-out 1). The brokers are calibrated from the folder's evidence table
(:mod:`pubsim.calibration.evidence_fit`): with one observation per broker
only the whole demand per message at that configuration is identified; the
per-byte slope that carries it to other message sizes is the shipped
calibrated preset's (an extrapolation, stated in every output).

Two experiments: the scale-up curves (throughput against publisher /
subscriber pairs, replications with 95 % intervals) and the maximum
sustained throughput per class and broker (the §4 rule on a load that
doubles, then is refined, in units of one publisher's load).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...models import presets
from ...models import topology as T
from ...models.loads import Trace, replay
from ...models.loads.generators import car_sharing, traffic_cameras, weather_sensors
from ...models.params.broker import BrokerParams
from ...models.params.client import SubscriberParams
from ...models.params.link import LinkParams
from ...models.params.mapping import from_mapping
from ...models.params.provenance import Provenance, Source
from ...run import simulate
from ...sim.errors import ConfigError
from ...sim.units import parse_duration_s
from ...study.stats import summary_with_ci
from ..evidence import read_evidence
from ..evidence_fit import EvidenceCalibrator, evidence_profile
from . import setting as S
from .figures import bars, scaleup
from .result import Counter, PaperResult

__all__ = ["CLASSES", "source_trace", "class_load", "calibrated_brokers", "run_iot"]

CLASSES = ("weather", "car-sharing", "camera")
_LOAD_PROVENANCE = Provenance(
    source=Source.ASSUMPTION,
    reference="pubsim.models.loads.generators (classes of SYSTEMS.md §5), replayed by replay.scale_up",
    note="the class's source trace is synthetic (its assumed fields are listed by generators.describe); "
    "replayed without bias per interval of the day as in Happ et al. 2017",
)
_METRICS = ["offered_per_s", "ingress_per_s", "egress_per_s", "sustainability", "latency_p50_s", "latency_p99_s"]


def source_trace(kind, rng, *, devices, span_s, t0_of_day_s):
    """The source recording of a class: ``devices`` sensors (cars, cameras) over ``span_s`` from ``t0_of_day_s``.

    Weather and car sharing are one gateway carrying all ``devices``; cameras
    are one publisher each (SYSTEMS.md §5).
    """
    if kind == "weather":
        return weather_sensors(
            rng, n_gateways=1, sensors_per_gateway=devices, duration_s=span_s, t0_of_day_s=t0_of_day_s
        )
    if kind == "car-sharing":
        return car_sharing(rng, n_cars=devices, n_publishers=1, duration_s=span_s, t0_of_day_s=t0_of_day_s)
    if kind == "camera":
        return traffic_cameras(rng, n_cameras=devices, duration_s=span_s, t0_of_day_s=t0_of_day_s)
    raise ConfigError("class", kind, f"one of {list(CLASSES)}")


def class_load(source, rng, *, publishers, copies, duration_s, interval_s):
    """``publishers`` publishers, each ``copies`` superposed resampled copies of the source, own topics.

    Topics become ``p{g}/<source topic>`` so that one subscriber per
    publisher gets exactly its messages (fan-out 1).
    """
    load = replay.scale_up(
        source,
        rng,
        n_gateways=publishers,
        devices_per_gateway=copies,
        duration_s=duration_s,
        interval_s=interval_s,
        prefix="p",
    )
    f = load.frame
    pub = f["publisher"].cat.codes.to_numpy().astype(np.int64)
    top = f["topic"].cat.codes.to_numpy().astype(np.int64)
    tnames = list(f["topic"].cat.categories)
    pnames = list(f["publisher"].cat.categories)
    names = [f"{p}/{t}" for p in pnames for t in tnames]
    return Trace.from_arrays(
        load.t_s,
        pub.astype(np.int32),
        (pub * len(tnames) + top).astype(np.int32),
        load.size_bytes,
        publisher_names=pnames,
        topic_names=names,
        t0_of_day_s=load.t0_of_day_s,
        sort=False,
        where="class_load",
    )


def _calibration_row(rows, source, kind):
    """The one evidence row of a broker (a folder of this kind calibrates from one configuration)."""
    if len(rows) != 1:
        raise ConfigError(f"{source}: {kind}", f"{len(rows)} rows", "one calibration row per broker")
    return rows.iloc[0]


def calibrated_brokers(evidence_path, *, date, n_boot=200, seed=0):
    """Fit each broker of the evidence table; the simulator's broker fields and the profile per kind.

    The evidence identifies the whole demand per message at its one
    configuration (payload, fan-out 1, ``cpu_cap_cores``). The broker is
    simulated with ``workers = cpu_cap_cores`` (each worker one core) and
    the shipped preset's per-byte cost, the ingress cost reduced by that
    per-byte share at the evidence's payload so the demand there stays the
    fitted one.

    Returns
    -------
    dict of str -> (dict, dict)
        ``kind -> (broker fields for BrokerParams, profile mapping)``.
    """
    table = read_evidence(evidence_path)
    out = {}
    for kind, rows in table.groupby("broker", sort=False):
        rows = rows.reset_index(drop=True)
        cal = EvidenceCalibrator(n_boot=n_boot, seed=seed).fit(rows)
        profile = evidence_profile(kind, rows, cal, source=evidence_path.name, date=date)
        fields = dict(profile["broker"][kind])
        row = _calibration_row(rows, evidence_path.name, kind)
        cores = float(row["cpu_cap_cores"])
        if cores != int(cores):
            raise ConfigError(f"{evidence_path.name}: {kind}, cpu_cap_cores", cores, "whole cores (workers)")
        fitted = parse_duration_s(fields["ingress_cost_s"], "ingress_cost_s")
        shipped = presets.load("broker", kind)
        per_byte = float(shipped.get("per_byte_cost_s", 0.0))
        pay, fan = float(row["payload_bytes"]), float(row["fanout"])
        ingress = fitted - per_byte * pay * (1 + fan)
        if ingress <= 0:
            raise ConfigError(f"{evidence_path.name}: {kind}", fitted, "a demand above the preset's per-byte share")
        prov = dict(fields["provenance"])
        prov["note"] = (
            f"{prov['note']} Simulated as {int(cores)} worker(s) (cpu_cap_cores of the evidence row); per-byte cost "
            f"{per_byte:.4g} s/B from the shipped preset '{kind}' (measured on loopback, payloads <= 1 KiB: an "
            f"assumption beyond them), ingress cost {fitted * 1e6:.4g} us minus that share at "
            f"{pay:g} B x (1 + {fan:g}) = {ingress * 1e6:.4g} us, so the demand at the evidence's configuration "
            "is unchanged."
        )
        fields.update(workers=int(cores), ingress_cost_s=ingress, per_byte_cost_s=per_byte, provenance=prov)
        out[kind] = (fields, profile)
    return out


def _topology(load, broker_fields, link, syntax):
    broker = from_mapping(BrokerParams, broker_fields, "broker")
    pubs = load.to_publishers(provenance=_LOAD_PROVENANCE)
    subs = {
        f"s-{name}": SubscriberParams(subscriptions=(f"{name}/#" if syntax == "mqtt" else f"{name}/",)) for name in pubs
    }
    return T.star(broker=broker, publishers=pubs, subscribers=subs, link=link, protocol="mqtt")


def _simulate(load, broker_fields, link, *, duration_s, warmup_s, seed, replication):
    syntax = broker_fields.get("topic_syntax", "mqtt")
    r = simulate(
        _topology(load, broker_fields, link, syntax),
        duration_s=duration_s,
        warmup_s=warmup_s,
        seed=seed,
        replication=replication,
        record="stream",
    )
    s = r.summary()
    rec = {k: s.get(k, math.nan) for k in _METRICS if k != "offered_per_s"}
    rec["offered_per_s"] = len(load) / duration_s
    rec["messages"] = len(load)
    rec["mean_size_bytes"] = float(np.mean(load.size_bytes)) if len(load) else math.nan
    rec["loss_rate"] = s.get("loss_rate", math.nan)
    return rec


class _Classes:
    """The class settings and their source traces (made once per run, seeded)."""

    def __init__(self, setting, where, seed):
        self.spec = S.mapping(setting, "classes", where)
        for kind in self.spec:
            if kind not in CLASSES:
                raise ConfigError(f"{where}.classes.{kind}", kind, f"one of {list(CLASSES)}")
        self.span_s = S.duration_s(setting, "source_span", where)
        self.start_s = S.duration_s(setting, "source_start", where, positive=False)
        self.seed = seed
        self.where = where
        self._sources = {}

    def kinds(self):
        return list(self.spec)

    def publishers(self, kind):
        return S.counts(self.spec[kind], "publishers", f"{self.where}.classes.{kind}")

    def probe_s(self, kind, default):
        """The class's own max-search probe length (``probe`` in its mapping), else the default."""
        if "probe" not in self.spec[kind]:
            return default
        return S.duration_s(self.spec[kind], "probe", f"{self.where}.classes.{kind}")

    def copies(self, kind):
        return S.count(self.spec[kind], "copies_per_publisher", f"{self.where}.classes.{kind}")

    def source(self, kind):
        if kind not in self._sources:
            devices = S.count(self.spec[kind], "source_devices", f"{self.where}.classes.{kind}")
            rng = np.random.default_rng([self.seed, CLASSES.index(kind), 0])
            self._sources[kind] = source_trace(kind, rng, devices=devices, span_s=self.span_s, t0_of_day_s=self.start_s)
        return self._sources[kind]


def _scaleup(classes, brokers, link, cfg, store, counter, progress):
    rows = []
    for kind in classes.kinds():
        for n in classes.publishers(kind):
            for rep in range(cfg["replications"]):
                load = None
                for b, (fields, _) in brokers.items():
                    key = f"scaleup/{kind}/{b}/n{n}/rep{rep}"

                    def run(fields=fields, n=n, rep=rep, kind=kind):
                        nonlocal load
                        if load is None:
                            rng = np.random.default_rng([cfg["seed"], CLASSES.index(kind), n, rep])
                            load = class_load(
                                classes.source(kind),
                                rng,
                                publishers=n,
                                copies=classes.copies(kind),
                                duration_s=cfg["duration_s"],
                                interval_s=cfg["interval_s"],
                            )
                        return _simulate(
                            load,
                            fields,
                            link,
                            duration_s=cfg["duration_s"],
                            warmup_s=cfg["warmup_s"],
                            seed=cfg["seed"],
                            replication=rep,
                        )

                    rec = counter.cached(store, key, run)
                    rows.append({"class": kind, "broker": b, "publishers": n, "replication": rep, **rec})
                    if progress:
                        progress(key)
    return pd.DataFrame(rows)


def _max_probe(classes, kind, fields, link, cfg, k):
    top = classes.publishers(kind)[-1]
    n = min(k, top)
    copies = classes.copies(kind) * max(1, round(k / n))
    probe_s = classes.probe_s(kind, cfg["probe_s"])
    rng = np.random.default_rng([cfg["seed"], CLASSES.index(kind), k, 99])
    load = class_load(
        classes.source(kind), rng, publishers=n, copies=copies, duration_s=probe_s, interval_s=cfg["interval_s"]
    )
    warm = min(cfg["probe_warmup_s"], probe_s / 2)
    rec = _simulate(load, fields, link, duration_s=probe_s, warmup_s=warm, seed=cfg["seed"], replication=0)
    return {**rec, "publishers": n, "copies_per_publisher": copies}


def _sustainable(rec):
    s = rec.get("sustainability")
    return s is not None and s >= 0.99


def _max_search(classes, kind, b, fields, link, cfg, store, counter):
    """Load in publisher-loads ``k``: double (or halve) from the largest scale-up point, then refine.

    ``k`` publisher-loads are ``min(k, largest)`` publishers carrying
    ``round(k / publishers)`` times the class's copies each. A probe is
    sustainable by the 0.99 rule of SYSTEMS.md §4 (fan-out 1: egress >=
    0.99 x ingress); a probe without deliveries counts as unsustainable.
    """
    probe = lambda k: counter.cached(  # noqa: E731
        store, f"max/{kind}/{b}/k{k}", lambda: _max_probe(classes, kind, fields, link, cfg, k)
    )
    k = classes.publishers(kind)[-1]
    probes = {k: probe(k)}
    up = _sustainable(probes[k])
    for _ in range(cfg["max_doublings"]):
        nxt = k * 2 if up else k // 2
        if nxt < 1:
            break
        probes[nxt] = probe(nxt)
        k = nxt
        if _sustainable(probes[k]) != up:
            break
    good = [x for x, r in probes.items() if _sustainable(r)]
    bad = [x for x, r in probes.items() if not _sustainable(r)]
    if good and bad and min(bad) > max(good):
        lo, hi = max(good), min(bad)
        for x in sorted({int(round(v)) for v in np.linspace(lo, hi, cfg["steps"] + 2)[1:-1]} - {lo, hi}):
            probes[x] = probe(x)
    good = [x for x, r in probes.items() if _sustainable(r)]
    bad = [x for x, r in probes.items() if not _sustainable(r)]
    best = max(good) if good else None
    rec = probes[best] if best is not None else probes[min(probes)]
    return {
        "class": kind,
        "broker": b,
        "max_sustained_per_s": rec["egress_per_s"] if best is not None else math.nan,
        "publisher_loads": best,
        "publishers": rec["publishers"],
        "copies_per_publisher": rec["copies_per_publisher"],
        "mean_size_bytes": rec["mean_size_bytes"],
        "first_unsustainable_loads": (first := min([x for x in bad if best is None or x > best], default=None)),
        "bracket_pct": 100.0 * (first - best) / best if best and first else math.nan,
        "limit_reached": bool(bad and good),
        "probes": len(probes),
    }


def _config(paper):
    s, where = paper.setting, f"{paper.folder}/paper.yaml:{'quick' if paper.quick else 'full'}"
    cfg = {
        "seed": S.count(s, "seed", where, 0),
        "replications": S.count(s, "replications", where),
        "duration_s": S.duration_s(s, "duration", where),
        "warmup_s": S.duration_s(s, "warmup", where, positive=False),
        "interval_s": S.duration_s(s, "interval", where),
    }
    m = S.mapping(s, "max_search", where)
    cfg.update(
        probe_s=S.duration_s(m, "probe", f"{where}.max_search"),
        probe_warmup_s=S.duration_s(m, "warmup", f"{where}.max_search", positive=False),
        steps=S.count(m, "steps", f"{where}.max_search"),
        max_doublings=S.count(m, "max_doublings", f"{where}.max_search"),
    )
    for a, b in (("warmup_s", "duration_s"), ("probe_warmup_s", "probe_s")):
        if cfg[a] >= cfg[b]:
            raise ConfigError(f"{where}.{a[:-2]}", cfg[a], f"shorter than {b[:-2]} ({cfg[b]:g} s)")
    link = s.get("link")
    if not isinstance(link, str):
        raise ConfigError(f"{where}.link", link, "a link preset name (pubsim presets)")
    cfg["link"] = from_mapping(LinkParams, presets.load("link", link), f"{where}.link")
    return cfg, where


def run_iot(paper, store, *, date, progress=None):
    """Calibrate, run the scale-up and the maximum search, and tabulate (see the module docstring)."""
    if paper.evidence is None:
        raise ConfigError(f"{paper.folder}/paper.yaml.evidence", None, "an evidence table (the calibration inputs)")
    cfg, where = _config(paper)
    calibrated = calibrated_brokers(paper.evidence, date=date)
    wanted = S.names(paper.setting, "brokers", where, choices=set(calibrated))
    brokers = {b: calibrated[b] for b in wanted}
    classes = _Classes(paper.setting, where, cfg["seed"])
    counter = Counter()
    raw = _scaleup(classes, brokers, cfg["link"], cfg, store, counter, progress)
    ci = summary_with_ci(raw, by=["class", "broker", "publishers"], value_cols=_METRICS + ["loss_rate"])
    wide = ci.pivot_table(index=["class", "broker", "publishers"], columns="metric", values=["mean", "half_width"])
    wide.columns = [f"{m}" if s == "mean" else f"{m}_ci95" for s, m in wide.columns]
    order = [c for m in _METRICS + ["loss_rate"] for c in (m, f"{m}_ci95") if c in wide.columns]
    scale = wide[order].reset_index()
    maxima = pd.DataFrame(
        [
            _max_search(classes, kind, b, fields, cfg["link"], cfg, store, counter)
            for kind in classes.kinds()
            for b, (fields, _) in brokers.items()
        ]
    )
    params = _parameters(brokers)
    res = PaperResult(
        tables={"throughput_scaleup": scale, "max_throughput": maxima, "replications": raw, "parameters": params},
        profiles={b: prof for b, (_, prof) in brokers.items()},
        ran=counter.ran,
        skipped=counter.skipped,
    )
    for kind in classes.kinds():
        res.figures[f"scaleup_{kind}"] = scaleup(
            scale[scale["class"] == kind],
            x="publishers",
            y="egress_per_s",
            hue="broker",
            title=f"{kind}: throughput vs publisher/subscriber pairs (predicted, 95 % CI)",
            ylabel="egress throughput (msg/s)",
            xlabel="publisher/subscriber pairs",
        )
    res.figures["max_throughput"] = bars(
        maxima,
        group="class",
        hue="broker",
        y="max_sustained_per_s",
        title="maximum sustained throughput per class (predicted; weather calibrated)",
        ylabel="msg/s",
    )
    res.headline = _headline(maxima, scale)
    return res


def _parameters(brokers):
    rows = []
    for b, (fields, _) in brokers.items():
        prov = fields["provenance"]
        for k in ("workers", "ingress_cost_s", "per_byte_cost_s", "topic_syntax", "overflow"):
            rows.append(
                {
                    "broker": b,
                    "field": k,
                    "value": fields.get(k),
                    "source": prov.get("source"),
                    "note": prov.get("note") if k == "ingress_cost_s" else "",
                }
            )
    return pd.DataFrame(rows)


def _headline(maxima, scale):
    lines = ["predicted egress at the largest scale-up point (msg/s, mean ± 95 % half-width):"]
    for kind, grp in scale.groupby("class", sort=False):
        top = grp[grp["publishers"] == grp["publishers"].max()]
        cells = [f"{r.broker} {r.egress_per_s:,.0f} ± {r.egress_per_s_ci95:,.0f}" for r in top.itertuples()]
        lines.append(f"  {kind} ({int(top['publishers'].iloc[0])} publishers): " + ", ".join(cells))
    lines.append("predicted maximum sustained throughput (msg/s; weather = calibration input):")
    for kind, grp in maxima.groupby("class", sort=False):
        cells = []
        for r in grp.itertuples():
            v = r.max_sustained_per_s
            txt = (
                "below the smallest load" if not v == v else f"{v:,.0f}" + ("" if r.limit_reached else " (lower bound)")
            )
            cells.append(f"{r.broker} {txt}")
        lines.append(f"  {kind}: " + ", ".join(cells))
    return lines
