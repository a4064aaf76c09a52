"""The agent's start-up configuration: one line of JSON on the agent's standard input.

The config holds the node's CURVE server secret, so it never travels in the environment:
a process's initial environment stays readable in ``/proc/<pid>/environ`` for its whole
life (to the same user, i.e. to every task), even after ``os.environ`` forgets it. The
bootstrap script feeds it on stdin from a here-document (bash: a pipe, or a 0600
temporary file that is already unlinked), and the agent reads one line and closes stdin.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import IO, Any

ENV_VAR = "SKYWARD_AGENT_CONFIG"
"""The key under which the pool hands the config to the bootstrap (``BootstrapContext.agent_env``);
the bootstrap moves it onto the agent's stdin, never into its environment."""
CONFIG_END = "SKYWARD_AGENT_CONFIG_END"
"""The here-document delimiter; a JSON object line can never equal it."""
READY_MARKER = "::skyward-ready"
DEFAULT_AGENT_PORT = 16789
"""The agent's port on a node: what cloud providers open, to the client's address only."""
WILDCARD_HOST = "0.0.0.0"
BIND_HOST_ENV = "SKYWARD_BIND_HOST"
"""The address that stands for every address of the node's machine on an emulated machine
(``skyward.testing.instances``: one host, each instance at a loopback address of its own).
It narrows a wildcard bind only; an address a provider chose stays as given. Not a way for
a provider to choose where its nodes listen: that is the bind it passes to the user-data
factory (``skyward.providers.protocol.UserDataFactory``)."""


def narrow_wildcard(bind: str, machine_host: str) -> str:
    """``bind`` with a wildcard host (``0.0.0.0``: every address of the machine) replaced
    by ``machine_host`` when that is not empty (pure)."""
    if machine_host and bind.startswith(f"tcp://{WILDCARD_HOST}:"):
        return f"tcp://{machine_host}:{bind.rsplit(':', 1)[1]}"
    return bind


def node_ports(base: int, workers_per_node: int) -> tuple[int, int]:
    """The inclusive range of tcp ports a node listens on: its agent's at ``base``, then one
    per worker right after it (the client talks to each worker directly), then each
    worker's data port (large buffers, sealed: ``skyward.transport.data_channel``).
    Firewalls open exactly this range to the client's address."""
    return base, base + 2 * workers_per_node


STEP_MARKER = "::skyward-step"
# The bootstrap's steps, space-separated, as the agent inherits them: a cloud driver cannot
# read a node's stdout, so the agent reports them and the pool replays them as events.
STEPS_ENV = "SKYWARD_BOOTSTRAP_STEPS"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything a node's agent needs; it reaches the node inside the bootstrap script.

    ``bind`` is ``ipc:///private/dir/node.sock`` on one machine or ``tcp://host:port``
    across machines (``port`` 0 picks a free one, reported in the ready line; otherwise
    the workers take the ports right after it), exactly as the provider passed it to the
    user-data factory. With tcp, ``server_secret`` (this node's own: every node has its
    own keypair) and ``client_public`` (the pool's client, z85 CURVE keys) are required:
    the agent then accepts only the pool's own client, and only a client that meant to
    reach this node completes a handshake. ``pool_id``, ``node`` and ``instance_id`` are
    the agent's identity, which its hello reports and the client checks.
    """

    pool_id: str
    node: int
    total_nodes: int
    workers: int
    bind: str
    run_dir: str
    server_secret: str | None = None
    client_public: str | None = None
    ttl_seconds: float = 0.0
    grace_seconds: float = 30.0
    metrics_interval: float = 2.0
    accelerators: list[str] = field(default_factory=list)
    visible_devices: list[str | None] = field(default_factory=list)
    # > 0: the bootstrap partitioned the GPUs into this many MIG devices; the agent finds
    # them with nvidia-smi -L and gives each worker one (see accelerators.mig_node)
    mig_devices: int = 0
    head_addr: str = "127.0.0.1"
    head_port: int = 0
    instance_id: str = ""
    # the entry-point names of the plugins whose skyward_worker_startup the workers call,
    # when the client knows them (its own environment: see worker_startup_manager); None:
    # every plugin installed on the node
    worker_plugins: list[str] | None = None
    # when worker_plugins is None: the client's own plugins, entry-point name ->
    # [distribution version, whether it implements skyward_worker_startup]; a node's worker
    # loads one the client has at the same version only when it does (see
    # worker_startup_manager), and any other plugin installed on the node
    plugin_census: dict[str, list[str | bool]] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(raw: str) -> AgentConfig:
        data: dict[str, Any] = json.loads(raw)
        return AgentConfig(**data)

    @staticmethod
    def from_stream(stream: IO[str]) -> AgentConfig:
        """The config from the first line of ``stream`` (the agent's stdin)."""
        raw = stream.readline().strip()
        if not raw:
            raise SystemExit("skyward agent: no config on stdin; the bootstrap script feeds it")
        return AgentConfig.from_json(raw)

    def effective_bind(self) -> str:
        """``bind``, except that on an emulated machine (``$SKYWARD_BIND_HOST`` set) a
        wildcard host becomes that machine's own address."""
        return narrow_wildcard(self.bind, os.environ.get(BIND_HOST_ENV, ""))

    @property
    def uses_curve(self) -> bool:
        return self.bind.startswith("tcp://")
