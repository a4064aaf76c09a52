"""Timestamps of the stages a task goes through, in the client and in the worker.

Installed (by ``site/sitecustomize.py``) in every process of a traced run, it wraps a few
functions that each stage calls and records ``(stage, task ids, monotonic ns)``.
CLOCK_MONOTONIC is shared by every process on a Linux machine, so stages recorded in
different processes can be subtracted. Events are kept in memory and written to
``$BENCH_TRACE_DIR/<role>-<pid>.jsonl`` when the process exits (or gets SIGTERM).

The wrappers call the original function and return its result unchanged; each event
costs about a microsecond, which the breakdown includes. The hooks follow the wire
format of skyward.transport.wire (TASKS / RESULTS chunks, client <-> worker direct).
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_events: list[tuple[str, list[int], int]] = []
_role = "client"
_now = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: comparable across processes


def record(stage: str, tasks: list[int] | None = None) -> None:
    _events.append((stage, tasks or [], _now()))


def _dump() -> None:
    directory = os.environ.get("BENCH_TRACE_DIR")
    if not directory or not _events:
        return
    path = Path(directory) / f"{_role}-{os.getpid()}.jsonl"
    with path.open("w") as out:
        for stage, tasks, t in _events:
            out.write(json.dumps([stage, tasks, t]) + "\n")
    _events.clear()


def _on_sigterm(signum: int, frame: object) -> None:
    _dump()
    os._exit(0)


def _ids(entries: Any) -> list[int]:
    return [int(e[0]) for e in entries]


def _wrap(owner: Any, name: str, before: str | None, after: str | None,
          ids_in: Callable[..., list[int]] | None = None,
          ids_out: Callable[[Any], list[int]] | None = None) -> None:  # fmt: skip
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            _events.append((before, ids_in(*args) if ids_in else [], _now()))
        result = original(*args, **kwargs)
        if after:
            _events.append((after, ids_out(result) if ids_out else [], _now()))
        return result

    is_static = isinstance(inspect.getattr_static(owner, name), staticmethod)
    setattr(owner, name, staticmethod(wrapper) if is_static else wrapper)


def install() -> None:
    global _role
    import zmq

    from skyward.transport import serialize, wire

    cmdline = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    if "skyward.agent.worker" in cmdline:
        _role = "worker"
        _wrap(wire, "unpack_tasks", None, "worker.recv", ids_out=_ids)  # right after recv
        _wrap(wire, "pack_results", "worker.send", None, ids_in=_ids)  # right before send
        _wrap(serialize, "loads", "worker.loads_start", "worker.loads_end")
        _wrap(serialize, "dumps", "worker.dumps_start", "worker.dumps_end")
        if hasattr(serialize, "dumps_result"):
            _wrap(serialize, "dumps_result", "worker.dumps_start", "worker.dumps_end")
        _wrap(zmq.Poller, "poll", None, "worker.poll_return")
        _wrap(zmq.Socket, "send_multipart", None, "worker.sent")
        if hasattr(wire, "send_frames"):
            _wrap(wire, "send_frames", None, "worker.sent")
        signal.signal(signal.SIGTERM, _on_sigterm)
    elif "skyward.agent" in cmdline:
        return  # the agent is the control plane now: no task passes through it
    else:
        _role = "client"
        from skyward.api import pool
        from skyward.transport import client, socket_loop

        _wrap(pool.ComputePool, "_payload", "client.payload_start", "client.payload_end")
        _wrap(client.PoolClient, "run", "client.call_enter", "client.call_exit")
        _wrap(client.PoolClient, "submit_many", "client.submit_start", "client.submit_end")
        _wrap(socket_loop.SocketLoop, "_drain_wake", "io.wake_start", "io.wake_end")
        _wrap(wire, "pack_tasks", "client.send", None, ids_in=_ids)  # right before send
        _wrap(wire, "unpack_results", None, "client.recv", ids_out=_ids)  # right after recv
        _wrap(serialize, "loads", "client.loads_start", "client.loads_end")
        _wrap(zmq.Socket, "send_multipart", None, "client.sent")
        if hasattr(wire, "send_frames"):
            _wrap(wire, "send_frames", None, "client.sent")
        _wrap(zmq.Socket, "poll", None, "client.poll_return")
        _wrap(socket_loop.SocketLoop, "_resolve", "io.resolve_start", "io.resolve_end",
              ids_in=lambda self, worker, entries, *a: [int(e[0]) for e in entries])  # fmt: skip
    atexit.register(_dump)
