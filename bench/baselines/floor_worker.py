"""A floor worker: a DEALER that runs each cloudpickled call it receives and replies.

Run as ``python -m bench.baselines.floor_worker ENDPOINT IDENTITY``; CURVE keys, when
the endpoint is tcp, come in the ``BENCH_FLOOR_CURVE`` environment variable (JSON).
"""

from __future__ import annotations

import json
import os
import sys

import zmq

from bench.baselines.floor_wire import READY, STOP, dumps, recv, send


def main() -> None:
    endpoint, identity = sys.argv[1], sys.argv[2]
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity.encode())
    sock.setsockopt(zmq.LINGER, 1000)
    sock.setsockopt(zmq.SNDHWM, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    curve = os.environ.get("BENCH_FLOOR_CURVE")
    if curve:
        keys = json.loads(curve)
        sock.curve_serverkey = keys["server_public"].encode()
        sock.curve_publickey = keys["client_public"].encode()
        sock.curve_secretkey = keys["client_secret"].encode()
    sock.connect(endpoint)
    sock.send(READY)
    while True:
        _, call_id, message = recv(sock)
        if isinstance(message, bytes) and message == STOP:
            break
        fn, args = message
        send(sock, [], dumps(call_id, fn(*args)))
    sock.close()
    context.term()


if __name__ == "__main__":
    main()
