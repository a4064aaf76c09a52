"""``wire.recv_frames``: a whole multipart message, in order, without asking the socket
per frame whether more follow (pyzmq's ``recv_multipart`` does, at ~1.8 us a frame)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import zmq

from skyward.transport import wire


def test_a_multipart_message_arrives_whole_and_in_order(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]]) -> None:
    sender, receiver = pair
    large = bytes(range(256)) * 1024  # zero-copy on the way out (ZERO_COPY_MIN)
    parts = [b"R", b"first", b"", large, b"last"]
    wire.send_frames(sender, parts)
    wire.send_frames(sender, [b"next message"])
    assert receiver.poll(5000)
    frames = wire.recv_frames(receiver, zmq.NOBLOCK)
    assert [bytes(f.buffer) for f in frames] == parts
    assert [bytes(f.buffer) for f in wire.recv_frames(receiver)] == [b"next message"]


def test_with_noblock_and_nothing_waiting_it_raises_again(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]]) -> None:
    _, receiver = pair
    with pytest.raises(zmq.Again):
        wire.recv_frames(receiver, zmq.NOBLOCK)


@dataclass
class _Part:
    data: bytes
    more: bool


class _SocketThatRefusesQueries:
    """Hands out prepared parts; asking it anything else fails the test."""

    def __init__(self, parts: list[bytes]) -> None:
        self._parts = [_Part(p, i < len(parts) - 1) for i, p in enumerate(parts)]
        self.flags: list[int] = []

    def recv(self, flags: int = 0, copy: bool = True) -> _Part:
        assert copy is False, "small and large parts alike are received in place"
        self.flags.append(flags)
        return self._parts.pop(0)

    def getsockopt(self, option: int) -> int:
        raise AssertionError(f"asked the socket for option {option} while receiving")


def test_each_frame_not_the_socket_says_whether_more_follow() -> None:
    sock = _SocketThatRefusesQueries([b"R", b"a", b"b"])
    frames = wire.recv_frames(sock, zmq.NOBLOCK)
    assert [f.data for f in frames] == [b"R", b"a", b"b"]
    assert sock.flags == [zmq.NOBLOCK] * 3
