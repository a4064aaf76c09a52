"""The node supervisor: routes tasks from the pool's client to worker processes.

One loop, one thread: a zmq poller over the client-facing ROUTER, the worker-facing
ROUTER and every worker's stdout/stderr pipe. Tasks go to idle workers one at a time
(the client bounds how many are in flight per node, so queues here stay small). A worker
that dies fails its task with a message naming the node and the signal, and is
restarted. The agent exits when told to, when its TTL passes, or when it has not heard
from the client for ``grace_seconds``: a node never outlives its pool for long.
"""

from __future__ import annotations

import os
import platform
import signal
import sys
import time
from collections import deque
from typing import Any

import cloudpickle
import zmq

import skyward
from skyward.agent.config import READY_MARKER, AgentConfig
from skyward.agent.metrics import MetricsSampler
from skyward.agent.processes import WorkerProcess, describe_exit
from skyward.transport import security, wire

_POLL_MS = 200
_PONG_INTERVAL = 1.0
_WORKER_START_TIMEOUT = 120.0


class Supervisor:
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.auth: Any = None
        self.frontend = self.context.socket(zmq.ROUTER)
        self.backend = self.context.socket(zmq.ROUTER)
        for sock in (self.frontend, self.backend):
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            sock.setsockopt(zmq.SNDHWM, 0)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.LINGER, 1000)
        self.backend_endpoint = f"ipc://{config.run_dir}/node-{config.node}-workers.sock"
        self.workers: dict[int, WorkerProcess] = {}
        self.queue_any: deque[tuple[bytes, list[Any]]] = deque()
        self.queue_for: dict[int, deque[tuple[bytes, list[Any]]]] = {
            w: deque() for w in range(config.workers)
        }
        self.client: bytes | None = None
        self.cluster: bytes | None = None
        self.started = time.monotonic()
        self.last_heard = time.monotonic()
        self.last_pong = 0.0
        self.last_metrics = 0.0
        self.stopping = False
        self.exit_reason = ""
        self.sampler = MetricsSampler() if config.metrics_interval > 0 else None

    # -- start-up ---------------------------------------------------------------------

    def _worker_info(self, index: int) -> dict[str, object]:
        c = self.config
        return {
            "node": c.node,
            "total_nodes": c.total_nodes,
            "accelerators": c.accelerators,
            "head_addr": c.head_addr,
            "head_port": c.head_port,
            "job_id": c.pool_id,
            "worker": index,
            "workers_per_node": c.workers,
        }

    def _spawn(self, index: int) -> None:
        env = dict(os.environ)
        env.pop("SKYWARD_AGENT_CONFIG", None)  # workers never see the node's keys
        devices = self.config.visible_devices
        if index < len(devices) and devices[index] is not None:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # the indices are NVML's, which follow the PCI bus
            env["CUDA_VISIBLE_DEVICES"] = str(devices[index])
        self.workers[index] = WorkerProcess.spawn(
            index, self.backend_endpoint, self._worker_info(index), env
        )

    def start(self) -> str:
        os.makedirs(self.config.run_dir, mode=0o700, exist_ok=True)
        self.backend.bind(self.backend_endpoint)
        os.chmod(self.backend_endpoint.removeprefix("ipc://"), 0o600)
        for index in range(self.config.workers):
            self._spawn(index)
        deadline = time.monotonic() + _WORKER_START_TIMEOUT
        while not all(w.ready for w in self.workers.values()):
            if time.monotonic() > deadline:
                raise SystemExit("skyward agent: workers did not start within 120 s")
            self._poll_once(self.backend_only_poller(), 100)
            for worker in self.workers.values():
                code = worker.process.poll()
                if code is not None and not worker.ready:
                    _, lines, _ = worker.read(worker.process.stderr.fileno())  # type: ignore[union-attr]
                    detail = "\n".join(lines[-20:])
                    raise SystemExit(
                        f"skyward agent: worker {worker.index} failed to start "
                        f"({describe_exit(code)}):\n{detail}"
                    )
        if self.config.uses_curve:
            if not (self.config.server_secret and self.config.client_public):
                raise SystemExit("skyward agent: a tcp endpoint needs CURVE keys")
            self.auth = security.start_server_auth(self.context, self.config.client_public.encode())
            security.configure_server(self.frontend, self.config.server_secret.encode())
        bind = self.config.effective_bind()
        if bind.endswith(":0"):
            port = self.frontend.bind_to_random_port(bind.rsplit(":", 1)[0])
            endpoint = f"{bind.rsplit(':', 1)[0]}:{port}"
        else:
            self.frontend.bind(bind)
            endpoint = bind
        if endpoint.startswith("ipc://"):
            os.chmod(endpoint.removeprefix("ipc://"), 0o600)
        self.last_heard = time.monotonic()
        return endpoint

    def backend_only_poller(self) -> zmq.Poller:
        poller = zmq.Poller()
        poller.register(self.backend, zmq.POLLIN)
        return poller

    # -- main loop --------------------------------------------------------------------

    def _poller(self) -> zmq.Poller:
        poller = zmq.Poller()
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
                frames = self.frontend.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            self.last_heard = time.monotonic()
            self.client = frames[0].bytes
            self._on_client(self.client, frames[1:])
        self._dispatch()

    def _on_client(self, client: bytes, frames: list[Any]) -> None:
        kind = frames[0].bytes
        if kind == wire.TASK:
            _task_id, target = wire.parse_task_header(frames[1].bytes)
            if target == wire.ANY_WORKER:
                self.queue_any.append((client, frames))
            elif target in self.queue_for:
                self.queue_for[target].append((client, frames))
            else:
                task_id, _ = wire.parse_task_header(frames[1].bytes)
                self._reply_died(client, task_id, f"node {self.config.node} has no worker {target}")
        elif kind == wire.HELLO:
            self._send_client([wire.INFO, wire.encode_json(self._info())])
        elif kind == wire.STOP:
            self._stop("stopped by the pool")
        elif kind == wire.CLUSTER:
            self.cluster = frames[1].bytes
            for worker in self.workers.values():
                if worker.ready:
                    self._send_cluster(worker)

    def _send_cluster(self, worker: WorkerProcess) -> None:
        if self.cluster is not None:
            try:
                self.backend.send_multipart([f"w{worker.index}".encode(), wire.CLUSTER, self.cluster])
            except zmq.ZMQError:
                pass

    def _info(self) -> dict[str, object]:
        return {
            "node": self.config.node,
            "workers": self.config.workers,
            "python": platform.python_version(),
            "cloudpickle": cloudpickle.__version__,
            "skyward": skyward.__version__,
            "pid": os.getpid(),
            "hostname": platform.node(),
            "executable": sys.executable,
        }

    def _dispatch(self) -> None:
        for worker in self.workers.values():
            if not worker.ready or worker.busy_task is not None:
                continue
            own = self.queue_for[worker.index]
            queue = own if own else self.queue_any
            if not queue:
                continue
            client, frames = queue.popleft()
            task_id, _ = wire.parse_task_header(frames[1].bytes)
            try:
                self.backend.send_multipart([f"w{worker.index}".encode(), *frames], copy=False)
            except zmq.ZMQError:
                queue.appendleft((client, frames))  # worker vanished; death handling requeues
                continue
            worker.busy_task = (client, task_id)

    def _drain_backend(self) -> None:
        while True:
            try:
                frames = self.backend.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            index = int(frames[0].bytes[1:])
            worker = self.workers.get(index)
            if worker is None:
                continue
            kind = frames[1].bytes
            if kind == wire.READY:
                worker.ready = True
                self._send_cluster(worker)
            elif kind == wire.RESULT:
                self._flush_output(worker)  # what it printed reaches the client first
                busy, worker.busy_task = worker.busy_task, None
                if busy is not None:
                    self._send_to(busy[0], [wire.RESULT, *frames[2:]])
        self._dispatch()

    def _flush_output(self, worker: WorkerProcess) -> None:
        for fd in list(worker.outputs):
            self._forward_output(worker, fd)

    def _on_output(self, fd: int) -> bool:
        for worker in list(self.workers.values()):
            if fd in worker.outputs:
                eof = self._forward_output(worker, fd)
                if eof:
                    return self._on_worker_exit(worker)
        return False

    def _forward_output(self, worker: WorkerProcess, fd: int) -> bool:
        stream, lines, eof = worker.read(fd)
        if lines and self.client is not None:
            payload = {"worker": worker.index, "stream": stream, "lines": lines, "ts": time.time()}
            self._send_client([wire.LOG, wire.encode_json(payload)])
        return eof

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
        cause = describe_exit(code)
        if worker.busy_task is not None:
            client, task_id = worker.busy_task
            self._reply_died(
                client,
                task_id,
                f"worker {worker.index} on node {self.config.node} was {cause} while running "
                "this task; the node restarted the worker",
            )
        self._notice({"kind": "worker-restarted", "worker": worker.index, "cause": cause})
        self._spawn(worker.index)
        return True

    def _reply_died(self, client: bytes, task_id: int, message: str) -> None:
        payload = wire.encode_json({"message": message, "node": self.config.node})
        self._send_to(client, [wire.RESULT, wire.result_header(task_id, wire.Status.DIED), payload])

    def _notice(self, payload: dict[str, object]) -> None:
        self._send_client([wire.NOTICE, wire.encode_json(payload)])

    def _send_client(self, frames: list[Any]) -> None:
        if self.client is not None:
            self._send_to(self.client, frames)

    def _send_to(self, client: bytes, frames: list[Any]) -> None:
        try:
            self.frontend.send_multipart([client, *frames], copy=False)
        except zmq.ZMQError:
            pass  # the client is gone; the grace period ends the node

    def _housekeeping(self) -> None:
        now = time.monotonic()
        c = self.config
        if c.ttl_seconds > 0 and now - self.started > c.ttl_seconds:
            self._notice({"kind": "ttl", "message": f"the pool's TTL of {c.ttl_seconds:g} s passed"})
            self._stop(f"TTL of {c.ttl_seconds:g} s passed")
            return
        if now - self.last_heard > c.grace_seconds:
            self._stop(f"no word from the client for {c.grace_seconds:g} s")
            return
        if self.client is not None and now - self.last_pong >= _PONG_INTERVAL:
            self.last_pong = now
            self._send_client([wire.PING])
        if self.sampler is not None and self.client is not None and now - self.last_metrics >= c.metrics_interval:
            self.last_metrics = now
            self._send_client([wire.METRICS, wire.encode_json(self.sampler.sample())])
        for worker in list(self.workers.values()):
            if worker.outputs and worker.process.poll() is not None:
                # Died without us seeing EOF yet (pipes inherited by a grandchild).
                self._on_worker_exit(worker)

    def _stop(self, reason: str) -> None:
        self.stopping = True
        self.exit_reason = reason

    def shutdown(self) -> None:
        self.stopping = True
        for worker in self.workers.values():
            worker.kill(signal.SIGTERM)
        deadline = time.monotonic() + 3
        for worker in self.workers.values():
            remaining = max(0.0, deadline - time.monotonic())
            try:
                worker.process.wait(timeout=remaining)
            except Exception:
                worker.kill()
                worker.process.wait()
            worker.close_pipes()
        if self.auth is not None:
            self.auth.stop()
        self.frontend.close(linger=500)
        self.backend.close(linger=0)
        self.context.term()


def main() -> None:
    config = AgentConfig.from_env()
    supervisor = Supervisor(config)

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
