"""A ZeroMQ forwarder broker: ``zmq.proxy(XSUB, XPUB)`` on two loopback ports.

Run as ``python calibration/harness/zmqproxy.py --xsub PORT --xpub PORT2
[--hwm N]``: publishers connect their PUB sockets to the XSUB port,
subscribers their SUB sockets to the XPUB port. ``--hwm`` sets the high-water
marks of both sides (ZeroMQ drops messages beyond them). It runs until killed
(SIGTERM's default action ends it at once). It imports nothing of pubsim:
under a 0.1-core quota the package's import would take longer than the
broker's start timeout.
"""

from __future__ import annotations

import argparse
import sys


def _parse(argv):
    p = argparse.ArgumentParser(prog="zmqproxy.py", description=__doc__.splitlines()[0])
    p.add_argument("--xsub", type=int, required=True, help="port publishers connect to")
    p.add_argument("--xpub", type=int, required=True, help="port subscribers connect to")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--hwm", type=int, default=None, help="SNDHWM/RCVHWM of both sockets (default: ZeroMQ's 1000)")
    return p.parse_args(argv)


def main(argv=None):
    """Bind both sockets and forward until terminated."""
    import zmq  # optional heavy dependency: pyzmq, needed only when this proxy runs

    args = _parse(argv)
    ctx = zmq.Context()
    xsub, xpub = ctx.socket(zmq.XSUB), ctx.socket(zmq.XPUB)
    for sock in (xsub, xpub):
        sock.setsockopt(zmq.LINGER, 0)
        if args.hwm is not None:
            sock.setsockopt(zmq.SNDHWM, args.hwm)
            sock.setsockopt(zmq.RCVHWM, args.hwm)
    xsub.bind(f"tcp://{args.host}:{args.xsub}")
    xpub.bind(f"tcp://{args.host}:{args.xpub}")
    print(f"zmq proxy {zmq.zmq_version()} xsub {args.xsub} xpub {args.xpub}", flush=True)
    try:
        zmq.proxy(xsub, xpub)
    except (KeyboardInterrupt, SystemExit, zmq.ContextTerminated):
        pass
    finally:
        xsub.close(0)
        xpub.close(0)
        ctx.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
