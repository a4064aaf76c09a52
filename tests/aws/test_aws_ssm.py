"""use_ssm: the tunnels' process management and port mapping, with a stand-in for AWS's
session-manager-plugin that forwards a local port to a loopback "node" (moto has no
Session Manager, and the real plugin speaks to AWS's websocket service)."""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skyward.errors import ProvisioningError
from skyward_aws.endpoints import SsmTunnels, free_local_range

FAKE_PLUGIN = """#!{python}
# argv: response-json region StartSession profile request-json endpoint (as the AWS CLI calls it)
import json, socket, sys, threading
request = json.loads(sys.argv[5])
remote = int(request["Parameters"]["portNumber"][0])
local = int(request["Parameters"]["localPortNumber"][0])
if json.loads(sys.argv[1])["TokenValue"] != "token-" + request["Target"]:
    sys.exit("bad session token")
server = socket.create_server(("127.0.0.1", local))

def pipe(a, b):
    while data := a.recv(65536):
        b.sendall(data)
    b.close()

while True:
    client, _ = server.accept()
    upstream = socket.create_connection(("127.0.0.1", remote))
    threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
"""


class FakeSSM:
    class meta:
        endpoint_url = "https://ssm.us-east-1.amazonaws.com"

    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []
        self.terminated: list[str] = []

    def start_session(self, **request: Any) -> dict[str, Any]:
        self.started.append(request)
        n = len(self.started)
        return {"SessionId": f"s-{n}", "StreamUrl": f"wss://ssm/{n}", "TokenValue": f"token-{request['Target']}"}

    def terminate_session(self, SessionId: str) -> None:
        self.terminated.append(SessionId)


@pytest.fixture
def node_ports() -> Iterator[int]:
    """A "node": the agent's port, two workers' and their two data ports, each answering with its own port."""
    base = free_local_range(5)
    servers = [socket.create_server(("127.0.0.1", base + i)) for i in range(5)]

    def serve(server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(str(server.getsockname()[1]).encode())
            conn.close()

    for server in servers:
        threading.Thread(target=serve, args=(server,), daemon=True).start()
    yield base
    for server in servers:
        server.close()


def _plugin(tmp_path: Path) -> str:
    path = tmp_path / "session-manager-plugin"
    path.write_text(FAKE_PLUGIN.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def _read(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        return int(conn.recv(16))


def test_tunnels_map_agent_and_worker_ports_to_consecutive_local_ports(tmp_path: Path, node_ports: int) -> None:
    ssm = FakeSSM()
    tunnels = SsmTunnels(ssm, "us-east-1", port=node_ports, workers=2, plugin=_plugin(tmp_path))
    try:
        address = tunnels.resolve({"InstanceId": "i-1", "PrivateIpAddress": "172.31.0.9"})
        local = int(address.endpoint.rsplit(":", 1)[1])
        assert address.endpoint.startswith("tcp://127.0.0.1:") and address.private_ip == "172.31.0.9"
        # the agent's, each worker's, then each worker's data port (skyward.agent.config.node_ports)
        assert [_read(local + i) for i in range(5)] == [node_ports + i for i in range(5)]
        assert [r["DocumentName"] for r in ssm.started] == ["AWS-StartPortForwardingSession"] * 5
        assert [r["Parameters"] for r in ssm.started] == [
            {"portNumber": [str(node_ports + i)], "localPortNumber": [str(local + i)]} for i in range(5)
        ]
        processes = list(tunnels._processes)
    finally:
        tunnels.close()
    assert ssm.terminated == ["s-1", "s-2", "s-3", "s-4", "s-5"]
    assert all(p.poll() is not None for p in processes)


def test_a_session_that_ends_at_once_is_an_error(tmp_path: Path) -> None:
    broken = tmp_path / "session-manager-plugin"
    broken.write_text("#!/bin/sh\nexit 255\n")
    broken.chmod(0o755)
    tunnels = SsmTunnels(FakeSSM(), "us-east-1", plugin=str(broken))
    try:
        with pytest.raises(ProvisioningError, match="ended at once"):
            tunnels.resolve({"InstanceId": "i-1"})
    finally:
        tunnels.close()


def test_plugin_is_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node_ports: int) -> None:
    _plugin(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    tunnels = SsmTunnels(FakeSSM(), "us-east-1", port=node_ports, workers=0)
    try:
        local = int(tunnels.resolve({"InstanceId": "i-2"}).endpoint.rsplit(":", 1)[1])
        assert _read(local) == node_ports
    finally:
        tunnels.close()


def test_releasing_one_instance_closes_its_tunnels_and_keeps_the_others(tmp_path: Path, node_ports: int) -> None:
    ssm = FakeSSM()
    tunnels = SsmTunnels(ssm, "us-east-1", port=node_ports, workers=0, plugin=_plugin(tmp_path))
    try:
        kept = tunnels.resolve({"InstanceId": "i-1"})
        tunnels.resolve({"InstanceId": "i-2"})
        removed = [process for process, _ in tunnels._targets["i-2"]]
        tunnels.release("i-2")
        tunnels.release("i-9")  # no tunnel: nothing to do
        assert ssm.terminated == ["s-2"]
        assert all(p.poll() is not None for p in removed)
        assert _read(int(kept.endpoint.rsplit(":", 1)[1])) == node_ports  # i-1's still carries
    finally:
        tunnels.close()
    assert ssm.terminated == ["s-2", "s-1"]
