"""The pool's side of the pool store: what ``ComputePool`` does for its record while it is
open, and what ``sky.attach`` reads to reconnect.

A pool claims its name before anything is made, registers once its nodes answered,
writes its status on its ticker, appends its nodes' output, keeps the record current as
nodes change, and at the end either removes its record (the pool stopped) or leaves it,
saying when the client left (a kept pool detached). ``AttachTarget`` is the other
direction: a kept pool's record, keys and spec, checked, for a new client.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skyward.api.kept.record import KeptKeys, PoolRecord, PoolStore, client_alive, is_over
from skyward.api.kept.registration import Registration, keys_of, record_of
from skyward.api.spec import POOL_NAME
from skyward.display import DISPLAY_MODES
from skyward.errors import AttachError, ConfigurationError, ProvisioningError
from skyward.events import LogLine
from skyward.providers.protocol import NodeHandle
from skyward.providers.spec import PoolSpec
from skyward.transport.security import PoolKeys

ATTACH_TIMEOUT = 10.0
"""Seconds an attaching client waits for the kept nodes' handshake: they are up already
and answer within a second; longer means they stopped, or refuse this client's key."""

PortMap = Callable[[int, int], str]
"""Where the client reaches a container port of a node behind a port mapping (``Fleet.port_map``)."""


def mapped_ports(
    handles: Sequence[NodeHandle], port_map: PortMap | None, ports: Sequence[int]
) -> dict[int, dict[int, str]]:
    """For a provider whose nodes sit behind a port mapping, each node's endpoint for each
    of ``ports`` (what a client that attaches later cannot ask the provider's driver for:
    the mapping was read when the nodes launched)."""
    if port_map is None:
        return {}
    found: dict[int, dict[int, str]] = {}
    for handle in handles:
        for port in ports:
            try:
                found.setdefault(handle.node, {})[port] = port_map(handle.node, port)
            except ProvisioningError:
                continue
    return found


def check_display(display: object) -> str:
    """``sky.attach(display=...)`` checked: one of the display modes."""
    if not isinstance(display, str) or display not in DISPLAY_MODES:
        raise ConfigurationError(
            f"sky.attach(display={display!r}): unknown display mode; use one of {', '.join(map(repr, DISPLAY_MODES))}"
        )
    return display


def with_display(spec: PoolSpec, display: str) -> PoolSpec:
    """The kept pool's spec, shown the way the attaching client asked."""
    return dataclasses.replace(spec, display=check_display(display))


def attach_notice(record: PoolRecord, now: float) -> str:
    """What an attaching client says first (pure): which pool, where, since when."""
    minutes, seconds = divmod(int(max(0.0, now - record.created)), 60)
    return (
        f"attaching to kept pool {record.name!r} ({record.pool_id}): {len(record.nodes)} node(s) on "
        f"{record.provider}, up {minutes}m{seconds:02d}s, keep-alive {record.keep_alive:g} s"
    )


def detach_notice(record: PoolRecord, now: float) -> str:
    """What a kept pool says as its client leaves (pure)."""
    assert record.keep_alive is not None
    ends = min(now + record.keep_alive, record.expires_at)
    until = time.strftime("%H:%M:%S", time.localtime(ends))
    return (
        f"pool {record.name!r} is kept: its {len(record.nodes)} node(s) stay up until no client has been attached "
        f"for {record.keep_alive:g} s (about {until}, its timeout at the latest); sky.attach({record.name!r}) "
        f"reconnects, `skyward down {record.name}` stops it"
    )


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the record keeps of each node beyond its handle: the instance id its agent
    answers as, its port mappings, its agent's pid (and that process's start time)."""

    answers_as: Mapping[int, str]
    ports: Mapping[int, Mapping[int, str]]
    pids: Mapping[int, tuple[int, float | None]]

    def as_fields(self) -> dict[str, Any]:
        return {"answers_as": self.answers_as, "ports": self.ports, "pids": self.pids}


class Keeper:
    """An open pool's record (see the module); ``store`` is injected for tests."""

    def __init__(self, store: PoolStore | None = None) -> None:
        self.store = store or PoolStore()
        self.registration: Registration | None = None
        self._left = False  # the client left: a late node event must not record the pool again

    def claim(self, name: str) -> None:
        """Before anything is made: the name is free (a record of an ended pool is removed)."""
        self.store.claim(name, time.time(), client_alive)

    def record_nodes(
        self,
        spec: PoolSpec,
        provider: str,
        region: str,
        handles: Sequence[NodeHandle],
        keys: PoolKeys,
        facts: NodeFacts,
    ) -> None:
        """The pool's nodes are ``handles``: the first call (the pool opened) records it and
        takes its lock; a later one (a node joined, left or was replaced) updates the record,
        each node keeping its start."""
        registration = self.registration
        if self._left:
            return
        if registration is None:
            record = record_of(spec, provider, region, handles, time.time(), **facts.as_fields())
            self.registration = Registration.register(self.store, record, keys_of(keys, handles), spec)
            return
        before = registration.record
        started = {n.instance_id: n.started for n in before.nodes}
        record = record_of(spec, provider, region, handles, before.created, started=started, **facts.as_fields())
        registration.nodes_changed(record, keys_of(keys, handles))

    def reattached(self, record: PoolRecord) -> None:
        """An attached client holds the kept pool's record from now on."""
        self.registration = Registration.reattach(self.store, record)

    def tick(self, running: int, queued: int) -> None:
        if self.registration is not None:
            self.registration.observe(running, queued)

    def log_line(self, event: LogLine) -> None:
        if self.registration is not None:
            self.registration.output(event.node, event.line)

    def leave(self, *, detach: bool) -> PoolRecord | None:
        """The client leaves: detached (the record stays, saying when) or stopped (it goes).
        Returns the record it held."""
        registration, self.registration = self.registration, None
        self._left = True
        if registration is None:
            return None
        registration.end(kept=detach)
        return registration.record

    def let_go(self) -> PoolRecord | None:
        """Release the lock and leave the record for ``stop_pool`` to remove once it verified."""
        registration, self.registration = self.registration, None
        self._left = True
        if registration is None:
            return None
        registration.release()
        return registration.record


@dataclass(frozen=True, slots=True)
class AttachTarget:
    """A kept pool as a new client finds it: record, keys and the spec it runs with."""

    record: PoolRecord
    keys: KeptKeys
    spec: PoolSpec

    @staticmethod
    def load(store: PoolStore, name: str, now: float) -> AttachTarget:
        """Pool ``name``'s target; ``AttachError`` for a pool that is not kept, has ended
        (its record is then removed) or whose files are missing or unreadable."""
        if not isinstance(name, str) or not POOL_NAME.fullmatch(name):
            # a pool's name or id names a directory under the store: nothing else may
            raise AttachError(f"sky.attach(name={name!r}): give the name of a kept pool (`skyward ls` lists them)")
        record = store.record(name)
        if not record.kept:
            raise AttachError(
                f"pool {name!r} is not kept: it ends with the client that opened it; open it with "
                "ComputePool(name=..., keep_alive=seconds) to attach to it from another process"
            )
        status = store.status(name)
        if is_over(record, status, now, status is not None and client_alive(status)):
            store.remove(name)
            raise AttachError(
                f"pool {name!r} has ended: no client was attached for its keep-alive of {record.keep_alive:g} s "
                "(or its timeout passed), so its nodes stopped themselves; open a new pool"
            )
        keys = store.keys(name)
        try:
            spec = pickle.loads(store.spec_bytes(name))  # this user's own 0600 file
        except AttachError:
            raise
        except Exception as error:
            raise AttachError(f"the saved spec of pool {name!r} cannot be read here: {error}") from None
        if not isinstance(spec, PoolSpec):
            raise AttachError(f"the saved spec of pool {name!r} is not a pool spec")
        missing = sorted({n.node for n in record.nodes} - set(keys.node_public))
        if missing:
            raise AttachError(f"the keys of pool {name!r} lack node(s) {missing}: they are not this pool's keys")
        return AttachTarget(record, keys, spec)

    def handles(self) -> list[NodeHandle]:
        """The recorded nodes as the handles their provider gave (prices, addresses)."""
        return [
            NodeHandle(
                node=n.node, instance_id=n.instance_id, endpoint=n.endpoint, instance_type=n.instance_type,
                spot=n.spot, ip=n.ip, private_ip=n.private_ip, price_on_demand=n.hourly_price,
            )
            for n in self.record.nodes
        ]  # fmt: skip

    def pool_keys(self) -> PoolKeys:
        return PoolKeys.known(self.keys.client, self.keys.node_public)

    def answers_as(self) -> dict[int, str]:
        return {n.node: n.answers_as for n in self.record.nodes}

    def port_map(self) -> PortMap | None:
        """The recorded port mappings as a ``Fleet.port_map`` (None where there are none)."""
        recorded = {n.node: n.ports for n in self.record.nodes if n.ports}
        if not recorded:
            return None

        def lookup(node: int, port: int) -> str:
            where = recorded.get(node, {}).get(str(port))
            if where is None:
                raise ProvisioningError(f"node {node} of pool {self.record.name!r} recorded no mapping for port {port}")
            return where

        return lookup
