"""The floor's message format, shared by its client and workers.

A message is ``[header + pickle, *buffers]``: the 8-byte call id and the cloudpickled
object (protocol 5) in one frame, then every out-of-band buffer (numpy arrays and other
PickleBuffer-capable objects) as a frame of its own. Small messages therefore cost one
copied frame (pyzmq's cheapest path), large buffers are never copied in user space:
they are sent and received with ``copy=False`` and unpickled in place.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import cloudpickle
import zmq

STOP = b"S"
READY = b"W"
_ID = struct.Struct("!Q")


def dumps(call_id: int, obj: object) -> list[Any]:
    buffers: list[pickle.PickleBuffer] = []
    head = cloudpickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return [_ID.pack(call_id) + head, *(b.raw() for b in buffers)]


def send(sock: zmq.Socket[bytes], prefix: list[bytes], frames: list[Any]) -> None:
    """``prefix`` (a ROUTER's peer identity) then the message; zero-copy only where it pays."""
    sock.send_multipart([*prefix, *frames], copy=len(frames) == 1)


def recv(sock: zmq.Socket[bytes], prefix: int = 0) -> tuple[list[bytes], int, Any]:
    """Receive one message: (prefix frames, call id, unpickled object). Small frames are
    copied (cheaper than wrapping them), buffer frames are received in place."""
    head_frames = [sock.recv() for _ in range(prefix + 1)]
    buffers = []
    while sock.rcvmore:
        buffers.append(sock.recv(copy=False).buffer)
    head = head_frames[-1]
    (call_id,) = _ID.unpack_from(head)
    return head_frames[:-1], call_id, pickle.loads(memoryview(head)[_ID.size :], buffers=buffers)
