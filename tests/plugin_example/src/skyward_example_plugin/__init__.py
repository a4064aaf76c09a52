"""A provider plugin as a third party writes one (docs/plugins.md, "Write a provider").

``Delayed(seconds=..., fail=...)`` rents instances from ``ProcessCloud``, which stands in
for a cloud's HTTP API: it runs each instance's user-data as a process tree on this
machine at a loopback address of its own. The driver supplies only the API's verbs
(offer, create, describe, delete, infrastructure); the core's cloud template does the
rest. ``seconds`` delays the offer (so tests can tell parallel pools from serial ones) and
``fail`` makes every create fail. Registered only through the ``skyward`` entry point.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import ClassVar

from skyward.errors import ProvisioningError
from skyward.plugins.contributions import DistributedBackend  # the backend half; the provider needs only:
from skyward.providers import (
    BootstrapContext,
    EventSink,
    Market,
    NodePlan,
    PoolSpec,
    ProviderPlugin,
    hookimpl,
    local_bootstrap_context,
)
from skyward.providers.cloud import (
    ChosenOffer,
    CloudProvider,
    CloudSettings,
    Instance,
    InstanceState,
    Labels,
    NodeRequest,
)

# -- the config: what a user writes -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delayed(CloudSettings):
    """``grace_period``, ``bootstrap_timeout``, ``agent_port``, ``poll_interval``, ... come
    from CloudSettings, with their defaults and checks."""

    seconds: float = 0.0
    fail: bool = False


# -- the "API": in a real plugin, an HTTP client ------------------------------------------


class ProcessCloud:
    """Instances are ``bash <user-data>`` process trees, each at its own 127.x.y.z.

    As a test fake of a cloud API it has knobs: ``refuse_after`` refuses every create after
    that many; ``stall`` runs a script that never starts an agent; ``opened`` is every
    ProcessCloud made (to check nothing is left)."""

    refuse_after: ClassVar[int | None] = None
    stall: ClassVar[bool] = False
    opened: ClassVar[list[ProcessCloud]] = []

    def __init__(self) -> None:
        ProcessCloud.opened.append(self)
        self.root = tempfile.mkdtemp(prefix="skyward-example-")  # 0700
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._subnet = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}"  # a /24 of its own
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._labels: dict[str, dict[str, str]] = {}
        self.pools: set[str] = set()  # every pool id an instance was labelled with

    def create(self, name: str, script: str, labels: Mapping[str, str]) -> str:
        with self._lock:
            number = next(self._ids)
        if self.refuse_after is not None and number > self.refuse_after:
            raise ProvisioningError(f"ProcessCloud refuses instance {number}: quota of {self.refuse_after} reached")
        if self.stall:
            script = "#!/bin/sh\nexec sleep 3600\n"
        instance_id, ip = f"ex-{number}", f"{self._subnet}.{number + 1}"
        path = os.path.join(self.root, f"{instance_id}.sh")
        with open(path, "w") as file:
            file.write(script)
        with open(os.path.join(self.root, f"{instance_id}.log"), "wb") as log:
            process = subprocess.Popen(
                ["bash", path],
                env={**os.environ, "SKYWARD_BIND_HOST": ip},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        with self._lock:
            self._processes[instance_id] = process
            self._labels[instance_id] = {**labels, "ip": ip}
            self.pools.add(labels.get("pool", ""))
        return instance_id

    def describe(self, instance_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        with self._lock:
            known = {i: (p, self._labels[i]["ip"]) for i, p in self._processes.items() if i in instance_ids}
        return {i: ("running" if p.poll() is None else "stopped", ip) for i, (p, ip) in known.items()}

    def delete(self, instance_id: str) -> None:
        with self._lock:
            process = self._processes.pop(instance_id, None)
            self._labels.pop(instance_id, None)
        if process is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                    process.wait(timeout=5)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue

    def listed(self, pool_id: str) -> list[str]:
        with self._lock:
            return [i for i, labels in self._labels.items() if labels.get("pool") == pool_id]

    def labels(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return {i: dict(labels) for i, labels in self._labels.items()}

    def console(self, instance_id: str) -> str:
        path = os.path.join(self.root, f"{instance_id}.log")
        return open(path, errors="replace").read() if os.path.exists(path) else ""

    def scripts(self) -> list[str]:
        names = sorted(n for n in os.listdir(self.root) if n.endswith(".sh")) if os.path.isdir(self.root) else []
        return [open(os.path.join(self.root, n)).read() for n in names]

    def running(self) -> list[str]:
        with self._lock:
            return [i for i, p in self._processes.items() if p.poll() is None]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# -- the driver: the API's verbs ----------------------------------------------------------------


class DelayedDriver(CloudProvider[Delayed]):
    name = "delayed"

    def __init__(self, config: Delayed, *, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(config, sleep=sleep)
        self.pause = sleep
        self.api: ProcessCloud | None = None
        self.delay_window: tuple[float, float] | None = None  # monotonic start and end of the delay

    def client_address(self) -> IPv4Address:
        return IPv4Address("127.0.0.1")  # the nodes are on this machine

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        started = time.monotonic()
        self.pause(self.config.seconds)
        self.delay_window = (started, time.monotonic())
        return ChosenOffer(instance_type="process", region="this-machine", price_on_demand=0.0)

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: EventSink) -> None:
        self.api = ProcessCloud()

    def bootstrap_context(self, spec: PoolSpec, market: Market, run_dir: str, node: int) -> BootstrapContext:
        return local_bootstrap_context()  # this machine's Python and uv; a cloud keeps the default

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        assert self.api is not None
        if self.config.fail:
            raise ProvisioningError("the Delayed provider was told to fail")
        return self.api.create(request.name, request.script, {"pool": labels.pool_id, "expires": str(labels.expires)})

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        assert self.api is not None
        states = {"running": InstanceState.RUNNING, "stopped": InstanceState.STOPPED}
        return {
            i: Instance(i, states[status], ip=ip, status=status)
            for i, (status, ip) in self.api.describe(instance_ids).items()
        }

    def delete(self, instance_ids: Sequence[str]) -> None:
        assert self.api is not None
        for instance_id in instance_ids:
            self.api.delete(instance_id)

    def console_output(self, instance_id: str) -> str:  # the ConsoleOutput ability
        return self.api.console(instance_id) if self.api is not None else ""

    def listed(self) -> list[str]:
        return self.api.listed(self.labels.pool_id) if self.api is not None and self.labels else []

    def delete_infrastructure(self) -> list[str]:
        if self.api is not None:
            self.api.close()
            self.api = None
        return []


# -- the hooks ----------------------------------------------------------------------------------


def _tagged(**options: object) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """``skyward.distributed.tagged(tag=...)``: sets an environment variable around the call."""

    def decorate(fn: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*args: object, **kwargs: object) -> object:
            os.environ["SKYWARD_EXAMPLE_TAG"] = str(options.get("tag", ""))
            try:
                return fn(*args, **kwargs)
            finally:
                os.environ.pop("SKYWARD_EXAMPLE_TAG", None)

        return wrapper

    return decorate


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin]:
    return [ProviderPlugin(name="delayed", config_type=Delayed, create_driver=DelayedDriver)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    return {"Delayed": Delayed}


@hookimpl
def skyward_distributed_backends() -> Sequence[DistributedBackend]:
    return [DistributedBackend(name="tagged", factory=_tagged)]
