"""The seam between the pool and a provider.

The pool owns tasks, keys and events; a provider owns machines. It prepares shared
infrastructure, launches N nodes each running the user-data the pool renders for it,
reports how to reach each node's agent, and terminates what it made. It knows nothing
of tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from skyward.image import BootstrapContext


@dataclass(frozen=True, slots=True)
class NodeHandle:
    """One launched node. ``endpoint`` is where the pool's client connects (its agent)."""

    node: int
    instance_id: str
    endpoint: str
    instance_type: str
    spot: bool = False
    ip: str | None = None
    private_ip: str | None = None
    price_on_demand: float = 0.0
    price_spot: float | None = None
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def hourly_price(self) -> float:
        return self.price_spot if self.spot and self.price_spot is not None else self.price_on_demand


class UserDataFactory(Protocol):
    """Renders node ``node``'s bootstrap script; ``bind`` is where its agent listens."""

    def __call__(
        self,
        node: int,
        bind: str,
        context: BootstrapContext,
        *,
        run_dir: str,
        visible_devices: Sequence[str | None] = (),
        instance_id: str = "",
    ) -> str: ...


EventSink = Callable[[Any], None]


class ProviderDriver(Protocol):
    """What every provider implements. All methods block; the pool calls them in order:
    ``validate`` (at construction), ``prepare``, ``launch``, later ``terminate`` and
    ``teardown`` (always, even after a failure)."""

    name: str

    def validate(self, spec: Any) -> None:
        """Refuse, before anything is made, what this provider cannot do."""

    def prepare(self, spec: Any, emit: EventSink) -> str:
        """Make shared infrastructure; returns the region label for ``InfraCreated``."""

    def launch(self, spec: Any, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        """Start every node and return once each agent's endpoint is known. Emits, per
        node: InstanceProvisioned once the instance exists, then BootstrapStarting,
        BootstrapProgress as steps are seen, BootstrapCompleted. On failure terminate
        what was started, then raise."""

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Delete these nodes (not merely stop them: a stopped instance can still bill)."""

    def teardown(self) -> None:
        """Remove what ``prepare`` made."""

    # Optional, for providers with a spot market (the pool looks them up with getattr):
    #
    # def replaces_interrupted(self, spec: Any) -> bool:
    #     """Whether a node reclaimed by the provider should be replaced (Spot.Always)."""
    #
    # def replace(self, spec: Any, handle: NodeHandle, user_data: UserDataFactory, emit: EventSink) -> NodeHandle:
    #     """Start a new node with ``handle.node``'s index; return once its agent listens."""
