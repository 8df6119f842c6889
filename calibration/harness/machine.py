"""A reference measurement of the machine, recorded with every campaign.

Calibrated broker costs are a property of the machine on the day they were
measured. On the project's VM, Mosquitto's CPU per message on loopback grew
by about 1.3x between two days (2026-11-23 and 2026-11-25) while a
single-thread CPU benchmark (sysbench ``cpu``) stayed the same: the cost of
the loopback system-call path moved, not the CPU. A campaign therefore
records the round-trip rate of a TCP loopback ping-pong (one byte each way
between two processes, the path a broker's reads and writes take), so that
two campaigns can be compared before their brokers are.
"""

from __future__ import annotations

import os
import socket
import statistics
import time

__all__ = ["loopback_round_trips_per_s", "machine_reference"]


def loopback_round_trips_per_s(duration_s: float = 0.3) -> float:
    """Round trips per second of a one-byte TCP ping-pong on 127.0.0.1.

    A forked child echoes each byte back; the parent sends and waits for
    ``duration_s`` seconds of wall time.

    Parameters
    ----------
    duration_s : float
        Wall time to measure for, s.

    Returns
    -------
    float
        Round trips per second of wall time.
    """
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        pid = os.fork()
        if pid == 0:  # the echo child: never returns
            _echo(port)
        conn, _ = server.accept()
    try:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n, start = 0, time.perf_counter()
        end = start + duration_s
        while True:
            conn.sendall(b"x")
            if not conn.recv(1):
                raise OSError("the echo process closed the connection")
            n += 1
            if n % 64 == 0 and time.perf_counter() >= end:
                break
        return n / (time.perf_counter() - start)
    finally:
        conn.close()
        os.waitpid(pid, 0)


def _echo(port: int) -> None:
    code = 0
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                b = s.recv(1)
                if not b:
                    break
                s.sendall(b)
    except OSError:
        code = 1
    os._exit(code)


def machine_reference(repeats: int = 3, duration_s: float = 0.3) -> dict:
    """The machine reference of a campaign's ``meta.json``: the median of ``repeats`` ping-pongs.

    Returns
    -------
    dict
        ``loopback_round_trips_per_s`` (median), ``samples`` and ``method``.
    """
    samples = [loopback_round_trips_per_s(duration_s) for _ in range(repeats)]
    return {
        "loopback_round_trips_per_s": statistics.median(samples),
        "samples": samples,
        "method": f"one-byte TCP ping-pong on 127.0.0.1 between two processes, {duration_s} s x {repeats}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
