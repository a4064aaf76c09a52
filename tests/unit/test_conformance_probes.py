"""The conformance suite's "nothing open to everyone" probe tells an open agent from one
that wants the pool's keys (skyward.testing.probes), so the check is not vacuous where a
provider has no firewall to inspect."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from skyward.testing.probes import Handshake, keyless_handshake, open_endpoint_problem
from skyward.transport.security import PoolKeys, configure_server, start_server_auth


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


def test_a_listener_without_curve_is_reported_open(context: zmq.Context[zmq.Socket[bytes]]) -> None:
    router = context.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    assert keyless_handshake(f"tcp://127.0.0.1:{port}") is Handshake.COMPLETED
    problem = open_endpoint_problem(f"tcp://127.0.0.1:{port}")
    assert problem is not None and "without the pool's CURVE keys completed a handshake" in problem


def test_an_agent_socket_that_wants_the_pools_keys_is_not(context: zmq.Context[zmq.Socket[bytes]]) -> None:
    keys = PoolKeys()
    auth = start_server_auth(context, keys.client.public)
    try:
        router = context.socket(zmq.ROUTER)
        configure_server(router, keys.node(0).secret)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        assert keyless_handshake(f"tcp://127.0.0.1:{port}") is Handshake.REFUSED
        assert open_endpoint_problem(f"tcp://127.0.0.1:{port}") is None
    finally:
        auth.stop()


def test_an_ipc_socket_is_private_only_in_a_directory_of_its_user(tmp_path: Path) -> None:
    private, shared = tmp_path / "private", tmp_path / "shared"
    private.mkdir(mode=0o700)
    shared.mkdir()
    os.chmod(shared, 0o755)
    assert open_endpoint_problem(f"ipc://{private}/node-0.sock") is None
    problem = open_endpoint_problem(f"ipc://{shared}/node-0.sock")
    assert problem is not None and "mode 755" in problem
