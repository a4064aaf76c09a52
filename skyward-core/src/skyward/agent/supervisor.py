"""The node supervisor: the control plane of one node.

It starts the node's worker processes and restarts any that die, forwards what they
print, reports metrics, answers the client's pings, and ends the node when told to,
when its TTL passes, or when the client has been silent for ``grace_seconds``: a node
never outlives its pool for long. Tasks do not pass through it: the client sends them
to workers directly (see ``worker.py``), which saves a relay hop each way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import signal
import sys
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import cloudpickle
import zmq

from skyward.agent.config import READY_MARKER, STEPS_ENV, AgentConfig
from skyward.agent.listen import listen
from skyward.agent.notices import notices_dir
from skyward.agent.processes import ForkedChild, WorkerProcess, can_fork, describe_exit, fork_workers
from skyward.transport import security, wire
from skyward.version import __version__

if TYPE_CHECKING:
    from skyward.agent.metrics import MetricsSampler
    from skyward.agent.mounts import Mounts
    from skyward.files.receiver import FileReceiver

_POLL_MS = 200
_PING_INTERVAL = 1.0
_NOTICE_SCAN_INTERVAL = 1.0
_NOTICE_MAX_BYTES = 64 * 1024
_WORKER_START_TIMEOUT = 120.0
_EARLY_LINES = 20
_SAMPLER_AFTER = 0.5
"""Seconds after the agent starts before it makes its MetricsSampler, and with it imports
psutil (15-18 ms of CPU): after the node's start, which on a Local pool two nodes' agents
and the client share on this 2-core machine. The sampler's first reading is one
``metrics_interval`` later (psutil's first CPU reading is meaningless)."""


class Supervisor:
    """A node's agent: binds the node's endpoint, starts and restarts its workers,
    answers the client's HELLO, relays control, forwards the workers' output lines,
    metrics and notices, and stops the node when its TTL or its client's grace ends.

    One class past 300 lines on purpose: it is one poll loop over three kinds of file
    descriptor (the client's socket, the workers' control socket, the workers' output
    pipes), and every handler reads the same state (live workers, the client's identity,
    when it was last heard). The parts without that state are modules of their own
    (``listen`` binds and says why not, ``output`` splits pipe bytes into lines,
    ``processes`` spawns, ``metrics``, ``notices``)."""

    def __init__(self, config: AgentConfig, forked: Sequence[ForkedChild] = ()) -> None:
        # forked: workers forked before this object opened any socket (``fork_workers``),
        # one per worker index, waiting for their config; without them each is spawned
        self.config = config
        self.forked = dict(enumerate(forked))
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.auth: Any = None
        self.frontend = self.context.socket(zmq.ROUTER)
        self.backend = self.context.socket(zmq.ROUTER)
        for sock in (self.frontend, self.backend):
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            sock.setsockopt(zmq.SNDHWM, 0)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.LINGER, 1000)
        self.backend_endpoint = f"ipc://{config.run_dir}/node-{config.node}-control.sock"
        self.workers: dict[int, WorkerProcess] = {}
        # what workers printed before any client connected (start-up): the last lines of a
        # worker that dies before it is ready explain the agent's exit
        self.early_lines: dict[int, deque[str]] = {}
        self.client: bytes | None = None
        self.bound_endpoint = ""  # where the frontend listens, as bound (reported in INFO)
        self.cluster: bytes | None = None
        self.mounts: Mounts | None = None  # the pool's sky.Volumes, once the CLUSTER message named them
        self.mounts_said = False
        self.started = time.monotonic()
        self.last_heard = time.monotonic()
        self.last_ping = 0.0
        self.last_metrics = 0.0
        self.stopping = False
        self.exit_reason = ""
        self.sampler: MetricsSampler | None = None  # made _SAMPLER_AFTER s in (see there)
        # Other processes on the node (a cloud's spot-interruption watcher) drop notices
        # here, one JSON object per file; the agent forwards them to the pool.
        self.notices = notices_dir(config.run_dir, config.node)
        self.last_notice_scan = 0.0
        # the project's files (Image(includes=...)): the node's store, this node's tree
        self.files_dir = os.path.join(config.run_dir, f"files-node-{config.node}-{config.instance_id or os.getpid()}")
        self.files: FileReceiver | None = None  # made by the first FILES message (see _receiver)

    @property
    def _who(self) -> str:
        instance = f", instance {self.config.instance_id}" if self.config.instance_id else ""
        return f"skyward agent (node {self.config.node}{instance})"

    # -- workers ------------------------------------------------------------------------

    def _worker_bind(self, index: int) -> str:
        bind = self.config.effective_bind()
        if bind.startswith("ipc://"):
            return f"ipc://{self.config.run_dir}/node-{self.config.node}-w{index}.sock"
        host, port = bind.rsplit(":", 1)
        # A fixed agent port means fixed worker ports after it (what a firewall opens).
        return f"{host}:{0 if int(port) == 0 else int(port) + 1 + index}"

    def _worker_data_bind(self, index: int) -> str | None:
        """A tcp worker's data port (skyward.transport.data_channel): after every worker's
        own port (``node_ports``); None on ipc, where nothing is encrypted."""
        bind = self.config.effective_bind()
        if bind.startswith("ipc://"):
            return None
        host, port = bind.rsplit(":", 1)
        return f"{host}:{0 if int(port) == 0 else int(port) + 1 + self.config.workers + index}"

    def _worker_config(self, index: int) -> dict[str, object]:
        c = self.config
        curve = None
        if c.uses_curve:
            curve = {"server_secret": c.server_secret, "client_public": c.client_public}
        return {
            "control": self.backend_endpoint,
            "bind": self._worker_bind(index),
            "data_bind": self._worker_data_bind(index),
            "plugins": c.worker_plugins,
            "census": c.plugin_census,
            "curve": curve,
            "info": {
                "node": c.node,
                "total_nodes": c.total_nodes,
                "accelerators": c.accelerators,
                "head_addr": c.head_addr,
                "head_port": c.head_port,
                "job_id": c.pool_id,
                "worker": index,
                "workers_per_node": c.workers,
            },
        }

    def _spawn(self, index: int) -> None:
        forked = self.forked.pop(index, None)
        if forked is not None:
            self.workers[index] = WorkerProcess.adopt(index, forked, self._worker_config(index))
        else:
            self.workers[index] = WorkerProcess.spawn(index, self._worker_config(index), worker_env(self.config, index))

    def start(self) -> str:
        c = self.config
        os.makedirs(c.run_dir, mode=0o700, exist_ok=True)
        if c.uses_curve and not (c.server_secret and c.client_public):
            raise SystemExit("skyward agent: a tcp endpoint needs CURVE keys")
        listen(self.backend, self.backend_endpoint, self._who)
        os.chmod(self.backend_endpoint.removeprefix("ipc://"), 0o600)
        for index in range(c.workers):
            self._spawn(index)
        deadline = time.monotonic() + _WORKER_START_TIMEOUT
        poller = self._poller(frontend=False)
        while not all(w.ready for w in self.workers.values()):
            if time.monotonic() > deadline:
                raise SystemExit(f"skyward agent: workers did not start within {_WORKER_START_TIMEOUT:g} s")
            self._poll_once(poller, 100)
            for worker in self.workers.values():
                code = worker.process.poll()
                if code is not None and not worker.ready:
                    self._flush_output(worker)
                    self._failed_to_start(worker, code)
        if c.uses_curve:
            assert c.server_secret and c.client_public
            self.auth = security.start_server_auth(self.context, c.client_public.encode())
            security.configure_server(self.frontend, c.server_secret.encode())
        endpoint = listen(self.frontend, c.effective_bind(), self._who, ports=2 * c.workers + 1)
        self.bound_endpoint = endpoint
        if endpoint.startswith("ipc://"):
            os.chmod(endpoint.removeprefix("ipc://"), 0o600)
        self.last_heard = time.monotonic()
        return endpoint

    # -- main loop ------------------------------------------------------------------------

    def _poller(self, frontend: bool = True) -> zmq.Poller:
        poller = zmq.Poller()
        if frontend:
            poller.register(self.frontend, zmq.POLLIN)
        poller.register(self.backend, zmq.POLLIN)
        for worker in self.workers.values():
            for fd in worker.outputs:
                poller.register(fd, zmq.POLLIN)
        return poller

    def run(self) -> str:
        poller = self._poller()
        while not self.stopping:
            if self._poll_once(poller, _POLL_MS):
                poller = self._poller()  # a worker was replaced: new pipes to watch
            self._housekeeping()
        return self.exit_reason

    def _poll_once(self, poller: zmq.Poller, timeout_ms: int) -> bool:
        changed = False
        for item, _event in poller.poll(timeout_ms):
            if item is self.frontend:
                self._drain_frontend()
            elif item is self.backend:
                self._drain_backend()
            elif isinstance(item, int):
                changed |= self._on_output(item)
        return changed

    def _drain_frontend(self) -> None:
        while True:
            try:
                frames = self.frontend.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self.last_heard = time.monotonic()
            self.client = frames[0]
            kind = frames[1]
            if kind == wire.HELLO:
                self._send_client([wire.INFO, wire.encode_json(self._info())])
            elif kind == wire.STOP:
                self._stop("stopped by the pool")
            elif kind == wire.RESTART and len(frames) >= 4:
                self._restart_worker(frames[2], frames[3])
            elif kind in wire.FILE_KINDS:
                self._send_client(self._receiver().handle(frames[1:]))
            elif kind == wire.CLUSTER:
                self.cluster = frames[2] if self.files is None else self.files.cluster(frames[2])
                if len(frames) > 3 and self.mounts is None:  # the volumes: for this agent only
                    from skyward.agent.mounts import Mounts  # noqa: PLC0415  # only a pool with volumes needs it

                    self.mounts = Mounts(json.loads(frames[3]))
                    self.mounts.start()
                for worker in self.workers.values():
                    self._send_cluster(worker)

    def _receiver(self) -> FileReceiver:
        """The node's FileReceiver, made when the client first sends files: a pool without
        ``Image(includes=...)`` never imports it (manifests, the blob store, hashlib)."""
        if self.files is None:
            from pathlib import Path  # noqa: PLC0415  # ~5 ms of a node's start, for this alone

            from skyward.files.receiver import FileReceiver  # noqa: PLC0415  # see above
            from skyward.home import skyward_home  # noqa: PLC0415  # imports uv's locator

            self.files = FileReceiver(skyward_home(), Path(self.files_dir))
        return self.files

    def _send_cluster(self, worker: WorkerProcess) -> None:
        """The CLUSTER message, once the volumes are up: a worker starts tasks on it."""
        ready = self.mounts is None or (self.mounts.done.is_set() and self.mounts.error is None)
        if self.cluster is not None and worker.ready and ready:
            self._send_worker(worker, [wire.CLUSTER, self.cluster])

    def _say_mounts(self) -> None:
        """Once the volumes are up (or failed): tell the pool, whose open waits for it, and
        let the workers start; a node whose volumes failed stops."""
        mounts = self.mounts
        if mounts is None or self.mounts_said or not mounts.done.is_set():
            return
        self.mounts_said = True
        node = self.config.node
        if mounts.error is not None:
            self._notice({"kind": "volumes", "ok": False, "message": f"node {node}: {mounts.error}"})
            self._stop(f"volumes failed: {mounts.error}")
            return
        self._notice({"kind": "volumes", "ok": True, "message": f"node {node}: volumes ready"})
        for worker in self.workers.values():
            self._send_cluster(worker)

    def _send_worker(self, worker: WorkerProcess, frames: list[bytes]) -> None:
        try:
            self.backend.send_multipart([f"w{worker.index}".encode(), *frames])
        except zmq.ZMQError:
            pass  # it died; its exit is handled where its pipes close

    def _info(self) -> dict[str, object]:
        """What the client's handshake reads: who this agent is (node, pool and instance:
        the client refuses an agent that is not the node it meant to reach), where its
        workers listen, and its versions."""
        return {
            "node": self.config.node,
            "pool_id": self.config.pool_id,
            "instance_id": self.config.instance_id,
            "workers": self.config.workers,
            "endpoints": [self.workers[i].endpoint for i in range(self.config.workers)],
            "data_endpoints": [self.workers[i].data_endpoint for i in range(self.config.workers)],
            "agent_endpoint": self.bound_endpoint,
            "python": platform.python_version(),
            "cloudpickle": cloudpickle.__version__,
            "skyward": __version__,
            "pid": os.getpid(),
            "hostname": platform.node(),
            "executable": sys.executable,
            "bootstrap_steps": os.environ.get(STEPS_ENV, "").split(),
        }

    def _drain_backend(self) -> None:
        while True:
            try:
                frames = self.backend.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            worker = self.workers.get(int(frames[0][1:]))
            if worker is None or frames[1] != wire.READY:
                continue
            restarted = worker.endpoint is not None
            ready = wire.decode_json(frames[2])
            worker.endpoint = ready["endpoint"]
            worker.data_endpoint = ready.get("data_endpoint")
            worker.ready = True
            self._send_cluster(worker)
            if restarted:
                self._notice(
                    {
                        "kind": "worker-ready",
                        "worker": worker.index,
                        "endpoint": worker.endpoint,
                        "data_endpoint": worker.data_endpoint,
                    }
                )

    def _on_output(self, fd: int) -> bool:
        for worker in list(self.workers.values()):
            if fd in worker.outputs and self._forward_output(worker, fd):
                return self._on_worker_exit(worker)
        return False

    def _flush_output(self, worker: WorkerProcess) -> None:
        """Everything left in a finished worker's pipes (see MAX_READS_AT_EXIT)."""
        for fd in list(worker.outputs):
            self._send_lines(worker, *worker.drain(fd, time.monotonic()))

    def _forward_output(self, worker: WorkerProcess, fd: int) -> bool:
        stream, lines, eof = worker.read(fd, time.monotonic())
        self._send_lines(worker, stream, lines)
        return eof

    def _send_lines(self, worker: WorkerProcess, stream: str, lines: list[str]) -> None:
        if lines and self.client is None:
            self.early_lines.setdefault(worker.index, deque(maxlen=_EARLY_LINES)).extend(lines)
        if lines:
            payload = {"worker": worker.index, "stream": stream, "lines": lines, "ts": time.time()}
            self._send_client([wire.LOG, wire.encode_json(payload)])

    def _forward_partial_lines(self, now: float) -> None:
        """Text a task wrote without a line end goes out once it has waited a moment
        (skyward.agent.output), so a progress bar or a prompt shows up while it runs."""
        for worker in list(self.workers.values()):
            for stream, lines in worker.due(now):
                self._send_lines(worker, stream, lines)

    def _failed_to_start(self, worker: WorkerProcess, code: int) -> None:
        detail = "\n".join(self.early_lines.get(worker.index, ()))
        raise SystemExit(f"skyward agent: worker {worker.index} failed to start ({describe_exit(code)}):\n{detail}")

    def _on_worker_exit(self, worker: WorkerProcess) -> bool:
        try:
            code = worker.process.wait(timeout=5)
        except Exception:
            worker.kill()
            code = worker.process.wait()
        self._flush_output(worker)
        worker.close_pipes()
        if self.stopping:
            return True
        if not worker.ready and worker.endpoint is None:
            self._failed_to_start(worker, code)  # its first start: restarting it would fail the same way
        if worker.restart_reason is not None:
            cause = "restarted: it sent a message the client cannot read"
            message = (
                f"worker {worker.index} on node {self.config.node} sent a message the client cannot read "
                f"({worker.restart_reason}) while running this task; the node restarted the worker"
            )
        else:
            cause = describe_exit(code)
            message = (
                f"worker {worker.index} on node {self.config.node} was {cause} while running this task; "
                "the node restarted the worker"
            )
        self._notice({"kind": "worker-died", "worker": worker.index, "cause": cause, "message": message})
        self._spawn(worker.index)
        self.workers[worker.index].endpoint = worker.endpoint  # marks the coming READY as a restart
        return True

    def _restart_worker(self, index: bytes, reason: bytes) -> None:
        """The client could not read what this worker sent (``reason``: a bug, or memory
        gone bad): kill it. Its exit then goes the way of any worker's death: restarted,
        and the client told, so what the worker held fails rather than waits."""
        worker = self.workers.get(int(index)) if index.isdigit() else None
        if worker is None or self.stopping or not worker.ready:
            return
        worker.restart_reason = reason.decode(errors="replace")[:500]
        worker.kill()

    def _notice(self, payload: dict[str, object]) -> None:
        self._send_client([wire.NOTICE, wire.encode_json(payload)])

    def _send_client(self, frames: list[bytes]) -> None:
        if self.client is None:
            return
        try:
            self.frontend.send_multipart([self.client, *frames])
        except zmq.ZMQError:
            pass  # the client is gone; the grace period ends the node

    def _housekeeping(self) -> None:
        now = time.monotonic()
        c = self.config
        if c.ttl_seconds > 0 and now - self.started > c.ttl_seconds:
            self._notice({"kind": "ttl", "message": f"node {c.node}: the pool's TTL of {c.ttl_seconds:g} s passed"})
            self._stop(f"TTL of {c.ttl_seconds:g} s passed")
            return
        if now - self.last_heard > c.grace_seconds:
            self._stop(f"no word from the client for {c.grace_seconds:g} s")
            return
        if now - self.last_ping >= _PING_INTERVAL:
            self.last_ping = now
            self._send_client([wire.PING])
        if self.client is not None and now - self.last_notice_scan >= _NOTICE_SCAN_INTERVAL:
            self.last_notice_scan = now
            self._forward_dropped_notices()
        if c.metrics_interval > 0 and self.sampler is None and now - self.started >= _SAMPLER_AFTER:
            from skyward.agent.metrics import MetricsSampler  # noqa: PLC0415  # psutil: see _SAMPLER_AFTER

            self.sampler = MetricsSampler()
            self.last_metrics = now
        if self.sampler is not None and self.client is not None and now - self.last_metrics >= c.metrics_interval:
            self.last_metrics = now
            self._send_client([wire.METRICS, wire.encode_json(self.sampler.sample())])
        self._forward_partial_lines(now)
        self._say_mounts()
        for worker in list(self.workers.values()):
            if worker.outputs and worker.process.poll() is not None:
                self._on_worker_exit(worker)  # died without closing its pipes (a grandchild holds them)

    def _forward_dropped_notices(self) -> None:
        """Send each complete ``*.json`` file of the drop box to the pool as a NOTICE, then
        remove it. Writers create files whole and rename them into place (names starting
        with "." are unfinished). Only JSON objects with a "kind" pass; anything else is
        reported as a bad notice, so a broken watcher is seen rather than ignored."""
        try:
            names = sorted(n for n in os.listdir(self.notices) if n.endswith(".json") and not n.startswith("."))
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in names:
            path = os.path.join(self.notices, name)
            try:
                if os.stat(path).st_size > _NOTICE_MAX_BYTES:
                    raise ValueError(f"larger than {_NOTICE_MAX_BYTES} bytes")
                with open(path, encoding="utf-8") as file:
                    payload = json.load(file)
                if not isinstance(payload, dict) or not isinstance(payload.get("kind"), str):
                    raise ValueError("not a JSON object with a 'kind'")
            except (OSError, ValueError) as error:
                payload = {"kind": "bad-notice", "message": f"node {self.config.node}: ignored {name}: {error}"}
            payload["node"] = self.config.node
            self._notice(payload)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def _stop(self, reason: str) -> None:
        self.stopping = True
        self.exit_reason = reason

    def shutdown(self) -> None:
        """Stop workers, forward the last of their output, say goodbye, close."""
        self.stopping = True
        for child in self.forked.values():  # forked, never sent a config (the start failed)
            child.kill_unstarted()
        for worker in self.workers.values():
            self._send_worker(worker, [wire.STOP])
        deadline = time.monotonic() + 3
        for worker in self.workers.values():
            try:
                worker.process.wait(timeout=max(0.05, deadline - time.monotonic()))
            except Exception:
                worker.kill()
                worker.process.wait()
            self._flush_output(worker)
            worker.close_pipes()
        if self.mounts is not None:  # after the workers: a synced volume uploads what they wrote
            for problem in self.mounts.close():
                self._notice({"kind": "volumes-close", "message": f"node {self.config.node}: {problem}"})
        self._send_client([wire.BYE])
        if self.files is not None:
            self.files.close()
        if self.auth is not None:
            self.auth.stop()
        self.frontend.close(linger=1000)
        self.backend.close(linger=0)
        self.context.term()


def worker_env(config: AgentConfig, index: int) -> dict[str, str]:
    """Worker ``index``'s environment: the agent's, with its own devices."""
    env = dict(os.environ)
    devices = config.visible_devices
    if index < len(devices) and devices[index] is not None:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # the indices are NVML's, which follow the PCI bus
        env["CUDA_VISIBLE_DEVICES"] = str(devices[index])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _with_mig_devices(config: AgentConfig) -> AgentConfig:
    """The config with each worker's MIG device, when the bootstrap partitioned the GPUs."""
    if config.mig_devices <= 0 or config.visible_devices:
        return config
    # Only a MIG node needs it, and importing the accelerators package loads its catalog
    # and pluggy: every agent would pay for that at start-up.
    import subprocess  # noqa: PLC0415  # ~4 ms of every node's start, for MIG nodes alone

    from skyward.accelerators.mig_node import (  # noqa: PLC0415  # heavy for every other node
        assign_mig_devices,
        mig_devices,
    )

    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    devices = assign_mig_devices(mig_devices(listing), config.workers, config.mig_devices)
    return dataclasses.replace(config, visible_devices=devices)


def _close_stdin() -> None:
    """Nothing else comes on stdin: point it at /dev/null so no child inherits the pipe."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def main() -> None:
    config = _with_mig_devices(AgentConfig.from_stream(sys.stdin))
    _close_stdin()
    # The workers are forked now, before any socket starts a thread; a forked worker
    # returns only by raising SystemExit, so nothing here may catch it (processes.py).
    forked = fork_workers([worker_env(config, i) for i in range(config.workers)]) if can_fork() else []
    supervisor = Supervisor(config, forked)

    def on_signal(signum: int, _frame: object) -> None:
        supervisor._stop(f"received {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        endpoint = supervisor.start()
        print(f"{READY_MARKER} {endpoint}", flush=True)
        reason = supervisor.run()
        print(f"skyward agent on node {config.node} exiting: {reason}", file=sys.stderr, flush=True)
    finally:
        supervisor.shutdown()
