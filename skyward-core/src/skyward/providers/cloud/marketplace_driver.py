"""The driver base the container marketplaces (VastAI, RunPod) share.

Both list every container of the account in one call and read each one's address, port
mapping and status from that listing; both find a pool's containers by the one label
:func:`~skyward.providers.cloud.marketplace.pool_label` gives them (they have no tags),
delete one container per call, sweep earlier pools' leftovers at a pool's start, and
sell interruptible capacity that is asked for, never the default. A driver supplies how
its API lists, reads and deletes a container (:meth:`MarketplaceProvider.containers`,
:meth:`~MarketplaceProvider.read`, :attr:`~MarketplaceProvider.state_of`,
:meth:`~MarketplaceProvider.remove`, :meth:`~MarketplaceProvider.reap_leftovers`);
the verbs the template needs from them (``describe``, ``delete``, ``listed``, ``reap``,
``instance_name``, ``cleanup_hint``) are written once here. The two drivers had each
written them, line for line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from skyward.providers.cloud.http import APIError
from skyward.providers.cloud.marketplace import pool_label, pool_members
from skyward.providers.cloud.removal import sweep_with_notices
from skyward.providers.cloud.template import (
    CS,
    Instance,
    InstanceState,
    PortMappedCloudProvider,
    SpotCloudProvider,
)
from skyward.providers.protocol import EventSink
from skyward.spot import SpotNever, SpotStrategy

if TYPE_CHECKING:
    from skyward.providers.spec import PoolSpec


class MarketplaceProvider(SpotCloudProvider[CS], PortMappedCloudProvider[CS]):
    """A container marketplace's driver: spot capacity, a port mapping, a label per
    container. Subclasses set :attr:`label_key` and :attr:`removal_hint` and supply the
    five methods below that raise ``NotImplementedError``."""

    label_key: ClassVar[str]
    """Where a listed container carries its :func:`pool_label` (VastAI's ``label``,
    RunPod's ``name``)."""

    removal_hint: ClassVar[str]
    """How a user deletes one by hand (``"destroy them with `vastai destroy instance <id>`"``)."""

    # -- what a marketplace driver supplies ---------------------------------------------

    def containers(self) -> list[dict[str, Any]]:
        """Every container of the account, as the API lists them (one call)."""
        raise NotImplementedError(f"{type(self).__name__}.containers")

    @staticmethod
    def state_of(raw: Mapping[str, Any], mapped: bool) -> InstanceState:
        """A listed container's state (a pure function of the listing: the reapers read it
        too); ``mapped``: the container has an address and the agent's port is mapped (it
        is running for the pool only then)."""
        raise NotImplementedError("state_of")

    def read(self, raw: Mapping[str, Any]) -> tuple[str, dict[int, int], str]:
        """A listed container's public address (``""``: none yet), its port mapping
        (container port -> host port) and the API's word for its status."""
        raise NotImplementedError(f"{type(self).__name__}.read")

    def remove(self, instance_id: str) -> None:
        """Delete one container (never merely stop it); one already gone is done."""
        raise NotImplementedError(f"{type(self).__name__}.remove")

    def reap_leftovers(self, now: float, own_pool: str) -> list[str]:
        """Delete other pools' stopped or expired containers; what was done, in words."""
        raise NotImplementedError(f"{type(self).__name__}.reap_leftovers")

    # -- the template's verbs, once for both ----------------------------------------------

    def default_spot(self) -> SpotStrategy:
        """An interruptible container stops whenever the marketplace wants its GPU back (a
        higher bid on VastAI, RunPod's own need): asked for, never the default."""
        return SpotNever()

    def reap(self, spec: PoolSpec, emit: EventSink) -> None:
        sweep_with_notices(
            lambda: self.reap_leftovers(self._clock(), spec.pool_id), emit, APIError, f"{self.instance_noun}s"
        )

    def instance_name(self, spec: PoolSpec, node: int) -> str:
        assert self._labels is not None, "prepare() first"
        return pool_label(spec.pool_id, self._labels.expires, node)

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        """One listing for every container; one counts as running once its agent port is
        mapped to a public address."""
        wanted = set(instance_ids)
        found: dict[str, Instance] = {}
        for raw in self.containers():
            ident = str(raw.get("id"))
            if ident not in wanted:
                continue
            host, mapping, status = self.read(raw)
            state = self.state_of(raw, bool(host) and self.config.agent_port in mapping)
            found[ident] = Instance(ident, state, ip=host or None, status=status, ports=mapping)
        return found

    def delete(self, instance_ids: Sequence[str]) -> None:
        for instance_id in instance_ids:
            self.remove(instance_id)

    def listed(self) -> list[str]:
        """The containers labelled as this pool's (none before ``prepare``)."""
        return [] if self._labels is None else pool_members(self.containers(), self.label_key, self._labels.pool_id)

    def cleanup_hint(self, instance_ids: Sequence[str]) -> str:
        return f"{self.removal_hint} or `skyward down` ({', '.join(instance_ids)})"
