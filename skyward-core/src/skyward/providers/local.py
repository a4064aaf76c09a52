"""The Local provider: each node is a real agent process tree on this machine.

A node is started by running its own bootstrap script with bash, exactly the script a
cloud node runs as user-data, so every local run exercises the bootstrap path. Nodes
listen on an ipc socket inside a fresh directory only this user can open (mode 0700);
``transport="tcp"`` makes them listen on loopback with CURVE instead, as across machines.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import psutil

from skyward.agent.config import READY_MARKER, STEP_MARKER
from skyward.errors import ConfigurationError, LaunchTimeoutError, ProvisioningError
from skyward.events import (
    BootstrapProgress,
    BootstrapStarting,
    InstanceLaunching,
    InstanceProvisioned,
)
from skyward.image import BootstrapContext
from skyward.providers.contexts import local_bootstrap_context
from skyward.providers.local_gpus import assign_gpus, detect_gpus
from skyward.providers.local_sweep import current_owner, sweep, write_owner
from skyward.providers.protocol import EventSink, NodeHandle, Provider, UserDataFactory
from skyward.providers.settings import ProviderSettings
from skyward.providers.spec import PoolSpec


@dataclass(frozen=True, slots=True)
class Local(ProviderSettings):
    """Run the pool's nodes as processes on this machine.

    transport:         "ipc" (default; a private socket directory keeps other local
                       users out) or "tcp" (loopback + CURVE, like a cloud node).

    ``grace_period`` and ``bootstrap_timeout`` are every provider's (ProviderSettings);
    ``client_address`` is unused: nothing is opened beyond this machine.
    """

    transport: Literal["ipc", "tcp"] = "ipc"
    """``"ipc"`` (default: private socket files) or ``"tcp"`` (loopback with CURVE, as across machines)."""

    def __post_init__(self) -> None:
        ProviderSettings.__post_init__(self)
        if not isinstance(self.transport, str) or self.transport not in ("ipc", "tcp"):
            raise ConfigurationError(f"Local(transport={self.transport!r}): use 'ipc' or 'tcp'")


def _total_memory_mb() -> int:
    return int(psutil.virtual_memory().total // 2**20)


def check_local_capacity(
    cpu: int | None, memory_mb: int | None, workers: int, machine_cpus: int, machine_memory_mb: int
) -> None:
    """``cpu=`` and ``memory=`` (per worker) on the Local provider: its workers share this
    machine, so the request holds when the machine has that much for every worker of the
    pool; otherwise it is refused, naming what the machine has. Nothing is reserved or
    pinned: like a cloud instance type, the machine is chosen (here: checked) to fit."""
    if cpu is not None and cpu * workers > machine_cpus:
        raise ConfigurationError(
            f"cpu={cpu} per worker x {workers} worker(s) needs {cpu * workers} CPU cores; this machine, where "
            f"the Local provider runs every worker, has {machine_cpus}. Ask for at most "
            f"{max(1, machine_cpus // workers)} per worker, or leave cpu unset"
        )
    if memory_mb is not None and memory_mb * workers > machine_memory_mb:
        raise ConfigurationError(
            f"memory={memory_mb} MB per worker x {workers} worker(s) needs {memory_mb * workers} MB; this machine, "
            f"where the Local provider runs every worker, has {machine_memory_mb} MB. Ask for less, or leave "
            "memory unset"
        )


@dataclass
class _LocalNode:
    index: int
    process: subprocess.Popen[bytes]
    log_path: Path
    endpoint: str | None = None
    failed: str | None = None


class LocalDriver(Provider[Local]):
    """No spot market and no volume mounts: the pool's common rules refuse or explain
    those. It reads its nodes' stdout, so it reports bootstrap steps live."""

    name = "local"
    follows_bootstrap: ClassVar[Literal[True]] = True

    def __init__(self, config: Local) -> None:
        super().__init__(config)
        self.run_dir: Path | None = None
        self.swept: list[Path] = []  # stale run directories this pool's start removed
        self._nodes: list[_LocalNode] = []

    def validate(self, spec: PoolSpec) -> None:
        if spec.machine is not None:
            raise ConfigurationError(
                f"machine={spec.machine!r} is not available on the Local provider: its nodes are this machine"
            )
        check_local_capacity(spec.cpu, spec.memory_mb, spec.total_workers, os.cpu_count() or 1, _total_memory_mb())
        self.visible_devices(spec)  # raises when the accelerator is not on this machine

    def visible_devices(self, spec: PoolSpec) -> list[list[str | None]]:
        """CUDA_VISIBLE_DEVICES for each worker of each node.

        A pool that asks for no accelerator sees no GPU (``""``), as on a CPU cloud node.
        Left visible, every local node saw every GPU of the machine: on one H100, two
        nodes' ``distributed.torch`` picked nccl and NCCL failed with "Duplicate GPU
        detected", and two JAX processes each tried to take most of its memory."""
        if spec.accelerator is None:
            return [[""] * spec.workers_per_node for _ in range(spec.nodes)]
        per_node = assign_gpus(spec.nodes, spec.accelerator, detect_gpus())
        devices: list[list[str | None]] = []
        for gpus in per_node:
            value = ",".join(str(g) for g in gpus)
            devices.append([value] * spec.workers_per_node)
        return devices

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        # Run directories of clients that died (killed, timed out) hold sockets, logs and
        # node scripts (a tcp pool's hold its server secret): nobody else removes them.
        self.swept = sweep(Path(tempfile.gettempdir()))
        # mkdtemp makes the directory 0700: the ipc sockets inside are ours alone.
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"skyward-{spec.pool_id}-"))
        write_owner(self.run_dir, current_owner())
        return "local"

    def _bootstrap_context(self, spec: PoolSpec) -> BootstrapContext:
        return local_bootstrap_context()

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        assert self.run_dir is not None, "prepare() first"
        emit(InstanceLaunching(count=spec.nodes, instance_type="local", provider="local"))
        context = self._bootstrap_context(spec)
        devices = self.visible_devices(spec)
        for index in range(spec.nodes):
            instance_id = f"local-{spec.pool_id}-{index}"
            bind = f"ipc://{self.run_dir}/node-{index}.sock" if self.config.transport == "ipc" else "tcp://127.0.0.1:0"
            script = user_data(
                index, bind, context, run_dir=str(self.run_dir), visible_devices=devices[index], instance_id=instance_id
            )
            script_path = self.run_dir / f"node-{index}.sh"
            script_path.write_text(script)
            script_path.chmod(0o700)
            work_dir = self.run_dir / f"node-{index}"
            work_dir.mkdir(mode=0o700)
            log_path = self.run_dir / f"node-{index}.log"
            with open(log_path, "wb") as log:
                process = subprocess.Popen(
                    ["bash", str(script_path)],
                    cwd=work_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    start_new_session=True,  # its own process group: terminate() kills the tree
                )
            node = _LocalNode(index, process, log_path)
            self._nodes.append(node)
            emit(
                InstanceProvisioned(
                    instance_id=instance_id, node=index, spot=False, provider="local", ip="127.0.0.1",
                    instance_type="local", price_on_demand=0.0, price_spot=None,
                )
            )  # fmt: skip
            emit(BootstrapStarting(instance_id=instance_id))
            threading.Thread(
                target=self._follow, args=(node, instance_id, emit, BootstrapProgress), daemon=True
            ).start()

        deadline = time.monotonic() + self.config.bootstrap_timeout
        while any(n.endpoint is None for n in self._nodes):
            for node in self._nodes:
                if node.endpoint is None and node.process.poll() is not None:
                    time.sleep(0.1)  # let the follower read the last lines
                    tail = node.log_path.read_text(errors="replace").strip().splitlines()[-15:]
                    self.terminate([])
                    raise ProvisioningError(
                        f"local node {node.index} failed to start (bootstrap exited with status "
                        f"{node.process.returncode}):\n" + "\n".join(tail)
                    )
            if time.monotonic() > deadline:
                self.terminate([])
                # a launch timeout, as a cloud's nodes not running in time: a pool with
                # several candidates moves on to the next one (examples/24_failover.py)
                raise LaunchTimeoutError(
                    f"local nodes did not start within bootstrap_timeout={self.config.bootstrap_timeout:g} s; "
                    "raise Local(bootstrap_timeout=...)"
                )
            time.sleep(0.005)
        handles = []
        for node in self._nodes:
            instance_id = f"local-{spec.pool_id}-{node.index}"
            assert node.endpoint is not None
            handles.append(
                NodeHandle(
                    node=node.index,
                    instance_id=instance_id,
                    endpoint=node.endpoint,
                    instance_type="local",
                    ip="127.0.0.1",
                    private_ip="127.0.0.1",
                )
            )
        return handles

    def _follow(self, node: _LocalNode, instance_id: str, emit: EventSink, progress: Any) -> None:
        """Reads a node's stdout: bootstrap steps, then the agent's ready line."""
        assert node.process.stdout is not None
        for raw in node.process.stdout:
            line = raw.decode(errors="replace").strip()
            if line.startswith(STEP_MARKER):
                emit(progress(instance_id=instance_id, step=line[len(STEP_MARKER) :].strip()))
            elif line.startswith(READY_MARKER):
                node.endpoint = line[len(READY_MARKER) :].strip()

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Stop every node process tree: SIGTERM, then SIGKILL after 5 s."""
        for node in self._nodes:
            _signal_group(node.process, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for node in self._nodes:
            try:
                node.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(node.process, signal.SIGKILL)
                node.process.wait()
            # workers die with their agent (PDEATHSIG); make sure of stragglers
            _signal_group(node.process, signal.SIGKILL)

    def teardown(self) -> None:
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
