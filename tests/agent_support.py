"""Real node agents on this machine, without a pool: for transport tests that kill, stop
and add nodes under a ``PoolClient`` of their own.

Each agent is ``python -m skyward.agent`` in its own process group (its workers die with
it), bound to an ipc socket in a short private directory (ipc paths are limited to about
100 characters, which a pytest tmp_path can exceed), so no port is shared between tests
running in parallel.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skyward.agent.config import AgentConfig
from skyward.transport import serialize, wire
from skyward.transport.client import PoolClient

CLUSTER = [
    wire.CLUSTER,
    wire.encode_json({"head_addr": "127.0.0.1", "head_port": 0, "total_nodes": 1, "job_id": "p-heal"}),
]
"""What the pool tells every agent once it is connected (workers wait up to 30 s for it
before they run a task)."""


class Agents:
    """Agent processes by node index; ``close()`` ends every one of them."""

    def __init__(self, workers: int = 1) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="sw-agents-", dir="/tmp"))
        self.workers = workers
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self._generation = 0

    def start(self, node: int) -> str:
        """Start an agent for node ``node`` (a new one each call); its endpoint."""
        self._generation += 1
        run_dir = self.root / f"n{node}-{self._generation}"
        run_dir.mkdir()
        bind = f"ipc://{run_dir}/a.sock"
        config = AgentConfig(
            pool_id="p-heal", node=node, total_nodes=1, workers=self.workers, bind=bind, run_dir=str(run_dir),
            metrics_interval=0.0, grace_seconds=60.0, instance_id=f"heal-{node}-{self._generation}",
        )  # fmt: skip
        log = open(run_dir / "agent.log", "wb")  # noqa: SIM115 - the process writes it until it ends
        process = subprocess.Popen(
            [sys.executable, "-m", "skyward.agent"],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        assert process.stdin is not None
        process.stdin.write((config.to_json() + "\n").encode())
        process.stdin.close()
        self.processes[node] = process
        return bind

    def connect(self, client: PoolClient) -> None:
        """Connect ``client`` to the agents it was made with, as the pool does."""
        client.connect(timeout=120)
        client.broadcast_control(CLUSTER)

    def join(self, client: PoolClient, node: int) -> None:
        """Start an agent for node ``node`` and add it to ``client``, as the pool does."""
        client.add_node(node, self.start(node), timeout=120, cluster=CLUSTER)

    def signal(self, node: int, sig: signal.Signals) -> None:
        """Send ``sig`` to the node's whole process group (agent and workers)."""
        os.killpg(self.processes[node].pid, sig)

    def on_exit(self, node: int, then: Callable[[int], None]) -> None:
        """Call ``then(returncode)`` on a thread of its own once the node's agent exits
        (what a provider that watches its node processes tells the pool)."""
        process = self.processes[node]
        threading.Thread(target=lambda: then(process.wait()), daemon=True).start()

    def close(self) -> None:
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGCONT)
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def task(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[serialize.Frame]:
    """The frames of ``fn(*args, **kwargs)`` as the pool's runner makes them."""
    return [*serialize.dumps_function(fn), *serialize.dumps_arguments(fn, args, kwargs)]
