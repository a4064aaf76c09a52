"""Only the pool's own client can run anything on a node."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import cloudpickle
import pytest
import zmq

import skyward as sky
from skyward.transport import serialize, wire


@sky.compute
def marker(path: str) -> str:
    Path(path).write_text("ran")
    return "ran"


def _task_frames(path: str) -> list[bytes]:
    key, raw = serialize.dumps_function(marker.local)
    task = wire.encode_task(key, raw, [bytes(f) for f in serialize.dumps(((path,), {}))])
    return [wire.pack_tasks([(1, len(task), 0)]), *task]


def _try_foreign(endpoint: str, server_public: bytes | None, frames: list[bytes]) -> list[bytes] | None:
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if server_public is not None:
        public, secret = zmq.curve_keypair()  # a stranger's keys
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = server_public, public, secret
    sock.connect(endpoint)
    sock.send_multipart(frames)
    reply = sock.recv_multipart() if sock.poll(2000) else None
    context.destroy(linger=0)
    return reply


def test_a_client_without_the_pools_keys_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "should-not-exist"
    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp"), display="quiet") as pool:
        endpoint = pool.nodes[0].endpoint
        assert endpoint.startswith("tcp://127.0.0.1:")
        worker = pool._client._nodes[0].workers[0].endpoint  # type: ignore[union-attr]
        assert worker.startswith("tcp://127.0.0.1:") and worker != endpoint
        server_public = pool._keys.server_public
        # Even knowing the server's public key, a stranger's CURVE handshake is refused by ZAP,
        # by the agent and by the worker that would run a payload ...
        assert _try_foreign(endpoint, server_public, [wire.HELLO]) is None
        assert _try_foreign(worker, server_public, _task_frames(str(target))) is None
        # ... and a plaintext client cannot even complete a handshake.
        assert _try_foreign(worker, None, _task_frames(str(target))) is None
        assert not target.exists()
        assert (marker(str(tmp_path / "ok")) >> pool) == "ran"  # the pool's own client still works


def test_ipc_sockets_are_private_to_the_user() -> None:
    with sky.ComputePool(nodes=1, display="quiet") as pool:
        path = pool._client._nodes[0].workers[0].endpoint.removeprefix("ipc://")  # type: ignore[union-attr]
        run_dir = os.path.dirname(path)
        assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        if os.geteuid() != 0:
            pytest.skip("needs root to try as another user")
        probe = (
            "import socket,sys\n"
            "s=socket.socket(socket.AF_UNIX)\n"
            "try:\n s.connect(sys.argv[1])\nexcept PermissionError:\n sys.exit(13)\n"
            "sys.exit(0)\n"
        )
        interpreter = shutil.which("python3", path="/usr/bin:/bin")
        if interpreter is None:
            pytest.skip("no system python3 that another user can run")
        result = subprocess.run([interpreter, "-c", probe, path], user=65534, group=65534, check=False)
        assert result.returncode == 13  # 'nobody' cannot reach the socket
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)  # while its owner can
        sock.close()


def test_workers_never_see_the_nodes_keys() -> None:
    @sky.compute
    def environment() -> dict[str, str]:
        return dict(os.environ)

    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp"), display="quiet") as pool:
        env = environment() >> pool
        secret = pool._keys.server_secret.decode()
    assert "SKYWARD_AGENT_CONFIG" not in env
    assert not any(secret in value for value in env.values())
    assert cloudpickle  # the payload library is the pool's, not the environment's
