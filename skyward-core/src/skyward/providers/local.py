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
from skyward.errors import BootstrapTimeoutError, ConfigurationError, ProvisioningError
from skyward.events import (
    BootstrapProgress,
    BootstrapStarting,
    InstanceLaunching,
    InstanceProvisioned,
)
from skyward.image import BootstrapContext
from skyward.providers.contexts import local_bootstrap_context
from skyward.providers.local_gpus import assign_gpus, detect_gpus
from skyward.providers.local_sweep import Owner, add_keeper, current_owner, sweep, swept_pool_ids, write_owner
from skyward.providers.protocol import EventSink, NodeHandle, Provider, UserDataFactory
from skyward.providers.settings import ProviderSettings
from skyward.providers.spec import PoolSpec
from skyward.transport.shm import remove_pool_segments
from skyward.volume import Volume


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

    shared_memory: bool = True
    """Buffers of 32 MiB and more (numpy arrays, tensors, bytes) travel between the client and
    the workers through /dev/shm segments (0600, named per pool) instead of the socket;
    ``False`` sends them through the socket (see ``skyward.transport.shm``)."""

    def __post_init__(self) -> None:
        ProviderSettings.__post_init__(self)
        if not isinstance(self.transport, str) or self.transport not in ("ipc", "tcp"):
            raise ConfigurationError(f"Local(transport={self.transport!r}): use 'ipc' or 'tcp'")
        if not isinstance(self.shared_memory, bool):
            raise ConfigurationError(f"Local(shared_memory={self.shared_memory!r}): use True or False")


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
    instance_id: str
    process: subprocess.Popen[bytes]
    log_path: Path
    slot: int = 0  # which of the pool's max_nodes device sets it uses
    endpoint: str | None = None
    failed: str | None = None


NODE_POLL_INTERVAL = 0.05
"""Seconds between two ``gone`` polls (NodeWatch) of a Local pool: a poll is one
``waitpid(WNOHANG)`` per node, microseconds, so a node process's exit is noticed within
50 ms, where the liveness window (5 s of missed heartbeats) would take 100 times as long."""

STOP_GRACE = 5.0
"""Seconds a node's process group has between SIGTERM and SIGKILL (its agent stops its
workers and says goodbye in well under one)."""


class LocalDriver(Provider[Local]):
    """No spot market and no volume mounts: the pool's common rules refuse or explain
    those. It reads its nodes' stdout, so it reports bootstrap steps live.

    Elastic (ElasticNodes): a node added later is started exactly as the first ones (its
    own bootstrap script run with bash in the pool's run directory), and a node removed
    is its process group stopped. Watching (NodeWatch): a node whose process exited is
    reported gone at the next poll, ``NODE_POLL_INTERVAL`` seconds."""

    name = "local"
    follows_bootstrap: ClassVar[Literal[True]] = True
    node_poll_interval: float = NODE_POLL_INTERVAL

    def __init__(self, config: Local) -> None:
        super().__init__(config)
        self.run_dir: Path | None = None
        self.swept: list[Path] = []  # stale run directories this pool's start removed
        self.pool_id: str | None = None
        self._nodes: list[_LocalNode] = []  # the nodes running (started and not removed)
        self._starts: dict[int, int] = {}  # node index -> how many nodes were started at it
        self._lock = threading.Lock()
        # notified when a node's follower reads its endpoint or the end of its output
        self._heard = threading.Condition()

    def validate(self, spec: PoolSpec) -> None:
        if spec.machine is not None:
            raise ConfigurationError(
                f"machine={spec.machine!r} is not available on the Local provider: its nodes are this machine"
            )
        if any(isinstance(v, Volume) for v in spec.volumes) and shutil.which("rclone") is None:
            raise ConfigurationError(
                "ComputePool(volume=...): Local nodes mount and sync a sky.Volume with rclone, which is not on this "
                "machine's PATH; install it (Debian/Ubuntu: apt install rclone fuse3; else https://rclone.org/install/)"
            )
        workers = spec.max_nodes * spec.workers_per_node  # an elastic pool must fit at its largest
        try:
            check_local_capacity(spec.cpu, spec.memory_mb, workers, os.cpu_count() or 1, _total_memory_mb())
            self.visible_devices(spec)  # raises when the accelerator is not on this machine
        except ConfigurationError as error:
            if spec.max_nodes == spec.nodes:
                raise
            raise ConfigurationError(
                f"{error} (the pool may grow to {spec.max_nodes} nodes, sky.Nodes(max={spec.max_nodes}), and the "
                "Local provider must fit it at that size: lower max or what each worker asks for)"
            ) from error

    def fuse_unavailable(self, spec: PoolSpec) -> str | None:
        """FuseMounts: each node mounts in a mount namespace of its own (``unshare``), so
        nodes never see each other's mounts, the machine never sees theirs, and a mount
        ends with its node however it ends; making one needs root."""
        if os.geteuid() != 0:
            return "Local nodes mount in a private mount namespace each, which needs root (run the client as root)"
        missing = [tool for tool in ("unshare", "fusermount3") if shutil.which(tool) is None]
        if missing:
            return f"{' and '.join(missing)} not found on this machine (Debian/Ubuntu: apt install util-linux fuse3)"
        return None

    def visible_devices(self, spec: PoolSpec) -> list[list[str | None]]:
        """CUDA_VISIBLE_DEVICES for each worker of each of the pool's ``spec.max_nodes``
        slots: no two slots share a GPU, and a node runs in a slot no live node holds
        (``_slots``), so no two live nodes share one either.

        A pool that asks for no accelerator sees no GPU (``""``), as on a CPU cloud node.
        Left visible, every local node saw every GPU of the machine: on one H100, two
        nodes' ``distributed.torch`` picked nccl and NCCL failed with "Duplicate GPU
        detected", and two JAX processes each tried to take most of its memory."""
        if spec.accelerator is None:
            return [[""] * spec.workers_per_node for _ in range(spec.max_nodes)]
        per_node = assign_gpus(spec.max_nodes, spec.accelerator, detect_gpus())
        devices: list[list[str | None]] = []
        for gpus in per_node:
            value = ",".join(str(g) for g in gpus)
            devices.append([value] * spec.workers_per_node)
        return devices

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        # Run directories of clients that died (killed, timed out) hold sockets, logs and
        # node scripts (a tcp pool's hold its server secret): nobody else removes them.
        self.swept = sweep(Path(tempfile.gettempdir()))
        # ... and their pools' shared-memory segments that no receiver read (see skyward.transport.shm)
        for pool_id in swept_pool_ids(self.swept):
            remove_pool_segments(pool_id)
        self.pool_id = spec.pool_id
        # mkdtemp makes the directory 0700: the ipc sockets inside are ours alone.
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"skyward-{spec.pool_id}-"))
        write_owner(self.run_dir, current_owner())
        return "local"

    def _bootstrap_context(self, spec: PoolSpec) -> BootstrapContext:
        return local_bootstrap_context(spec.image)

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        emit(InstanceLaunching(count=spec.nodes, instance_type="local", provider="local"))
        try:
            return self._start_nodes(spec, range(spec.nodes), user_data, emit)
        except BaseException:
            self.terminate([])
            raise

    def add_nodes(
        self, spec: PoolSpec, indices: Sequence[int], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        """Start a node at each index while the others run, as ``launch`` starts them (on
        failure, only the nodes this call started are stopped)."""
        if not indices:
            return []
        with self._lock:
            running = {n.index for n in self._nodes}
        taken = sorted(running & set(indices))
        if taken or len(set(indices)) != len(indices):
            raise ConfigurationError(
                f"add_nodes(indices={list(indices)}): node {taken or 'indices'} already running or repeated; remove a "
                "node before starting another at its index"
            )
        return self._start_nodes(spec, indices, user_data, emit)

    def _start_nodes(
        self, spec: PoolSpec, indices: Sequence[int], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        """Start a node at each index and wait until every one's agent reports its
        endpoint; on failure stop what this call started, then raise."""
        assert self.run_dir is not None, "prepare() first"
        context = self._bootstrap_context(spec)
        devices = self.visible_devices(spec)
        slots = self._slots(indices, len(devices))
        started: list[_LocalNode] = []
        try:
            for index, slot in zip(indices, slots, strict=True):
                started.append(self._start_node(spec, index, slot, context, devices[slot], user_data, emit))
            self._await_endpoints(started)
        except BaseException:
            self._stop(started)
            raise
        return [
            NodeHandle(
                node=node.index, instance_id=node.instance_id, endpoint=node.endpoint or "", instance_type="local",
                ip="127.0.0.1", private_ip="127.0.0.1",
            )
            for node in started
        ]  # fmt: skip

    def _slots(self, indices: Sequence[int], count: int) -> list[int]:
        """A device slot for each new node: its own index's when that is free (the nodes
        started first, and a replacement, keep their index's GPUs), else the lowest free
        one. Indices grow without bound (a pool never reuses one for another node) while
        slots are the pool's ``max_nodes``, so a pool that shrank and grows again still
        finds one."""
        with self._lock:
            free = set(range(count)) - {n.slot for n in self._nodes}
        slots: list[int] = []
        for index in indices:
            if not free:
                raise ConfigurationError(
                    f"add_nodes(indices={list(indices)}): the pool already runs {count} nodes, its sky.Nodes(max=...)"
                )
            slot = index if index in free else min(free)
            free.discard(slot)
            slots.append(slot)
        return slots

    def _start_node(
        self,
        spec: PoolSpec,
        index: int,
        slot: int,
        context: BootstrapContext,
        devices: Sequence[str | None],
        user_data: UserDataFactory,
        emit: EventSink,
    ) -> _LocalNode:
        """Run node ``index``'s bootstrap script with bash, in a process group of its own.
        A node started again at an index (a replacement) gets its own instance id and
        files: the one before it may still hold its socket."""
        assert self.run_dir is not None
        with self._lock:
            generation = self._starts.get(index, 0)
            self._starts[index] = generation + 1
        stem = f"node-{index}" if generation == 0 else f"node-{index}-{generation}"
        instance_id = f"local-{spec.pool_id}-{index}" + (f"-{generation}" if generation else "")
        bind = f"ipc://{self.run_dir}/{stem}.sock" if self.config.transport == "ipc" else "tcp://127.0.0.1:0"
        script = user_data(
            index, bind, context, run_dir=str(self.run_dir), visible_devices=list(devices), instance_id=instance_id
        )
        work_dir = self.run_dir / stem
        work_dir.mkdir(mode=0o700)
        log_path = self.run_dir / f"{stem}.log"
        with open(log_path, "wb") as log:
            # The script (the node's CURVE server secret in it) goes on bash's stdin, never
            # into a file: tasks run as this user beside the run dir and could read one.
            # Bash reads a pipe a byte at a time, and the agent's stdin is the here-document
            # holding its config, so no worker inherits the rest of the script.
            process = subprocess.Popen(
                [*_private_mounts(spec), "bash", "-s"],
                cwd=work_dir,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,  # its own process group: stopping the node kills the tree
            )
        # a thread: bash reads on as it runs the steps (the environment build takes minutes)
        threading.Thread(target=_feed, args=(process, script), daemon=True).start()
        node = _LocalNode(index, instance_id, process, log_path, slot)
        if spec.kept:  # the node outlives this client: its run directory must too
            with self._lock:
                add_keeper(self.run_dir, Owner(process.pid, psutil.Process(process.pid).create_time()))
        with self._lock:
            self._nodes.append(node)
        emit(
            InstanceProvisioned(
                instance_id=instance_id, node=index, spot=False, provider="local", ip="127.0.0.1",
                instance_type="local", price_on_demand=0.0, price_spot=None,
            )
        )  # fmt: skip
        emit(BootstrapStarting(instance_id=instance_id))
        threading.Thread(target=self._follow, args=(node, emit, BootstrapProgress), daemon=True).start()
        return node

    def _await_endpoints(self, nodes: Sequence[_LocalNode]) -> None:
        deadline = time.monotonic() + self.config.bootstrap_timeout
        while any(n.endpoint is None for n in nodes):
            for node in nodes:
                if node.endpoint is None and node.process.poll() is not None:
                    time.sleep(0.1)  # let the follower read the last lines
                    tail = node.log_path.read_text(errors="replace").strip().splitlines()[-15:]
                    raise ProvisioningError(
                        f"local node {node.index} failed to start (bootstrap exited with status "
                        f"{node.process.returncode}):\n" + "\n".join(tail)
                    )
            if time.monotonic() > deadline:
                # a bootstrap timeout, as a cloud's nodes not answering in time: a pool with
                # several candidates moves on to the next one (examples/24_failover.py)
                raise BootstrapTimeoutError(
                    f"local nodes did not start within bootstrap_timeout={self.config.bootstrap_timeout:g} s; "
                    "raise Local(bootstrap_timeout=...)"
                )
            with self._heard:  # woken by _follow; polling every 5 ms cost 2.5 ms of a start on average
                if any(n.endpoint is None and n.process.poll() is None for n in nodes):
                    self._heard.wait(timeout=0.1)

    def _follow(self, node: _LocalNode, emit: EventSink, progress: Any) -> None:
        """Reads a node's stdout: bootstrap steps, then the agent's ready line."""
        assert node.process.stdout is not None
        for raw in node.process.stdout:
            line = raw.decode(errors="replace").strip()
            if line.startswith(STEP_MARKER):
                emit(progress(instance_id=node.instance_id, step=line[len(STEP_MARKER) :].strip()))
            elif line.startswith(READY_MARKER):
                with self._heard:
                    node.endpoint = line[len(READY_MARKER) :].strip()
                    self._heard.notify_all()
        with self._heard:  # the output ended: the node's process is exiting (or exited)
            self._heard.notify_all()

    def remove_nodes(self, nodes: Sequence[NodeHandle]) -> None:
        """Stop exactly these nodes' process trees (SIGTERM, SIGKILL after STOP_GRACE s);
        one already gone is not an error."""
        wanted = {n.instance_id for n in nodes}
        with self._lock:
            chosen = [n for n in self._nodes if n.instance_id in wanted]
        self._stop(chosen)

    def gone(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        """The NodeWatch ability: those of ``nodes`` whose process exited (or that were
        removed), with the exit status."""
        with self._lock:
            running = {n.instance_id: n for n in self._nodes}
        found: dict[str, str] = {}
        for handle in nodes:
            node = running.get(handle.instance_id)
            if node is None:
                found[handle.instance_id] = "the node was removed (its processes were stopped)"
            elif (status := node.process.poll()) is not None:
                how = f"killed by signal {-status}" if status < 0 else f"exited with status {status}"
                found[handle.instance_id] = f"the local node's process {how}"
        return found

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Stop these nodes, or every node when given none or all of them (the pool's
        stop): SIGTERM, then SIGKILL after STOP_GRACE s."""
        wanted = {n.instance_id for n in nodes}
        with self._lock:
            running = list(self._nodes)
        if wanted and not {n.instance_id for n in running} <= wanted:
            running = [n for n in running if n.instance_id in wanted]
        self._stop(running)

    def _stop(self, nodes: Sequence[_LocalNode]) -> None:
        """Stop these nodes' process groups together, and forget them."""
        for node in nodes:
            _signal_group(node.process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for node in nodes:
            try:
                node.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(node.process, signal.SIGKILL)
                node.process.wait()
            # workers die with their agent (PDEATHSIG); make sure of stragglers
            _signal_group(node.process, signal.SIGKILL)
        with self._lock:
            self._nodes = [n for n in self._nodes if n not in nodes]

    def teardown(self) -> None:
        """Stop any node still running (one the pool never took in, say), then remove the
        run directory."""
        with self._lock:
            left = list(self._nodes)
        self._stop(left)
        if self.pool_id is not None:  # the nodes are gone: segments still named were never read
            remove_pool_segments(self.pool_id)
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None


def _private_mounts(spec: PoolSpec) -> list[str]:
    """The prefix that starts a node in a mount namespace of its own when it mounts a
    ``sky.Volume`` (``unshare`` execs bash: the node's pid stays the one we started)."""
    if any(isinstance(v, Volume) and v.mode == "mount" for v in spec.volumes):
        return ["unshare", "--mount", "--propagation", "private"]
    return []


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _feed(process: subprocess.Popen[bytes], script: str) -> None:
    """Write a node's bootstrap script to its bash's stdin and close it; a bash that
    exited early (a failed step) leaves the rest unread, which is not an error here: the
    node's log says why it stopped."""
    assert process.stdin is not None
    try:
        process.stdin.write(script.encode())
        process.stdin.close()
    except (OSError, ValueError):
        pass
