"""What this machine knows of its live pools: one directory per pool in the skyward home.

Every open pool has one (``skyward ls`` lists Local and cloud pools alike); a kept pool's
stays after its client leaves, so ``sky.attach(name)`` can reconnect and ``skyward down
NAME`` can stop it. ``<home>/pools/<name>/`` (0700) holds:

* ``pool.json``: the pool as the command shows it (provider, nodes with their prices,
  created, expiry, keep-alive). No secret.
* ``keys.json`` (0600): the client's CURVE keypair and each node's public key: what a
  new client needs to complete a handshake with the nodes. Only this user reads it; a
  client whose keys are not these is refused by every node (tcp), and the ipc sockets of
  a Local pool sit in a directory only this user opens.
* ``spec.pickle`` (0600): the chosen candidate's ``PoolSpec`` (its provider config and
  image), which an attached pool runs with. Read only from this user's own home.
* ``status.json``: written by the attached client every few seconds: who is attached,
  its tasks, since when the pool is idle; after it left, when it left (the keep-alive
  counts from then).
* ``output.log``: the nodes' output lines as the attached clients received them
  (``skyward logs NAME``).
* ``attached.lock``: held (``flock``) by the one attached client; a second is refused.

Writes are atomic (a temporary file renamed into place), so a reader never sees half a
record. The directory goes when the pool ends: at close, at ``skyward down``, or, for a
kept pool whose nodes stopped on their own, at the next look (``is_over``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from skyward.api.spec import POOL_NAME
from skyward.errors import AttachError
from skyward.home import skyward_home
from skyward.providers.local_sweep import process_alive
from skyward.transport.security import Keypair

POOLS_DIR = "pools"
RECORD_FILE = "pool.json"
KEYS_FILE = "keys.json"
SPEC_FILE = "spec.pickle"
STATUS_FILE = "status.json"
OUTPUT_FILE = "output.log"
LOCK_FILE = "attached.lock"

END_GRACE = 30.0
"""Seconds past a kept pool's keep-alive (or expiry) before a record with no client is
taken for ended: the nodes count the keep-alive from the last word they heard, which is
up to a few seconds after the client wrote ``detached_at``, and then take a moment to stop."""


def pools_dir(home: Path | None = None) -> Path:
    """Where pool records live: ``<skyward home>/pools``."""
    return (home or skyward_home()) / POOLS_DIR


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node of a recorded pool, as its ``NodeHandle`` said, and since when it runs."""

    node: int
    instance_id: str
    endpoint: str
    instance_type: str
    started: float  # Unix time
    spot: bool = False
    ip: str | None = None
    private_ip: str | None = None
    hourly_price: float = 0.0
    ports: dict[str, str] = field(default_factory=dict)  # container port -> endpoint, behind a port mapping
    answers_as: str = ""  # the instance id its agent reports in the handshake ("" where its user-data named none)
    pid: int | None = None  # a Local node's bootstrap process (its process group), else None
    pid_started: float | None = None  # that process's start time (a recycled pid is not it)


@dataclass(frozen=True, slots=True)
class PoolRecord:
    """A live pool as this machine recorded it (``pool.json``)."""

    name: str
    pool_id: str
    provider: str
    region: str
    created: float  # Unix time the pool opened
    expires_at: float  # Unix time its timeout ends it (the nodes' TTL follows)
    workers_per_node: int
    nodes: tuple[NodeRecord, ...] = ()
    keep_alive: float | None = None  # seconds; None: not kept
    transport: str = ""  # "ipc" or "tcp"

    @property
    def kept(self) -> bool:
        return self.keep_alive is not None

    def hourly_price(self) -> float:
        """USD per hour of the nodes it has now."""
        return sum(n.hourly_price for n in self.nodes)

    def cost_so_far(self, now: float) -> float:
        """USD its current nodes cost since each started (nodes it lost are not in it)."""
        return sum(n.hourly_price * max(0.0, now - n.started) / 3600.0 for n in self.nodes)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @staticmethod
    def from_json(raw: str) -> PoolRecord:
        data: dict[str, Any] = json.loads(raw)
        nodes = tuple(NodeRecord(**n) for n in data.pop("nodes", ()))
        return PoolRecord(**data, nodes=nodes)


@dataclass(frozen=True, slots=True)
class PoolStatus:
    """What the attached client last wrote (``status.json``)."""

    client_pid: int | None = None  # None: no client attached
    client_started: float | None = None  # the client's process start time (psutil)
    attached_at: float | None = None
    detached_at: float | None = None  # when the last client left (the keep-alive counts from then)
    tasks_running: int = 0
    tasks_queued: int = 0
    idle_since: float | None = None  # Unix time the pool last had no task; None while busy
    updated: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(raw: str) -> PoolStatus:
        return PoolStatus(**json.loads(raw))


@dataclass(frozen=True, slots=True)
class KeptKeys:
    """What a client needs to be the pool's client: its keypair and each node's public key."""

    client: Keypair
    node_public: Mapping[int, bytes] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "client_public": self.client.public.decode(),
                "client_secret": self.client.secret.decode(),
                "node_public": {str(i): k.decode() for i, k in self.node_public.items()},
            }
        )

    @staticmethod
    def from_json(raw: str) -> KeptKeys:
        data = json.loads(raw)
        client = Keypair(data["client_public"].encode(), data["client_secret"].encode())
        return KeptKeys(client, {int(i): k.encode() for i, k in data["node_public"].items()})


def keep_alive_ends(record: PoolRecord, status: PoolStatus | None) -> float | None:
    """When a kept pool with no client stops on its own (Unix time; pure): its keep-alive
    after the last client left, or its expiry if sooner. None: not kept, or attached."""
    if record.keep_alive is None:
        return None
    if status is not None and status.client_pid is not None:
        return None
    left = status.detached_at if status is not None and status.detached_at is not None else record.created
    return min(left + record.keep_alive, record.expires_at)


def is_over(record: PoolRecord, status: PoolStatus | None, now: float, client_alive: bool) -> bool:
    """Whether the pool has certainly ended (pure; the caller says whether the client
    process of ``status`` still runs): past its expiry, a kept pool past its keep-alive
    with no client, or a pool that was not kept whose client is gone."""
    if now > record.expires_at + END_GRACE:
        return True
    attached = status is not None and status.client_pid is not None and client_alive
    if attached:
        return False
    if not record.kept:
        return True  # its nodes stop within their grace period once the client is gone
    ends = keep_alive_ends(record, status if client_alive else _left_at(status))
    return ends is not None and now > ends + END_GRACE


def seen_status(status: PoolStatus | None, client_alive: bool) -> PoolStatus | None:
    """The status as it stands (pure): as written while its client runs; one whose client
    died without saying so reads as detached since it last wrote (its keep-alive counts
    from then, as the nodes count it from the last word they heard)."""
    return status if client_alive else _left_at(status)


def _left_at(status: PoolStatus | None) -> PoolStatus | None:
    """A status whose client died without saying so: it left when it last wrote."""
    if status is None or status.client_pid is None:
        return status
    return PoolStatus(detached_at=status.updated or status.attached_at)


class PoolStore:
    """The pool records under one skyward home (``pools_dir``). ``home`` is injected for
    tests; by default ``$SKYWARD_HOME`` or ``~/.skyward``."""

    def __init__(self, home: Path | None = None) -> None:
        self.root = pools_dir(home)

    def path(self, name: str) -> Path:
        """Pool ``name``'s directory; ``AttachError`` for a name that is no pool's (a path,
        ``..``): a name never reaches outside the store."""
        if not POOL_NAME.fullmatch(name):
            raise AttachError(
                f"{name!r} is not a pool name (lowercase letters, digits and hyphens; `skyward ls` lists the pools)"
            )
        return self.root / name

    def create(self, record: PoolRecord, keys: KeptKeys, spec_bytes: bytes) -> None:
        """Record a pool that opened: its directory (0700), record, keys and spec (0600).
        Raises ``AttachError`` when a live pool already has the name."""
        directory = self.path(record.name)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            raise AttachError(
                f"a pool named {record.name!r} is already recorded in {directory}: attach to it with "
                f"sky.attach({record.name!r}), stop it with `skyward down {record.name}`, or pick another name="
            ) from None
        _write(directory / KEYS_FILE, keys.to_json().encode())
        _write(directory / SPEC_FILE, spec_bytes)
        self.update(record)

    def claim(self, name: str, now: float, alive: Callable[[PoolStatus], bool]) -> None:
        """Before a pool named ``name`` starts: forget a record of that name whose pool has
        ended; ``AttachError`` when its pool still runs (nothing is made then)."""
        try:
            record = self.record(name)
        except AttachError:
            if self.path(name).exists():
                self.remove(name)  # half-written by a client that died as it opened
            return
        status = self.status(name)
        if is_over(record, status, now, status is not None and alive(status)):
            self.remove(name)
            return
        raise AttachError(
            f"ComputePool(name={name!r}): a pool of that name is running ({record.provider}, "
            f"{len(record.nodes)} node(s)): attach to it with sky.attach({name!r}), stop it with "
            f"`skyward down {name}`, or pick another name"
        )

    def write_keys(self, name: str, keys: KeptKeys) -> None:
        """Rewrite ``keys.json`` (0600): a node was added or replaced with a key of its own.
        Dropped when the record went meanwhile, as a status is: a node that joined while
        its pool closed (seen in the elastic benchmark) belongs to no recorded pool."""
        with contextlib.suppress(FileNotFoundError):
            _write(self.path(name) / KEYS_FILE, keys.to_json().encode())

    def update(self, record: PoolRecord) -> None:
        """Rewrite ``pool.json`` (its nodes changed); dropped when the record went meanwhile."""
        with contextlib.suppress(FileNotFoundError):
            _write(self.path(record.name) / RECORD_FILE, record.to_json().encode())

    def names(self) -> list[str]:
        """Every recorded pool's name, sorted."""
        try:
            return sorted(p.name for p in self.root.iterdir() if (p / RECORD_FILE).is_file())
        except FileNotFoundError:
            return []

    def record(self, name: str) -> PoolRecord:
        """The record of pool ``name``; ``AttachError`` naming the pools there are when none."""
        try:
            return PoolRecord.from_json((self.path(name) / RECORD_FILE).read_text())
        except FileNotFoundError:
            known = ", ".join(self.names()) or "none"
            raise AttachError(
                f"no pool named {name!r} on this machine (recorded pools: {known}; `skyward ls` lists them)"
            ) from None
        except (ValueError, TypeError, KeyError) as error:
            raise AttachError(f"the record of pool {name!r} in {self.path(name)} is unreadable: {error}") from None

    def keys(self, name: str) -> KeptKeys:
        """The keys of pool ``name``; ``AttachError`` when missing, unreadable or readable
        by other users."""
        path = self.path(name) / KEYS_FILE
        try:
            mode = path.stat().st_mode & 0o777
            raw = path.read_text()
        except FileNotFoundError:
            raise AttachError(
                f"pool {name!r} has no keys in {path}: only the machine and user that opened it can attach"
            ) from None
        if mode & 0o077:
            raise AttachError(
                f"{path} is readable by other users (mode {mode:o}); refusing keys others could have copied: "
                "stop the pool with `skyward down` and open a new one"
            )
        try:
            return KeptKeys.from_json(raw)
        except (ValueError, TypeError, KeyError) as error:
            raise AttachError(f"the keys of pool {name!r} in {path} are unreadable: {error}") from None

    def spec_bytes(self, name: str) -> bytes:
        try:
            return (self.path(name) / SPEC_FILE).read_bytes()
        except FileNotFoundError:
            raise AttachError(f"pool {name!r} has no {SPEC_FILE} in {self.path(name)}") from None

    def status(self, name: str) -> PoolStatus | None:
        try:
            return PoolStatus.from_json((self.path(name) / STATUS_FILE).read_text())
        except (FileNotFoundError, ValueError, TypeError):
            return None

    def write_status(self, name: str, status: PoolStatus) -> None:
        """Write the status, unless the record went meanwhile (the pool is being stopped,
        here or by ``skyward down``): a status of a pool that has no record is no one's."""
        with contextlib.suppress(FileNotFoundError):
            _write(self.path(name) / STATUS_FILE, status.to_json().encode())

    def output_path(self, name: str) -> Path:
        return self.path(name) / OUTPUT_FILE

    def remove(self, name: str) -> None:
        """Forget pool ``name`` (its keys go with it)."""
        shutil.rmtree(self.path(name), ignore_errors=True)

    def lock(self, name: str) -> AttachLock:
        """Take pool ``name``'s attach lock; ``AttachError`` when another client holds it."""
        return AttachLock.take(self.path(name) / LOCK_FILE, name)


class AttachLock:
    """The one attached client's claim on a pool: an ``flock`` the kernel releases when the
    process ends, however it ends, so a killed client never blocks the next attach."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle: IO[bytes] | None = handle

    @staticmethod
    def take(path: Path, name: str) -> AttachLock:
        handle = open(path, "a+b")  # noqa: SIM115  # held open for the lock's life
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().decode(errors="replace").strip() or "another process"
            handle.close()
            raise AttachError(
                f"pool {name!r} has a client attached already ({holder}): one client at a time; detach there "
                "(leave its `with` block or call pool.close()) and attach again"
            ) from None
        handle.truncate(0)
        handle.write(f"process {os.getpid()}".encode())
        handle.flush()
        return AttachLock(handle)

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def _write(path: Path, data: bytes) -> None:
    """Write ``path`` whole (0600): a temporary file beside it, renamed into place."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):  # its directory went with the record
            os.unlink(temporary)
        raise


def client_alive(status: PoolStatus) -> bool:
    """Whether the client process ``status`` names still runs (the same process: its start
    time matches, so a recycled pid does not count)."""
    return status.client_pid is not None and process_alive(status.client_pid, status.client_started)


def iter_records(store: PoolStore) -> Iterator[tuple[PoolRecord, PoolStatus | None]]:
    """Every readable record with its status (an unreadable one is skipped)."""
    for name in store.names():
        try:
            yield store.record(name), store.status(name)
        except AttachError:
            continue
