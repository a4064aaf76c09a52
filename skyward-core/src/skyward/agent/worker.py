"""A worker process: runs one task at a time for its node's supervisor.

It talks only to its supervisor, over an ipc socket in the node's private run
directory, so it never receives a payload from anyone but the pool's client (through
the supervisor, which authenticated that client).
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import signal
import sys
import traceback
from collections import OrderedDict
from typing import Any

import zmq

from skyward.agent.config import WORKER_ENV_VAR
from skyward.runtime.context import InstanceInfo, set_instance_info
from skyward.transport import serialize, wire

_FN_CACHE_SIZE = 64


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL us when the supervisor dies, so no worker outlives its node."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        except OSError:
            pass


def _load_fn(cache: OrderedDict[bytes, Any], key: bytes, raw: Any) -> Any:
    fn = cache.get(key)
    if fn is None:
        fn = serialize.loads([raw])
        cache[key] = fn
        if len(cache) > _FN_CACHE_SIZE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return fn


def _encode_exception(exc: BaseException) -> list[serialize.Frame]:
    tb = "".join(traceback.format_exception(exc))
    try:
        return serialize.dumps((exc, tb))
    except Exception:
        # The exception itself cannot travel (unpicklable attributes): send its text.
        from skyward.errors import RemoteError

        return serialize.dumps((RemoteError(f"{type(exc).__qualname__}: {exc}"), tb))


def run_task(cache: OrderedDict[bytes, Any], payload: list[Any]) -> tuple[wire.Status, list[Any]]:
    """Run one task payload ``[fn_key, fn_bytes, *call_frames]``; never raises."""
    try:
        fn = _load_fn(cache, bytes(payload[0]), payload[1])
        args, kwargs = serialize.loads(payload[2:])
        result = fn(*args, **kwargs)
    except BaseException as exc:  # user code may raise anything, SystemExit included
        return wire.Status.RAISED, _encode_exception(exc)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    try:
        return wire.Status.OK, serialize.dumps(result)
    except Exception as exc:
        error = TypeError(f"the result of {getattr(fn, '__qualname__', fn)} cannot be pickled: {exc}")
        return wire.Status.RAISED, _encode_exception(error)


def main() -> None:
    _die_with_parent()
    config = json.loads(os.environ[WORKER_ENV_VAR])
    info = InstanceInfo(**config["info"])
    set_instance_info(info)

    from skyward.plugins.registry import get_plugin_manager

    get_plugin_manager().hook.skyward_worker_startup(info=info)

    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, f"w{info.worker}".encode())
    sock.setsockopt(zmq.LINGER, 2000)
    sock.connect(config["backend"])
    sock.send_multipart([wire.READY, wire.encode_json({"pid": os.getpid()})])

    cache: OrderedDict[bytes, Any] = OrderedDict()
    while True:
        frames = sock.recv_multipart(copy=False)
        kind = frames[0].bytes
        if kind == wire.STOP:
            break
        if kind == wire.CLUSTER:
            info = dataclasses.replace(info, **wire.decode_json(frames[1].bytes))
            set_instance_info(info)
            continue
        if kind != wire.TASK:
            continue
        task_id, _worker = wire.parse_task_header(frames[1].bytes)
        status, out = run_task(cache, frames[2:])
        sock.send_multipart([wire.RESULT, wire.result_header(task_id, status), *out], copy=False)
    sock.close()
    context.term()


if __name__ == "__main__":
    main()
