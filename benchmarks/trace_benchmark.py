"""Speed and memory of trace-driven loads (issue 4).

1. Weather class of SYSTEMS.md §5: 600 gateways x 1,000 sensors for 5
   simulated minutes at noon (threshold sending over a 1 Hz signal: 180 million
   samples), messages generated per second of wall time.
2. Scale-up of a real CampusIoT device (Saint Eynard station) by unbiased
   resampling: 600 gateways x 1,000 devices for 5 minutes.
3. Reading rate of ../shared/traces/mqttset/flood.pcap (capture records and
   MQTT packets per second).

Peak memory is the process's maximum resident set size (getrusage), printed
after each stage (it only grows).

    python benchmarks/trace_benchmark.py [--gateways 600] [--sensors 1000] [--duration 300]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from pubsim.models.loads import generators as G
from pubsim.models.loads import replay as R
from pubsim.models.loads.readers import read_campusiot, read_mqtt_pcap
from pubsim.sim.rng import StreamFactory

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gateways", type=int, default=600)
    ap.add_argument("--sensors", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    streams = StreamFactory(a.seed)
    print(f"baseline peak RSS {peak_mb():.0f} MB")

    t0 = time.perf_counter()
    trace = G.weather_sensors(
        streams.generator("weather"),
        n_gateways=a.gateways,
        sensors_per_gateway=a.sensors,
        duration_s=a.duration,
        t0_of_day_s=12 * 3600,
    )
    dt = time.perf_counter() - t0
    print(
        f"weather {a.gateways} gateways x {a.sensors} sensors, {a.duration:g} s at noon: "
        f"{len(trace):,} messages in {dt:.2f} s = {len(trace) / dt:,.0f} messages/s "
        f"({a.gateways * a.sensors * a.duration / dt:,.0f} sensor samples/s); "
        f"frame {trace.frame.memory_usage(deep=True).sum() / 1e6:.0f} MB; peak RSS {peak_mb():.0f} MB"
    )
    del trace

    src = TRACES / "campusiot" / "sainteynard-d1d1e80000000033.ndjson.gz"
    if src.exists():
        device, _ = read_campusiot(src)
        t0 = time.perf_counter()
        pools = R.IntervalPools(device)
        up = R.scale_up(
            pools,
            streams.generator("scale-up"),
            n_gateways=a.gateways,
            devices_per_gateway=a.sensors,
            duration_s=a.duration,
            start_tod_s=12 * 3600.0,
        )
        dt = time.perf_counter() - t0
        print(
            f"resampled scale-up of {src.name}: {a.gateways} x {a.sensors} devices, {a.duration:g} s: "
            f"{len(up):,} messages in {dt:.2f} s = {len(up) / dt:,.0f} messages/s; peak RSS {peak_mb():.0f} MB"
        )
        del up
    else:
        print(f"{src} absent: resampled scale-up not measured")

    flood = TRACES / "mqttset" / "flood.pcap"
    if flood.exists():
        best = None
        for _ in range(3):
            trace, s = read_mqtt_pcap(flood)
            best = s if best is None or s.read_s < best.read_s else best
        print(
            f"flood.pcap (best of 3): {best.packets} records, {best.bytes / 1e6:.2f} MB, {best.publishes:,} PUBLISH "
            f"in {best.read_s * 1e3:.0f} ms = {best.packets_per_s:,.0f} packets/s, "
            f"{best.mqtt_packets_per_s:,.0f} MQTT packets/s, {best.megabytes_per_s:.1f} MB/s; "
            f"{best.malformed} malformed; peak RSS {peak_mb():.0f} MB"
        )
        for name in ("benign.pcap", "malformed.pcap"):
            _, s = read_mqtt_pcap(TRACES / "mqttset" / name)
            print(
                f"{name}: {s.packets} records, {s.publishes} client PUBLISH, "
                f"{s.packets_per_s:,.0f} packets/s, {s.malformed} malformed"
            )
    else:
        print(f"{flood} absent: pcap reading rate not measured")


if __name__ == "__main__":
    main()
