"""The floor: the least a pool round trip can cost with this stack.

A raw pyzmq ROUTER in the caller, one DEALER per worker process, a cloudpickled call out
and its pickled reply back, nothing else: no agent hop, no scheduler, no futures. Large
buffers travel out of band with ``copy=False`` on both sides (zero-copy in user space).
``transport="curve"`` is the same over tcp loopback with CURVE encryption, the path a
cross-machine Skyward node uses.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import zmq

from bench.baselines.base import WORKERS
from bench.baselines.floor_wire import READY, STOP, dumps, recv, send

_START_TIMEOUT = 60.0
WINDOW = 8  # calls in flight per worker during ``map``: enough to hide the round trip


class FloorSystem:
    def __init__(
        self,
        run_dir: Path,
        transport: Literal["ipc", "curve"] = "ipc",
        workers: int = WORKERS,
        repo_root: Path | None = None,
    ) -> None:
        if transport not in ("ipc", "curve"):
            raise ValueError(f"FloorSystem(transport={transport!r}): use 'ipc' or 'curve'")
        self.name = "floor" if transport == "ipc" else "floor+curve"
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._sock = self._context.socket(zmq.ROUTER)
        for option, value in ((zmq.ROUTER_MANDATORY, 1), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0)):
            self._sock.setsockopt(option, value)
        env = dict(os.environ)
        if transport == "ipc":
            run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            endpoint = f"ipc://{run_dir}/floor-{os.getpid()}-{id(self)}.sock"
            self._sock.bind(endpoint)
        else:
            server_public, server_secret = zmq.curve_keypair()
            client_public, client_secret = zmq.curve_keypair()
            self._sock.curve_server = True
            self._sock.curve_secretkey = server_secret
            port = self._sock.bind_to_random_port("tcp://127.0.0.1")
            endpoint = f"tcp://127.0.0.1:{port}"
            env["BENCH_FLOOR_CURVE"] = json.dumps(
                {
                    "server_public": server_public.decode(),
                    "client_public": client_public.decode(),
                    "client_secret": client_secret.decode(),
                }
            )
        self._identities = [f"f{i}".encode() for i in range(workers)]
        self._processes = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.baselines.floor_worker", endpoint, ident.decode()],
                env=env,
                cwd=repo_root,
                stdin=subprocess.DEVNULL,
            )
            for ident in self._identities
        ]
        self._next = itertools.cycle(self._identities)
        self._ids = itertools.count()
        self._wait_ready()

    def _wait_ready(self) -> None:
        waiting = set(self._identities)
        deadline = time.monotonic() + _START_TIMEOUT
        while waiting:
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"floor workers {sorted(waiting)} did not start within {_START_TIMEOUT:g} s")
            for process in self._processes:
                if process.poll() is not None:
                    self.close()
                    raise RuntimeError(f"a floor worker exited with status {process.returncode} while starting")
            if self._sock.poll(100):
                ident, kind = self._sock.recv_multipart()
                if kind == READY:
                    waiting.discard(ident)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        ident = next(self._next)
        send(self._sock, [ident], dumps(next(self._ids), (fn, args)))
        _, _, result = recv(self._sock, prefix=1)
        return result

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        results: list[Any] = [None] * len(items)
        pending = deque(enumerate(items))
        inflight = dict.fromkeys(self._identities, 0)

        def send_next(ident: bytes) -> None:
            index, item = pending.popleft()
            send(self._sock, [ident], dumps(index, (fn, (item,))))
            inflight[ident] += 1

        for ident in self._identities:
            while pending and inflight[ident] < WINDOW:
                send_next(ident)
        remaining = len(items)
        while remaining:
            (ident,), index, result = recv(self._sock, prefix=1)
            results[index] = result
            remaining -= 1
            inflight[ident] -= 1
            if pending:
                send_next(ident)
        return results

    def broadcast(self, fn: Callable[[], Any]) -> list[Any]:
        """One call on every worker: every request is sent before any reply is read."""
        for call_id, ident in enumerate(self._identities):
            send(self._sock, [ident], dumps(call_id, (fn, ())))
        results: list[Any] = [None] * len(self._identities)
        for _ in self._identities:
            _, call_id, result = recv(self._sock, prefix=1)
            results[call_id] = result
        return results

    def close(self) -> None:
        for ident in self._identities:
            try:
                send(self._sock, [ident], dumps(0, STOP))
            except zmq.ZMQError:
                pass  # never connected, or already gone
        for process in self._processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._sock.close(linger=0)
        self._context.term()
