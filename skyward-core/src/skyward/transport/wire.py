"""The frames exchanged between client, agent and workers.

Every message starts with a one-byte kind. Control messages carry JSON (never pickle,
so reading one cannot run code); task and result payloads carry serialised frames.

client -> agent   TASK    [T, header(task_id, worker), *payload]
                  HELLO   [?]            agent answers INFO once its workers are up
                  PING    [H]            keeps the agent alive (see agent grace period)
                  STOP    [S]            graceful shutdown
                  CLUSTER [C, json]      head address/port, sent once every node is up
agent -> client   RESULT  [R, header(task_id, status), *payload]
                  INFO    [I, json]
                  LOG     [L, json]      lines a worker printed
                  METRICS [M, json]
                  PONG    [H]            agent liveness
                  NOTICE  [N, json]      agent-level events (ttl passed, interruption)
agent -> worker   TASK as above, header worker field unused
worker -> agent   READY   [W, json], RESULT as above
"""

from __future__ import annotations

import json
import struct
from enum import IntEnum
from typing import Any

TASK = b"T"
HELLO = b"?"
PING = b"H"
STOP = b"S"
RESULT = b"R"
INFO = b"I"
LOG = b"L"
METRICS = b"M"
NOTICE = b"N"
READY = b"W"
CLUSTER = b"C"

ANY_WORKER = -1

_TASK_HEADER = struct.Struct("!Qi")
_RESULT_HEADER = struct.Struct("!QB")


class Status(IntEnum):
    OK = 0
    RAISED = 1  # payload is the pickled exception (with remote traceback)
    DIED = 2  # payload is JSON describing how the worker died
    CANCELLED = 3


def task_header(task_id: int, worker: int = ANY_WORKER) -> bytes:
    return _TASK_HEADER.pack(task_id, worker)


def parse_task_header(raw: Any) -> tuple[int, int]:
    task_id, worker = _TASK_HEADER.unpack(bytes(raw))
    return int(task_id), int(worker)


def result_header(task_id: int, status: Status) -> bytes:
    return _RESULT_HEADER.pack(task_id, int(status))


def parse_result_header(raw: Any) -> tuple[int, Status]:
    task_id, status = _RESULT_HEADER.unpack(bytes(raw))
    return int(task_id), Status(status)


def encode_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def decode_json(raw: Any) -> Any:
    return json.loads(bytes(raw))
