"""An open pool's entry in the pool store, while this client holds it.

Every pool registers when it opens (so ``skyward ls`` shows it, Local ones too) and takes
the attach lock; it writes its status every ``STATUS_INTERVAL`` seconds and appends its
nodes' output to ``output.log``; at close the entry goes, unless the pool is kept, in
which case the client only says when it left and lets the lock go.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence

import cloudpickle

from skyward.api.kept.record import AttachLock, KeptKeys, NodeRecord, PoolRecord, PoolStatus, PoolStore
from skyward.providers.local_sweep import started_at
from skyward.providers.protocol import NodeHandle
from skyward.providers.spec import PoolSpec
from skyward.transport.security import PoolKeys
from skyward.volume import Volume

OUTPUT_ROTATE_BYTES = 16 * 2**20
"""Where ``output.log`` starts again (the older 16 MiB move to ``output.log.1``): a pool
that prints a lot for days keeps at most 32 MiB of it on the client's disk."""

STATUS_INTERVAL = 2.0
"""Seconds between two status writes: ``skyward ls`` is at most this stale, and a pool
writes one small file that often (a rename of ~200 bytes)."""


def record_of(
    spec: PoolSpec,
    provider: str,
    region: str,
    handles: Sequence[NodeHandle],
    created: float,
    transport: str = "",
    answers_as: Mapping[int, str] | None = None,
    started: Mapping[str, float] | None = None,
    ports: Mapping[int, Mapping[int, str]] | None = None,
    pids: Mapping[int, tuple[int, float | None]] | None = None,
) -> PoolRecord:
    """The record of a pool that runs ``handles`` (pure): each node billed from
    ``started[instance_id]``, or from ``created`` for a node not in it."""
    nodes = tuple(
        NodeRecord(
            node=h.node, instance_id=h.instance_id, endpoint=h.endpoint, instance_type=h.instance_type,
            started=(started or {}).get(h.instance_id, created), spot=h.spot, ip=h.ip, private_ip=h.private_ip,
            hourly_price=h.hourly_price,
            answers_as=(answers_as or {}).get(h.node, ""),
            ports={str(port): where for port, where in (ports or {}).get(h.node, {}).items()},
            pid=(pids or {}).get(h.node, (None, None))[0],
            pid_started=(pids or {}).get(h.node, (None, None))[1],
        )
        for h in handles
    )  # fmt: skip
    return PoolRecord(
        name=spec.label, pool_id=spec.pool_id, provider=provider, region=region, created=created,
        expires_at=created + spec.timeout, workers_per_node=spec.workers_per_node, nodes=nodes,
        keep_alive=spec.keep_alive, transport=transport,
    )  # fmt: skip


def saved_spec(spec: PoolSpec) -> bytes:
    """The spec an attaching client runs with, pickled, without the image's env or the
    ``sky.Volume``s (their storage keys): the nodes got both over the channel when they
    started and keep them (their mounts stay up), so no value (a ``sky.Secret`` among
    them) is copied onto the client's disk."""
    kept = dataclasses.replace(
        spec,
        image=dataclasses.replace(spec.image, env={}),
        volumes=tuple(v for v in spec.volumes if not isinstance(v, Volume)),
    )
    data: bytes = cloudpickle.dumps(kept)
    return data


def keys_of(keys: PoolKeys, handles: Sequence[NodeHandle]) -> KeptKeys:
    """The client keypair and the public key of each of ``handles``' nodes."""
    return KeptKeys(keys.client, {h.node: keys.node(h.node).public for h in handles})


class Registration:
    """A pool's entry while this client holds its lock."""

    def __init__(self, store: PoolStore, record: PoolRecord, lock: AttachLock) -> None:
        self.store = store
        self.record = record
        self._lock = lock
        self._last_status = 0.0
        self._idle_since: float | None = time.time()
        self._output_bytes: int | None = None

    @staticmethod
    def reattach(store: PoolStore, record: PoolRecord) -> Registration:
        """Hold an existing kept pool's entry (``sky.attach``): its lock, then a status
        saying who is attached (``AttachError`` when another client holds it)."""
        registration = Registration(store, record, store.lock(record.name))
        registration.write_status(0, 0, time.time(), force=True)
        return registration

    @staticmethod
    def register(store: PoolStore, record: PoolRecord, keys: KeptKeys, spec: PoolSpec) -> Registration:
        """Create the pool's entry and take its lock (``AttachError`` if the name is taken)."""
        # only a kept pool is attached to later: another pool's config need not pickle (a
        # test's injected session holds locks), and its spec is not worth the write
        store.create(record, keys, saved_spec(spec) if spec.kept else b"")
        try:
            lock = store.lock(record.name)
        except BaseException:
            store.remove(record.name)
            raise
        registration = Registration(store, record, lock)
        registration.write_status(0, 0, None, force=True)
        return registration

    def write_status(self, running: int, queued: int, idle_since: float | None, *, force: bool = False) -> None:
        """Say what this client runs now (at most every STATUS_INTERVAL unless ``force``)."""
        now = time.time()
        if not force and now - self._last_status < STATUS_INTERVAL:
            return
        self._last_status = now
        previous = self.store.status(self.record.name)
        attached_at = previous.attached_at if previous is not None and previous.client_pid is not None else now
        self.store.write_status(
            self.record.name,
            PoolStatus(
                client_pid=os.getpid(), client_started=started_at(os.getpid()), attached_at=attached_at,
                tasks_running=running, tasks_queued=queued, idle_since=idle_since, updated=now,
            ),
        )  # fmt: skip

    def nodes_changed(self, record: PoolRecord, keys: KeptKeys) -> None:
        """The pool's nodes changed (one added, removed or replaced): the record and the
        keys say what an attaching client must now reach."""
        self.record = record
        self.store.write_keys(record.name, keys)
        self.store.update(record)

    def observe(self, running: int, queued: int) -> None:
        """What the client runs now (called on the pool's ticker): tracks since when the
        pool has had no task, and writes the status when it is due."""
        busy = running + queued > 0
        if busy:
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = time.time()
        self.write_status(running, queued, self._idle_since)

    def output(self, node: int, line: str) -> None:
        """Append one node output line to the pool's output log (``skyward logs``); the log
        is rotated once it passes ``OUTPUT_ROTATE_BYTES`` (one older generation kept)."""
        path = self.store.output_path(self.record.name)
        try:
            if self._output_bytes is None:
                self._output_bytes = path.stat().st_size if path.exists() else 0
            if self._output_bytes > OUTPUT_ROTATE_BYTES:
                path.replace(path.with_name(path.name + ".1"))
                self._output_bytes = 0
            data = f"[node {node}] {line}\n".encode(errors="replace")
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            self._output_bytes += len(data)
        except OSError:
            pass  # the record went (the pool is being stopped from outside): nothing to keep

    def release(self) -> None:
        """Let the attach lock go, leaving the record as it is (``stop_pool`` removes it)."""
        self._lock.release()

    def end(self, *, kept: bool) -> None:
        """The client leaves: a kept pool's entry stays, saying when it left; any other goes."""
        try:
            if kept:
                self.store.write_status(self.record.name, PoolStatus(detached_at=time.time(), updated=time.time()))
            else:
                self.store.remove(self.record.name)
        finally:
            self._lock.release()
