"""The agent's start-up configuration: JSON in the ``SKYWARD_AGENT_CONFIG`` variable."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

ENV_VAR = "SKYWARD_AGENT_CONFIG"
READY_MARKER = "::skyward-ready"
DEFAULT_AGENT_PORT = 16789  # what cloud providers open to the client's address only
BIND_HOST_ENV = "SKYWARD_BIND_HOST"  # overrides the host of a tcp bind (emulated instances)


def node_ports(base: int, workers_per_node: int) -> tuple[int, int]:
    """The inclusive range of tcp ports a node listens on: its agent's at ``base``, then one
    per worker right after it (the client talks to each worker directly). Firewalls open
    exactly this range to the client's address."""
    return base, base + workers_per_node


STEP_MARKER = "::skyward-step"
# The bootstrap's steps, space-separated, as the agent inherits them: a cloud driver cannot
# read a node's stdout, so the agent reports them and the pool replays them as events.
STEPS_ENV = "SKYWARD_BOOTSTRAP_STEPS"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything a node's agent needs; it reaches the node inside the bootstrap script.

    ``bind`` is ``ipc:///private/dir/node.sock`` on one machine or ``tcp://host:port``
    across machines (``port`` 0 picks a free one, reported in the ready line). With tcp,
    ``server_secret`` and ``client_public`` (z85 CURVE keys) are required: the agent then
    accepts only the pool's own client.
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

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @staticmethod
    def from_json(raw: str) -> AgentConfig:
        data: dict[str, Any] = json.loads(raw)
        return AgentConfig(**data)

    @staticmethod
    def from_env() -> AgentConfig:
        raw = os.environ.get(ENV_VAR)
        if not raw:
            raise SystemExit(f"skyward agent: {ENV_VAR} is not set; the bootstrap script sets it")
        return AgentConfig.from_json(raw)

    def effective_bind(self) -> str:
        """``bind``, with its host replaced by ``$SKYWARD_BIND_HOST`` when that is set."""
        host = os.environ.get(BIND_HOST_ENV)
        if host and self.bind.startswith("tcp://"):
            return f"tcp://{host}:{self.bind.rsplit(':', 1)[1]}"
        return self.bind

    @property
    def uses_curve(self) -> bool:
        return self.bind.startswith("tcp://")
