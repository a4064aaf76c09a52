"""Only the pool's own client can run anything on a node."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import psutil
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


def _try(
    endpoint: str, frames: list[bytes], keys: tuple[bytes, bytes, bytes] | None, wait: float = 2.0
) -> list[bytes] | None:
    """Send ``frames`` to ``endpoint`` as a DEALER, with CURVE ``keys`` (server public,
    client public, client secret) or in plaintext; the reply, or None after ``wait`` s."""
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if keys is not None:
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = keys
    sock.connect(endpoint)
    sock.send_multipart(frames)
    reply = sock.recv_multipart() if sock.poll(int(wait * 1000)) else None
    context.destroy(linger=0)
    return reply


def _agent_of(pool: sky.ComputePool) -> psutil.Process:
    """The agent process of a one-node Local pool: ``-m skyward.agent`` in its run directory
    (its workers, forked from it, keep its command line: the agent is their parent)."""
    run_dir = str(pool._driver.run_dir)  # type: ignore[attr-defined]
    found = [
        proc
        for proc in psutil.process_iter(["cmdline", "cwd", "ppid"])
        if (proc.info["cmdline"] or [])[-2:] == ["-m", "skyward.agent"] and (proc.info["cwd"] or "").startswith(run_dir)
    ]
    pids = {proc.pid for proc in found}
    for proc in found:
        if proc.info["ppid"] not in pids:
            return proc
    raise AssertionError(f"no agent runs in {run_dir}")


def test_a_client_without_the_pools_keys_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "should-not-exist"
    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp"), display="quiet") as pool:
        endpoint = pool.nodes[0].endpoint
        assert endpoint.startswith("tcp://127.0.0.1:")
        worker = pool._client.worker_endpoints(0)[0]  # type: ignore[union-attr]
        assert worker.startswith("tcp://127.0.0.1:") and worker != endpoint
        keys = pool._keys
        server_public = keys.node(0).public
        stranger_public, stranger_secret = zmq.curve_keypair()
        stranger = (server_public, stranger_public, stranger_secret)  # knows the server's public key
        own = (server_public, keys.client.public, keys.client.secret)
        agent_pid = _agent_of(pool)
        # A stranger's CURVE handshake is refused by ZAP, by the agent and by the worker
        # that would run a payload; a plaintext client cannot complete a handshake at all:
        # neither HELLO nor STOP reaches the agent, and no task reaches the worker.
        for keys_used in (stranger, None):
            assert _try(endpoint, [wire.HELLO], keys_used) is None
            assert _try(endpoint, [wire.STOP], keys_used) is None
            assert _try(worker, _task_frames(str(target)), keys_used) is None
        assert not target.exists()
        assert agent_pid.is_running()  # the refused STOPs stopped nothing
        assert (marker(str(tmp_path / "ok")) >> pool) == "ran"  # the pool's own client still works
        # Positive control: the very same frames with the pool's own keys are answered and
        # run, so the refusals above are the keys' doing, not a malformed probe.
        reply = _try(endpoint, [wire.HELLO], own)
        assert reply is not None and reply[0] == wire.INFO
        assert _try(worker, _task_frames(str(target)), own) is not None
        assert target.read_text() == "ran"
        # BYE comes once the workers stopped, which the agent gives up to 3 s (on a loaded
        # machine a 2 s wait missed it)
        assert _try(endpoint, [wire.STOP], own, wait=15) is not None  # BYE, and the agent goes
        assert psutil.wait_procs([agent_pid], timeout=10)[1] == []


def test_ipc_sockets_are_private_to_the_user() -> None:
    with sky.ComputePool(nodes=1, display="quiet") as pool:
        path = pool._client.worker_endpoints(0)[0].removeprefix("ipc://")  # type: ignore[union-attr]
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
        secret = pool._keys.node(0).secret.decode()
    assert "SKYWARD_AGENT_CONFIG" not in env
    assert not any(secret in value for value in env.values())


@sky.compute
def process_records() -> dict[str, bytes]:
    """What a task can read of its own process and of its agent (its parent): the initial
    environment and the command line, which outlive any ``os.environ.pop``."""
    agent = os.getppid()
    records = {}
    for who, pid in (("worker", os.getpid()), ("agent", agent)):
        for what in ("environ", "cmdline"):
            records[f"{who} {what}"] = Path(f"/proc/{pid}/{what}").read_bytes()
    records["agent is the agent"] = Path(f"/proc/{agent}/cmdline").read_bytes()
    return records


def test_a_task_cannot_read_the_server_secret_from_its_agents_process() -> None:
    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp"), display="quiet") as pool:
        records = process_records() >> pool
        secret = pool._keys.node(0).secret
    assert b"skyward.agent" in records.pop("agent is the agent")  # the parent read is the agent's
    assert len(secret) == 40  # z85 of a 32-byte key: the needle is the real secret
    for name, record in records.items():
        assert record, f"{name} was empty: the probe read nothing"
        assert secret not in record, f"the node's server secret is readable in {name}"
