"""One Mosquitto run with ``perf stat`` counting on the broker process (shared by the scripts here).

:func:`count_run` starts Mosquitto capped at :data:`CAP_CORES` and pinned to core 1 (clients on
core 0), runs the harness's load generator and counts ``events`` on the broker over
:data:`COUNT_FOR_S` of the measurement window (``perf stat -p PID``, enabled through its control
descriptor). Needs Mosquitto (scripts/install_brokers.sh), perf (linux-perf) and cgroup CPU
control (root).
"""

import os
import tempfile
import threading
import time

from pubsim.calibration.harness.brokers import BrokerSpec, broker
from pubsim.calibration.harness.loadgen import LoadSpec, run_load
from pubsim.calibration.harness.passes import parse_perf_events
from pubsim.calibration.harness.perfctl import ControlledPerf

CAP_CORES = 0.2
COUNT_FROM_S, COUNT_FOR_S = 3.0, 3.0  # after the clients' set-up and the warm-up; inside the window


def _count(pid, events, out):
    """Count ``events`` on ``pid`` for COUNT_FOR_S, from COUNT_FROM_S after the call."""
    perf = ControlledPerf(["stat", "-x", ",", "-e", ",".join(events), "-p", pid]).start()
    time.sleep(COUNT_FROM_S)
    perf.enable(f"counting on the broker {pid}")
    time.sleep(COUNT_FOR_S)
    counts = parse_perf_events(perf.stop(30))
    out.update({e: counts[e] for e in events if counts.get(e) is not None})


def measured_run(*, fanout, rate_per_s, payload_bytes, measure, env=None, workdir=None):
    """The run's summary, ``measure(pid)`` run in a thread on the broker meanwhile (it times itself
    from the start of the load: :data:`COUNT_FROM_S`, :data:`COUNT_FOR_S`).

    Mosquitto capped at :data:`CAP_CORES` on core 1, one publisher and ``fanout`` subscribers on
    core 0; ``env``: extra environment of the broker (and of the clients, which inherit it too).
    """
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        spec_b = BrokerSpec(kind="mosquitto", cpus=(1,), cpu_cap_fraction=CAP_CORES)
        with broker(spec_b, workdir or tempfile.mkdtemp()) as rb:
            spec = LoadSpec(
                protocol="mqtt",
                rate_per_s=rate_per_s,
                duration_s=COUNT_FROM_S + COUNT_FOR_S + 2.0,
                warmup_s=1.0,
                cooldown_s=0.5,
                pub_port=rb.port,
                sub_port=rb.port,
                subscribers=fanout,
                fanout=fanout,
                payload_bytes=payload_bytes,
                pub_cpus=(0,),
                sub_cpus=(0,),
            )
            side = threading.Thread(target=measure, args=(rb.pid,))
            side.start()
            summary = run_load(spec).summary()
            side.join()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return summary


def count_run(*, fanout, rate_per_s, payload_bytes, events, env=None):
    """Counts of ``events`` per message (``task-clock`` in CPU seconds) and the run's summary
    (:func:`measured_run`)."""
    counts = {}
    summary = measured_run(
        fanout=fanout,
        rate_per_s=rate_per_s,
        payload_bytes=payload_bytes,
        measure=lambda pid: _count(pid, events, counts),
        env=env,
    )
    messages = rate_per_s * COUNT_FOR_S
    per = {k: v / messages for k, v in counts.items()}
    if "task-clock" in per:
        per["task-clock"] /= 1e3  # perf's task-clock is in ms
    return per, summary
