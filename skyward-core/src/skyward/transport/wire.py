"""The frames exchanged between the pool's client, node agents and workers.

Data plane, client <-> worker, direct (one hop: no relay through the agent):
    TASKS    [T, meta, *frames]   meta: count, then per task (task_id, frame count);
                                  each task's frames: fn_key, fn_bytes (b"" when the worker
                                  already has fn_key cached), *argument frames
    RESULTS  [R, meta, *frames]   meta: count, then per result (task_id, status, frame count)

Control plane, client <-> agent (JSON, never pickle: reading one cannot run code):
    HELLO [?]  -> INFO [I, json]   once every worker is up: versions, worker endpoints
    PING  [H]  both ways, every second: liveness in both directions
    STOP  [S]  -> BYE [B]          the agent flushes workers' output, then says goodbye
    CLUSTER [C, json]              head address/port, sent once every node is up
    LOG [L, json], METRICS [M, json], NOTICE [N, json] (worker died/ready, TTL passed)

Agent <-> worker: READY [W, json] (worker -> agent), CLUSTER, STOP (agent -> worker).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Any

TASKS = b"T"
RESULTS = b"R"
HELLO = b"?"
PING = b"H"
STOP = b"S"
BYE = b"B"
INFO = b"I"
LOG = b"L"
METRICS = b"M"
NOTICE = b"N"
READY = b"W"
CLUSTER = b"C"


class Status(IntEnum):
    OK = 0
    RAISED = 1  # frames: the pickled (exception, remote traceback text)


_COUNT = struct.Struct("!I")
_TASK = struct.Struct("!QI")
_RESULT = struct.Struct("!QBI")


def pack_tasks(entries: Sequence[tuple[int, int]]) -> bytes:
    """``entries``: (task_id, frame count) per task."""
    return _COUNT.pack(len(entries)) + b"".join(_TASK.pack(t, n) for t, n in entries)


def unpack_tasks(raw: Any) -> list[tuple[int, int]]:
    data = bytes(raw)
    (count,) = _COUNT.unpack_from(data)
    return [_TASK.unpack_from(data, _COUNT.size + i * _TASK.size) for i in range(count)]


def pack_results(entries: Sequence[tuple[int, Status, int]]) -> bytes:
    return _COUNT.pack(len(entries)) + b"".join(_RESULT.pack(t, int(s), n) for t, s, n in entries)


def unpack_results(raw: Any) -> list[tuple[int, Status, int]]:
    data = bytes(raw)
    (count,) = _COUNT.unpack_from(data)
    out = []
    for i in range(count):
        task_id, status, n = _RESULT.unpack_from(data, _COUNT.size + i * _RESULT.size)
        out.append((task_id, Status(status), n))
    return out


def encode_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def decode_json(raw: Any) -> Any:
    return json.loads(bytes(raw))
