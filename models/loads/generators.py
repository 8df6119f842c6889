"""Synthetic IoT loads, vectorised, each drawn from an explicit random stream.

Every generator takes ``rng`` (a :class:`numpy.random.Generator`, e.g. from
:meth:`pubsim.sim.rng.StreamFactory.generator`) and returns a
:class:`~pubsim.models.loads.trace.Trace`. Messages are produced as NumPy arrays
(times, publisher codes, topic codes, sizes): no Python object per message.

Building blocks
    :func:`poisson`, :func:`constant_rate`, :func:`mmpp` / :func:`on_off`
    (Markov-modulated bursts), :func:`diurnal` (non-homogeneous Poisson by
    thinning), :func:`zipf_topics` / :func:`with_zipf_topics` (topic
    popularity), :func:`device_churn` (devices going offline and back).

The three classes of SYSTEMS.md §5 (Happ et al., 2017)
    :func:`weather_sensors`, :func:`car_sharing`, :func:`traffic_cameras`,
    with the frozen parameter dataclasses :class:`WeatherParams`,
    :class:`CarSharingParams`, :class:`CameraParams`. Each field carries its
    provenance: the number from the publication (as summarised in
    SYSTEMS.md §5) or a stated assumption of this module;
    :func:`describe` lists them.

Sizes (``size_bytes`` arguments) are an int (constant), a
:class:`pubsim.sim.distributions.Distribution`, or a callable ``f(rng, n) -> array``;
they are rounded to whole bytes and clipped at 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from ...sim.distributions import Distribution
from ...sim.errors import ConfigError
from ..params.provenance import Provenance, Source
from .trace import DAY_S, Trace

__all__ = [
    "poisson",
    "constant_rate",
    "mmpp",
    "on_off",
    "diurnal",
    "DEFAULT_DIURNAL_PROFILE",
    "zipf_topics",
    "with_zipf_topics",
    "device_churn",
    "daylight",
    "WeatherParams",
    "weather_sensors",
    "CarSharingParams",
    "car_sharing",
    "CameraParams",
    "traffic_cameras",
    "describe",
    "HAPP_2017",
    "ASSUMPTION",
    "CAR2GO_V21",
    "SHARE_NOW",
    "WEBCAMS_2011",
]

HAPP_2017 = Provenance(source=Source.PUBLICATION, reference="SYSTEMS.md §5 (Happ et al., 2017; seed 004)", date="2017")
#: A car2go vehicle record of its public API v2.1 ("Get all free vehicles", format=json): the fields the
#: documentation lists (address, coordinates, engineType, exterior, fuel, interior, name = plate, vin,
#: smartPhoneRequired; charging for electric cars) with its own example values (UL-C5887, "Sudetenweg, 89075
#: Ulm", fuel 24): 219 bytes as compact JSON; records of the same layout in public client code measure
#: 213-233 bytes (St Paul, Vancouver addresses).
CAR2GO_V21 = Provenance(
    source=Source.PUBLICATION,
    reference="car2go API v2.1 documentation, vehicles_v2_1 (code.google.com/p/car2go/wiki/vehicles_v2_1; "
    "github.com/sharenowTech/openAPI/wiki/v2.1_vehicles)",
    date="2012",
    note="size of one vehicle's JSON record counted by hand (compact JSON); the operators the study polled are not "
    "named in SYSTEMS.md: car2go's public API is one such free-floating operator's per-car status, of the study's era",
)
#: A Share Now / Free2move vehicle record (its VEHICLELIST message, one connectedVehicles entry: id, plate,
#: geoCoordinate, fuellevel, address, locationId, buildSeries, fuelType, primaryColor, hardwareVersion,
#: imageUrl, transmission, rank, vin, locationIdAsLong): 441 bytes as compact JSON.
SHARE_NOW = Provenance(
    source=Source.PUBLICATION,
    reference="github.com/T3rm1/free2move-api README, VEHICLELIST example (the operator's public MQTT feed)",
    note="size of one vehicle's JSON record counted by hand (compact JSON); a later operator than the study's, "
    "with a richer record: stands for the second operator's larger reports",
)
#: Mean size of a public traffic-webcam still: 7.5 TB over 125 million images = 60 kB (2,700 webcams in 10 cities,
#: several months).
WEBCAMS_2011 = Provenance(
    source=Source.PUBLICATION,
    reference="Thakur, Hui, Ketabdar, Helmy: Towards realistic vehicular network modeling using planet-scale "
    "public webcams, arXiv:1105.4151",
    date="2011",
    note="7.5 TB / 125 M images = 60 kB per image (66 kB if TiB); a mean over cameras, cities and hours",
)
ASSUMPTION = Provenance(
    source=Source.ASSUMPTION,
    reference="models/loads/generators.py",
    note="stated modelling assumption, not from the publication",
)


# =========================================================================== helpers


def _check_rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise ConfigError("rng", type(rng).__name__, "a numpy.random.Generator (e.g. StreamFactory.generator)")


def _positive(name, value, allow_zero=False):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(name, value, "a number") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ConfigError(name, value, "a finite number >= 0" if allow_zero else "a finite number > 0")
    return v


def _count(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(name, value, f"an integer >= {minimum}")
    return int(value)


def _sizes(rng, size_bytes, n):
    if isinstance(size_bytes, (int, np.integer, float)) and not isinstance(size_bytes, bool):
        if size_bytes < 0:
            raise ConfigError("size_bytes", size_bytes, "a size >= 0")
        return np.full(n, int(round(size_bytes)), dtype=np.int64)
    if isinstance(size_bytes, Distribution):
        raw = size_bytes.sample(rng, n)
    elif callable(size_bytes):
        raw = np.asarray(size_bytes(rng, n), dtype=float)
        if raw.shape != (n,):
            raise ConfigError("size_bytes", f"callable returning shape {raw.shape}", f"an array of {n} sizes")
    else:
        raise ConfigError("size_bytes", size_bytes, "an int, a Distribution or a callable f(rng, n)")
    return np.clip(np.rint(raw), 0, None).astype(np.int64)


def _topic_codes(rng, topics, topic_weights, n):
    topics = tuple(topics)
    if not topics:
        raise ConfigError("topics", topics, "at least one topic")
    if len(topics) == 1:
        return topics, np.zeros(n, dtype=np.int32)
    if topic_weights is None:
        return topics, rng.integers(0, len(topics), n, dtype=np.int32)
    w = np.asarray(topic_weights, dtype=float)
    if w.shape != (len(topics),) or np.any(w < 0) or not w.sum() > 0:
        raise ConfigError("topic_weights", topic_weights, f"{len(topics)} non-negative weights, not all zero")
    return topics, np.searchsorted(np.cumsum(w / w.sum()), rng.random(n), side="right").clip(0, len(topics) - 1).astype(
        np.int32
    )


def _names(prefix, n):
    return [f"{prefix}{i}" for i in range(n)]


def _finish(rng, t, owner, *, n_publishers, prefix, topics, topic_weights, size_bytes, t0_of_day_s, where):
    order = np.argsort(t, kind="stable")
    t, owner = t[order], owner[order]
    topics, codes = _topic_codes(rng, topics, topic_weights, len(t))
    sizes = _sizes(rng, size_bytes, len(t))
    return Trace.from_arrays(
        t,
        owner.astype(np.int32),
        codes,
        sizes,
        publisher_names=_names(prefix, n_publishers),
        topic_names=topics,
        t0_of_day_s=t0_of_day_s,
        sort=False,
        where=where,
    )


def _piecewise_poisson(rng, owner, start, length, rate):
    """Poisson points on intervals (owner, [start, start+length), rate), vectorised."""
    counts = rng.poisson(np.asarray(rate) * np.asarray(length))
    total = int(counts.sum())
    t = np.repeat(start, counts) + rng.random(total) * np.repeat(length, counts)
    return t, np.repeat(owner, counts)


# =========================================================================== basic processes


def poisson(
    rng,
    *,
    rate_per_s,
    duration_s,
    n_publishers=1,
    topics=("t",),
    topic_weights=None,
    size_bytes=0,
    prefix="p",
    t0_of_day_s=0.0,
):
    """``n_publishers`` independent Poisson processes of ``rate_per_s`` each on ``[0, duration_s)``."""
    _check_rng(rng)
    rate, dur = _positive("rate_per_s", rate_per_s, True), _positive("duration_s", duration_s)
    n = _count("n_publishers", n_publishers)
    owner = np.arange(n)
    t, own = _piecewise_poisson(rng, owner, np.zeros(n), np.full(n, dur), np.full(n, rate))
    return _finish(
        rng,
        t,
        own,
        n_publishers=n,
        prefix=prefix,
        topics=topics,
        topic_weights=topic_weights,
        size_bytes=size_bytes,
        t0_of_day_s=t0_of_day_s,
        where="poisson",
    )


def constant_rate(
    rng,
    *,
    rate_per_s,
    duration_s,
    n_publishers=1,
    topics=("t",),
    topic_weights=None,
    size_bytes=0,
    jitter_s=0.0,
    prefix="p",
    t0_of_day_s=0.0,
):
    """Periodic publishers: period ``1/rate_per_s``, uniform random phase, optional uniform jitter.

    A message moved outside ``[0, duration_s)`` by jitter is dropped.
    """
    _check_rng(rng)
    rate, dur = _positive("rate_per_s", rate_per_s), _positive("duration_s", duration_s)
    jitter = _positive("jitter_s", jitter_s, True)
    n = _count("n_publishers", n_publishers)
    period = 1.0 / rate
    phase = rng.random(n) * period
    counts = np.ceil((dur - phase) / period).astype(np.int64).clip(0)
    owner = np.repeat(np.arange(n), counts)
    k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    t = np.repeat(phase, counts) + k * period
    if jitter:
        t = t + rng.uniform(-jitter / 2, jitter / 2, len(t))
        keep = (t >= 0) & (t < dur)
        t, owner = t[keep], owner[keep]
    return _finish(
        rng,
        t,
        owner,
        n_publishers=n,
        prefix=prefix,
        topics=topics,
        topic_weights=topic_weights,
        size_bytes=size_bytes,
        t0_of_day_s=t0_of_day_s,
        where="constant_rate",
    )


def _sojourns(rng, n, states0, mean_sojourn, jump, duration, max_rounds=10_000_000):
    """Intervals of a continuous-time Markov chain per publisher until ``duration``.

    Returns (owner, start, length, state) of every sojourn (clipped at duration).
    """
    k = len(mean_sojourn)
    cum = np.cumsum(jump, axis=1)
    owners, starts, lengths, states = [], [], [], []
    state = states0.copy()
    now = np.zeros(n)
    active = np.arange(n)
    rounds = 0
    while len(active):
        s = state[active]
        d = rng.exponential(mean_sojourn[s])
        owners.append(active)
        starts.append(now[active])
        lengths.append(np.minimum(d, duration - now[active]))
        states.append(s)
        now[active] += d
        if k > 1:
            u = rng.random(len(active))
            state[active] = (u[:, None] >= cum[s]).sum(axis=1).clip(0, k - 1)
        active = active[now[active] < duration]
        rounds += 1
        if rounds > max_rounds:  # pragma: no cover - guard against sojourns of ~0
            raise ConfigError("mean_sojourn_s", mean_sojourn.tolist(), "sojourns long enough to cover the duration")
    return (np.concatenate(owners), np.concatenate(starts), np.concatenate(lengths), np.concatenate(states))


def mmpp(
    rng,
    *,
    rates_per_s,
    mean_sojourn_s,
    duration_s,
    transition=None,
    n_publishers=1,
    topics=("t",),
    topic_weights=None,
    size_bytes=0,
    prefix="p",
    t0_of_day_s=0.0,
):
    """Markov-modulated Poisson process: state ``i`` sends at ``rates_per_s[i]``.

    Each publisher runs its own chain; state ``i`` lasts an exponential time of
    mean ``mean_sojourn_s[i]`` and then jumps according to row ``i`` of
    ``transition`` (default: uniformly to one of the other states). Initial
    states follow the chain's stationary time fractions. The loop is over
    sojourns, vectorised over publishers.
    """
    _check_rng(rng)
    rates = np.asarray(rates_per_s, dtype=float)
    means = np.asarray(mean_sojourn_s, dtype=float)
    k = len(rates)
    if (
        k < 1
        or means.shape != (k,)
        or np.any(~np.isfinite(rates))
        or np.any(rates < 0)
        or np.any(~(means > 0))
        or np.any(~np.isfinite(means))
    ):
        raise ConfigError(
            "rates_per_s/mean_sojourn_s",
            (rates.tolist(), means.tolist()),
            "equal-length lists of rates >= 0 and mean sojourns > 0",
        )
    if transition is None:
        jump = (np.ones((k, k)) - np.eye(k)) / max(k - 1, 1) if k > 1 else np.ones((1, 1))
    else:
        jump = np.asarray(transition, dtype=float)
        if jump.shape != (k, k) or np.any(jump < 0) or not np.allclose(jump.sum(axis=1), 1.0):
            raise ConfigError("transition", transition, f"a {k}x{k} matrix of probabilities, rows summing to 1")
    dur = _positive("duration_s", duration_s)
    n = _count("n_publishers", n_publishers)
    # stationary time fractions: embedded chain's stationary vector weighted by mean sojourns
    if k > 1:
        w, v = np.linalg.eig(jump.T)
        pi = np.real(v[:, np.argmin(np.abs(w - 1))])
        pi = np.abs(pi) * means
        pi = pi / pi.sum()
        states0 = np.searchsorted(np.cumsum(pi), rng.random(n), side="right").clip(0, k - 1)
    else:
        states0 = np.zeros(n, dtype=np.int64)
    owner, start, length, state = _sojourns(rng, n, states0, means, jump, dur)
    t, own = _piecewise_poisson(rng, owner, start, length, rates[state])
    return _finish(
        rng,
        t,
        own,
        n_publishers=n,
        prefix=prefix,
        topics=topics,
        topic_weights=topic_weights,
        size_bytes=size_bytes,
        t0_of_day_s=t0_of_day_s,
        where="mmpp",
    )


def on_off(rng, *, rate_on_per_s, mean_on_s, mean_off_s, duration_s, rate_off_per_s=0.0, **kwargs):
    """Bursts: Poisson at ``rate_on_per_s`` during exponential on-periods, ``rate_off_per_s`` between."""
    return mmpp(
        rng,
        rates_per_s=(rate_off_per_s, rate_on_per_s),
        mean_sojourn_s=(mean_off_s, mean_on_s),
        duration_s=duration_s,
        **kwargs,
    )


DEFAULT_DIURNAL_PROFILE = tuple(
    round(0.25 + 0.75 * max(0.0, math.sin(math.pi * (h + 0.5 - 6) / 12)), 4) for h in range(24)
)
"""Hourly rate multipliers (an assumption): a floor of 0.25 at night, a half-sine
peaking at noon between 6:00 and 18:00."""


def _profile_values(profile, tod):
    """Multiplier at times of day ``tod`` (s) for a table (equal bins over the day) or a callable."""
    if callable(profile):
        return np.asarray(profile(tod), dtype=float)
    p = np.asarray(profile, dtype=float)
    idx = (tod / DAY_S * len(p)).astype(np.int64) % len(p)
    return p[idx]


def diurnal(
    rng,
    *,
    mean_rate_per_s,
    duration_s,
    profile=DEFAULT_DIURNAL_PROFILE,
    t0_of_day_s=0.0,
    n_publishers=1,
    topics=("t",),
    topic_weights=None,
    size_bytes=0,
    prefix="p",
):
    """Non-homogeneous Poisson process with a daily rate profile, by thinning.

    The rate at time ``t`` is ``mean_rate_per_s * profile(tod) / mean(profile)``
    where ``tod`` is the time of day of ``t``. ``profile`` is a table of
    multipliers over equal bins of the day (24 = hourly) or a vectorised
    callable ``f(time_of_day_s) -> multiplier`` (then ``mean_rate_per_s`` is
    the rate at multiplier 1). Candidates are drawn at the peak rate and kept
    with probability ``rate(t) / peak`` (Lewis-Shedler thinning).
    """
    _check_rng(rng)
    rate = _positive("mean_rate_per_s", mean_rate_per_s, True)
    dur = _positive("duration_s", duration_s)
    n = _count("n_publishers", n_publishers)
    if callable(profile):
        grid = np.linspace(0, DAY_S, 24 * 60 + 1)
        peak_mult, scale = float(np.max(profile(grid))) * 1.0, 1.0
    else:
        p = np.asarray(profile, dtype=float)
        if p.ndim != 1 or len(p) == 0 or np.any(p < 0) or not np.all(np.isfinite(p)) or not p.sum() > 0:
            raise ConfigError("profile", profile, "non-negative multipliers over equal bins of the day, not all 0")
        peak_mult, scale = float(p.max()), 1.0 / float(p.mean())
    peak = rate * peak_mult * scale
    owner = np.arange(n)
    t, own = _piecewise_poisson(rng, owner, np.zeros(n), np.full(n, dur), np.full(n, peak))
    mult = _profile_values(profile, (t + t0_of_day_s) % DAY_S) * scale
    if np.any(mult * rate > peak * (1 + 1e-9)):
        raise ConfigError("profile", "callable", "a multiplier whose maximum over the day is on a 1-minute grid")
    keep = rng.random(len(t)) * peak < mult * rate
    return _finish(
        rng,
        t[keep],
        own[keep],
        n_publishers=n,
        prefix=prefix,
        topics=topics,
        topic_weights=topic_weights,
        size_bytes=size_bytes,
        t0_of_day_s=t0_of_day_s,
        where="diurnal",
    )


def zipf_topics(rng, n, *, n_topics, exponent=1.0):
    """``n`` topic indices in ``[0, n_topics)`` with P(k) proportional to 1/(k+1)**exponent."""
    _check_rng(rng)
    m = _count("n_topics", n_topics)
    s = _positive("exponent", exponent, True)
    w = 1.0 / np.arange(1, m + 1) ** s
    cdf = np.cumsum(w / w.sum())
    return np.searchsorted(cdf, rng.random(int(n)), side="right").clip(0, m - 1).astype(np.int32)


def with_zipf_topics(trace, rng, *, n_topics, exponent=1.0, prefix="topic/"):
    """The trace with every message's topic redrawn from a Zipf popularity over ``n_topics``."""
    codes = zipf_topics(rng, len(trace), n_topics=n_topics, exponent=exponent)
    frame = trace.frame.copy()
    frame["topic"] = pd.Categorical.from_codes(codes, categories=[f"{prefix}{i}" for i in range(n_topics)])
    return trace.copy_with(frame)


def device_churn(trace, rng, *, mean_online_s, mean_offline_s):
    """Remove the messages a device would send while offline.

    Each publisher alternates exponential online and offline periods (means
    ``mean_online_s``, ``mean_offline_s``), starting online with the
    stationary probability ``on / (on + off)``; messages in offline periods
    are dropped. Vectorised over devices.
    """
    _check_rng(rng)
    on = _positive("mean_online_s", mean_online_s)
    off = _positive("mean_offline_s", mean_offline_s)
    codes = trace.frame["publisher"].cat.codes.to_numpy().astype(np.int64)
    n = len(trace.frame["publisher"].cat.categories)
    if len(trace) == 0:
        return trace
    end = float(trace.t_s[-1]) + 1.0
    states0 = (rng.random(n) >= on / (on + off)).astype(np.int64)  # 0 online, 1 offline
    owner, start, length, state = _sojourns(
        rng, n, states0, np.array([on, off]), np.array([[0.0, 1.0], [1.0, 0.0]]), end
    )
    # locate each message's sojourn: key = owner * span + time (owner blocks are in start order)
    span = end * 2.0
    order = np.lexsort((start, owner))
    key = owner[order] * span + start[order]
    st = state[order]
    mkey = codes * span + trace.t_s
    idx = np.searchsorted(key, mkey, side="right") - 1
    keep = st[idx] == 0
    frame = trace.frame.loc[keep].reset_index(drop=True)
    return trace.copy_with(frame)


def daylight(tod_s, sunrise_h=6.0, sunset_h=18.0):
    """0 at night, a half-sine between sunrise and sunset peaking at midday (1)."""
    h = np.asarray(tod_s, dtype=float) % DAY_S / 3600.0
    x = (h - sunrise_h) / (sunset_h - sunrise_h)
    return np.where((x > 0) & (x < 1), np.sin(np.pi * np.clip(x, 0, 1)), 0.0)


# =========================================================================== documented parameters


def _doc(default, provenance, note):
    return field(default=default, metadata={"provenance": provenance, "note": note})


def describe(params):
    """Rows ``(field, value, source, reference, note)`` of a §5 parameter set."""
    rows = []
    for f in fields(params):
        prov = f.metadata.get("provenance", ASSUMPTION)
        rows.append((f.name, getattr(params, f.name), prov.source.value, prov.reference, f.metadata.get("note", "")))
    return rows


class _Documented:
    def provenance_of(self, name) -> Provenance:
        for f in fields(self):
            if f.name == name:
                return f.metadata.get("provenance", ASSUMPTION)
        raise ConfigError("field", name, f"a field of {type(self).__name__}")

    def describe(self):
        return describe(self)

    def _check(self, positive=(), probabilities=(), counts=()):
        for name in positive:
            _positive(f"{type(self).__name__}.{name}", getattr(self, name))
        for name in probabilities:
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"{type(self).__name__}.{name}", v, "a probability in [0, 1]")
        for name in counts:
            _count(f"{type(self).__name__}.{name}", getattr(self, name))


@dataclass(frozen=True, kw_only=True)
class WeatherParams(_Documented):
    """Simple sensors (weather): threshold-based sending over a 1 Hz signal."""

    sample_interval_s: float = _doc(1.0, HAPP_2017, "every sensor sampled every second")
    message_bytes: int = _doc(36, HAPP_2017, "binary encoding, constant 36-byte messages")
    sensor_kinds: tuple = _doc(
        ("temperature", "humidity", "light1", "light2"),
        HAPP_2017,
        "temperature, humidity and two light sensors per node",
    )
    sensors_per_gateway: int = _doc(1000, HAPP_2017, "scale-up: each gateway the load of 1,000 sensors")
    threshold: float = _doc(1.0, ASSUMPTION, "send when the signal moved this far from the last sent value")
    step_sd_noon: float = _doc(
        0.22, ASSUMPTION, "random-walk step per sample at noon, in thresholds (about one message per 20 s per sensor)"
    )
    step_sd_night: float = _doc(0.04, ASSUMPTION, "random-walk step per sample at night (about one message per 10 min)")
    sunrise_h: float = _doc(6.0, ASSUMPTION, "daylight half-sine from sunrise ...")
    sunset_h: float = _doc(18.0, ASSUMPTION, "... to sunset, peaking at noon (the rate follows the day)")

    def __post_init__(self):
        self._check(
            positive=("sample_interval_s", "threshold", "step_sd_noon", "step_sd_night"),
            counts=("sensors_per_gateway",),
        )
        _count("WeatherParams.message_bytes", self.message_bytes, 0)
        if not self.sensor_kinds or not self.sunrise_h < self.sunset_h:
            raise ConfigError(
                "WeatherParams",
                (self.sensor_kinds, self.sunrise_h, self.sunset_h),
                "at least one sensor kind and sunrise before sunset",
            )


def weather_sensors(
    rng,
    params: WeatherParams = WeatherParams(),
    *,
    n_gateways,
    duration_s,
    t0_of_day_s=12 * 3600.0,
    sensors_per_gateway=None,
    prefix="gw",
):
    """Gateways publishing the threshold-triggered readings of their sensors.

    Every sensor's signal is a Gaussian random walk sampled every
    ``sample_interval_s`` (at a random phase per sensor) whose step standard
    deviation follows the daylight curve between ``step_sd_night`` and
    ``step_sd_noon``; a reading is published when the signal has moved at
    least ``threshold`` from the last published value. At ``t = 0`` each
    sensor's distance from its last sent value is uniform in
    ``(-threshold, threshold)`` (an assumption standing in for a warm-up).
    Publisher ``gw{g}`` carries sensors ``g * sensors_per_gateway ...``;
    topic ``weather/{kind}``; every message is ``message_bytes`` long.

    The loop runs over sample instants (300 for 5 minutes), vectorised over
    all sensors.
    """
    _check_rng(rng)
    g = _count("n_gateways", n_gateways)
    dur = _positive("duration_s", duration_s)
    spg = (
        params.sensors_per_gateway
        if sensors_per_gateway is None
        else _count("sensors_per_gateway", sensors_per_gateway)
    )
    s = g * spg
    dt = params.sample_interval_s
    h = np.float32(params.threshold)
    phase = rng.random(s) * dt
    order_phase = np.argsort(phase, kind="stable")
    rank = np.empty(s, dtype=np.int64)
    rank[order_phase] = np.arange(s)
    dev = rng.uniform(-params.threshold, params.threshold, s).astype(np.float32)
    steps = int(math.ceil(dur / dt))
    sd = params.step_sd_night + (params.step_sd_noon - params.step_sd_night) * daylight(
        t0_of_day_s + np.arange(steps) * dt, params.sunrise_h, params.sunset_h
    )
    times, sensors = [], []
    scratch = np.empty(s, dtype=np.float32)
    for k in range(steps):
        rng.standard_normal(s, dtype=np.float32, out=scratch)
        scratch *= np.float32(sd[k])
        dev += scratch
        np.abs(dev, out=scratch)
        fired = np.flatnonzero(scratch >= h)
        if len(fired):
            dev[fired] = 0.0
            fired = fired[np.argsort(rank[fired], kind="stable")]  # in phase order within the step
            t = k * dt + phase[fired]
            ok = t < dur
            times.append(t[ok])
            sensors.append(fired[ok].astype(np.int32))
    del scratch, dev, rank, order_phase
    t = np.concatenate(times) if times else np.empty(0)
    del times
    sensor = np.concatenate(sensors) if sensors else np.empty(0, dtype=np.int32)
    del sensors
    kinds = tuple(params.sensor_kinds)
    gateway = sensor // np.int32(spg)
    sensor %= np.int32(len(kinds))
    return Trace.from_arrays(
        t,
        gateway,
        sensor,
        np.full(len(t), params.message_bytes, dtype=np.int64),
        publisher_names=_names(prefix, g),
        topic_names=[f"weather/{k}" for k in kinds],
        t0_of_day_s=t0_of_day_s,
        sort=False,
        where="weather_sensors",
    )


@dataclass(frozen=True, kw_only=True)
class CarSharingParams(_Documented):
    """Complex sensors (car sharing): per-car JSON status reports polled once a minute."""

    poll_interval_s: float = _doc(60.0, HAPP_2017, "status of every car polled once a minute")
    operators: tuple = _doc(("operator_a", "operator_b"), HAPP_2017, "two car-sharing operators")
    operator_share: tuple = _doc((0.5, 0.5), ASSUMPTION, "fraction of the cars of each operator")
    size_mean_bytes: tuple = _doc(
        (220.0, 440.0),
        CAR2GO_V21,
        "mean JSON report size per operator (the publication: steady over the day, different between operators): "
        "one vehicle's record of two public operator APIs, car2go v2.1 (219 B, 213-233 B in public samples) and "
        "Share Now/Free2move (441 B; SHARE_NOW in models/loads/generators.py); which operators the study polled, and "
        "whether it published one record per message, is not known (an assumption)",
    )
    size_cv: tuple = _doc((0.05, 0.08), ASSUMPTION, "coefficient of variation of the report size per operator")
    available_base: float = _doc(0.9, ASSUMPTION, "fraction of cars available (reported) outside rush hours")
    morning_dip_h: float = _doc(9.0, HAPP_2017, "availability dips around 9:00")
    morning_dip_width_h: float = _doc(1.0, ASSUMPTION, "standard deviation of the morning dip, hours")
    morning_dip_depth: float = _doc(0.3, ASSUMPTION, "fraction of available cars rented at the morning peak")
    evening_dip_h: tuple = _doc((17.0, 20.0), HAPP_2017, "availability dips between 17:00 and 20:00")
    evening_dip_depth: float = _doc(0.4, ASSUMPTION, "fraction of available cars rented in the evening dip")

    def __post_init__(self):
        self._check(
            positive=("poll_interval_s", "morning_dip_width_h"),
            probabilities=("available_base", "morning_dip_depth", "evening_dip_depth"),
        )
        k = len(self.operators)
        if k < 1 or len(self.operator_share) != k or len(self.size_mean_bytes) != k or len(self.size_cv) != k:
            raise ConfigError("CarSharingParams.operators", self.operators, "one share, mean size and cv per operator")
        if any(x < 0 for x in self.operator_share) or not sum(self.operator_share) > 0:
            raise ConfigError("CarSharingParams.operator_share", self.operator_share, "shares >= 0, not all 0")

    def availability(self, tod_s):
        """Probability that a car is available (so reported) at time of day ``tod_s``."""
        h = np.asarray(tod_s, dtype=float) % DAY_S / 3600.0
        morning = self.morning_dip_depth * np.exp(-0.5 * ((h - self.morning_dip_h) / self.morning_dip_width_h) ** 2)
        a, b = self.evening_dip_h
        ramp = 0.5  # hours of smooth edge (assumption)
        evening = self.evening_dip_depth * np.clip(np.minimum(h - a + ramp, b + ramp - h) / ramp, 0.0, 1.0)
        return self.available_base * (1.0 - np.maximum(morning, evening))


def car_sharing(
    rng,
    params: CarSharingParams = CarSharingParams(),
    *,
    n_cars,
    n_publishers,
    duration_s,
    t0_of_day_s=0.0,
    prefix="cs",
):
    """Status reports of ``n_cars`` cars, one poll per car per ``poll_interval_s``.

    A car is reported at a poll when it is available, with probability
    :meth:`CarSharingParams.availability` drawn independently per poll (an
    assumption: rentals have no duration here). Car ``i`` belongs to an
    operator drawn by ``operator_share`` and is carried by publisher
    ``cs{i % n_publishers}``; topic ``carsharing/{operator}``; sizes are
    log-normal per operator.
    """
    _check_rng(rng)
    cars = _count("n_cars", n_cars)
    pubs = _count("n_publishers", n_publishers)
    dur = _positive("duration_s", duration_s)
    period = params.poll_interval_s
    share = np.asarray(params.operator_share, dtype=float)
    op = np.searchsorted(np.cumsum(share / share.sum()), rng.random(cars), side="right").clip(0, len(share) - 1)
    phase = rng.random(cars) * period
    polls = int(math.ceil(dur / period))
    t = (np.arange(polls)[:, None] * period + phase[None, :]).ravel()  # poll-major: nearly sorted
    car = np.tile(np.arange(cars), polls)
    keep = (t < dur) & (rng.random(len(t)) < params.availability(t0_of_day_s + t))
    t, car = t[keep], car[keep]
    order = np.argsort(t, kind="stable")
    t, car = t[order], car[order]
    ops = op[car]
    mean = np.asarray(params.size_mean_bytes, dtype=float)[ops]
    cv = np.asarray(params.size_cv, dtype=float)[ops]
    sigma2 = np.log1p(cv**2)
    sizes = np.rint(np.exp(np.log(mean) - sigma2 / 2 + np.sqrt(sigma2) * rng.standard_normal(len(t))))
    return Trace.from_arrays(
        t,
        (car % pubs).astype(np.int32),
        ops.astype(np.int32),
        sizes.astype(np.int64),
        publisher_names=_names(prefix, pubs),
        topic_names=[f"carsharing/{o}" for o in params.operators],
        t0_of_day_s=t0_of_day_s,
        sort=False,
        where="car_sharing",
    )


@dataclass(frozen=True, kw_only=True)
class CameraParams(_Documented):
    """Multimedia sensors (traffic cameras): a still image every 30 s, duplicates dropped."""

    image_interval_s: float = _doc(30.0, HAPP_2017, "a still image every 30 s (two per minute)")
    size_night_bytes: float = _doc(
        40_000.0,
        ASSUMPTION,
        "mean JPEG size at night; with size_noon_bytes and the daylight half-sine the mean over a day is 62 kB, "
        "against 60 kB per public traffic-webcam still (WEBCAMS_2011: Thakur et al. 2011, 7.5 TB / 125 M images); "
        "the night/noon split is not sourced",
    )
    size_noon_bytes: float = _doc(
        110_000.0,
        ASSUMPTION,
        "mean JPEG size at noon (the publication: size grows towards noon); the level is checked against WEBCAMS_2011 "
        "(see size_night_bytes), the noon/night ratio 2.75 is assumed",
    )
    size_cv: float = _doc(0.15, ASSUMPTION, "coefficient of variation of the image size")
    duplicate_probability_night: float = _doc(
        0.10, ASSUMPTION, "chance that an image repeats the previous one exactly, at night"
    )
    duplicate_probability_day: float = _doc(0.02, ASSUMPTION, "the same by full daylight")
    sunrise_h: float = _doc(6.0, ASSUMPTION, "daylight half-sine from sunrise ...")
    sunset_h: float = _doc(18.0, ASSUMPTION, "... to sunset")

    def __post_init__(self):
        self._check(
            positive=("image_interval_s", "size_night_bytes", "size_noon_bytes"),
            probabilities=("duplicate_probability_night", "duplicate_probability_day"),
        )
        _positive("CameraParams.size_cv", self.size_cv, True)

    def mean_size_bytes(self, tod_s):
        return self.size_night_bytes + (self.size_noon_bytes - self.size_night_bytes) * daylight(
            tod_s, self.sunrise_h, self.sunset_h
        )


def traffic_cameras(
    rng, params: CameraParams = CameraParams(), *, n_cameras, duration_s, t0_of_day_s=0.0, prefix="cam"
):
    """Images of ``n_cameras`` cameras, one publisher and one topic (``camera/{i}``) per camera.

    An image that duplicates the previous one (probability interpolated
    between night and day by daylight) is dropped, as in the publication.
    """
    _check_rng(rng)
    n = _count("n_cameras", n_cameras)
    dur = _positive("duration_s", duration_s)
    period = params.image_interval_s
    phase = rng.random(n) * period
    shots = int(math.ceil(dur / period))
    t = (np.arange(shots)[:, None] * period + phase[None, :]).ravel()
    cam = np.tile(np.arange(n), shots)
    light = daylight(t0_of_day_s + t, params.sunrise_h, params.sunset_h)
    p_dup = (
        params.duplicate_probability_night
        + (params.duplicate_probability_day - params.duplicate_probability_night) * light
    )
    keep = (t < dur) & (rng.random(len(t)) >= p_dup)
    t, cam = t[keep], cam[keep]
    order = np.argsort(t, kind="stable")
    t, cam = t[order], cam[order]
    mean = params.mean_size_bytes(t0_of_day_s + t)
    sigma2 = math.log1p(params.size_cv**2)
    sizes = np.rint(mean * np.exp(-sigma2 / 2 + math.sqrt(sigma2) * rng.standard_normal(len(t))))
    return Trace.from_arrays(
        t,
        cam.astype(np.int32),
        cam.astype(np.int32),
        sizes.astype(np.int64),
        publisher_names=_names(prefix, n),
        topic_names=[f"camera/{i}" for i in range(n)],
        t0_of_day_s=t0_of_day_s,
        sort=False,
        where="traffic_cameras",
    )
