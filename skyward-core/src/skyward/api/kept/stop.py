"""Stopping a recorded pool from outside its client: what ``skyward down NAME`` does, and
``stop_pool(name)`` from Python.

Three steps, each verified:

1. **Tell the agents.** One DEALER per node endpoint (CURVE over tcp with the recorded
   keys, as the pool's own client connects; plain on a Local pool's ipc sockets, which sit
   in a directory only this user opens) sends HELLO, then STOP, as the client's close
   does. The agent answers HELLO with its INFO (its pid, which a record without
   ``NodeRecord.pid`` lacks) and STOP with BYE once its workers stopped and their last
   output went out. A node that does not answer (its agent gone, its address unreachable)
   is not a failure: the next step decides.
2. **Make sure.** On Local, each agent's process (``NodeRecord.pid``, checked against its
   start time so that a recycled pid is never signalled) must end: after ``grace``
   seconds its process group gets SIGTERM, ``kill_after`` seconds later SIGKILL, and the
   group must then be empty. A node with no recorded pid that did not answer either has
   no process left to find (its socket is gone with its run directory): it is reported
   (``unknown``) and taken for gone. On a cloud, the pool's resources are deleted by pool
   id through the provider's resource session, which lists again to verify.
3. **Forget it.** The record (keys included) is removed when nothing is left. When
   something is (a process that outlived SIGKILL, a resource the provider kept), the
   record stays, so the same ``skyward down NAME`` can be tried again with its keys.

The decisions are pure (``due_signal``, ``processes_of``); signals, clock and sleep come
through ``ProcessTable`` and two callables, so tests drive every branch without a
process that refuses to die.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

import psutil
import zmq

from skyward.api.kept.record import PoolRecord, PoolStore, client_alive
from skyward.errors import AttachError
from skyward.plugins.registry import get_plugin_manager
from skyward.providers.local_sweep import process_alive
from skyward.providers.resources import ProviderTools, Removal, ResourceSession
from skyward.transport import security, wire
from skyward.transport.security import Keypair

LOCAL = "local"

ANSWER_TIMEOUT = 5.0
"""Seconds every node together gets to answer STOP with BYE: an agent gives its workers up
to 3 s to stop (``Supervisor.shutdown``), then says goodbye."""

GRACE = 5.0
"""Seconds a Local agent has, after STOP, to exit by itself before its process group gets
SIGTERM: one that said BYE exits within a fraction of a second; one that did not answer
(its socket gone) would never exit on its own before its grace period."""

KILL_AFTER = 5.0
"""Seconds between SIGTERM and SIGKILL, as Local's own stop (``providers.local.STOP_GRACE``)."""

SETTLE = 2.0
"""Seconds after SIGKILL for the kernel to take the group's processes away before what is
left counts as left."""

POLL = 0.1
"""Seconds between two looks at the processes while waiting (a look is one ``kill(0)``
per pid and a scan of the process table: a few milliseconds)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What one node's agent said: its pid (INFO) and whether it said goodbye."""

    node: int
    pid: int | None = None
    said_bye: bool = False


@dataclass(frozen=True, slots=True)
class LocalProcess:
    """A Local node's agent process: its pid and start time (None: unknown; then only the
    pid is checked)."""

    node: int
    pid: int
    started: float | None = None


@dataclass(frozen=True, slots=True)
class ProcessEnd:
    """How a Local node's process ended: ``"exited"`` (on STOP, or already gone),
    ``"terminated"`` (SIGTERM), ``"killed"`` (SIGKILL), or ``"left"`` (it still runs)."""

    process: LocalProcess
    how: str
    survivors: tuple[int, ...] = ()  # pids of its process group still running, when left


@dataclass(frozen=True, slots=True)
class StopReport:
    """What ``stop_pool`` did."""

    name: str
    pool_id: str
    provider: str
    answers: tuple[Answer, ...] = ()
    processes: tuple[ProcessEnd, ...] = ()
    removals: tuple[Removal, ...] = ()
    unknown: tuple[int, ...] = ()  # Local nodes with no recorded pid that did not answer: taken for gone
    errors: tuple[str, ...] = ()
    record_removed: bool = False

    @property
    def left(self) -> list[str]:
        """One line per thing that is left: a process, a resource, an error."""
        lines = [
            f"node {p.process.node}: process {p.process.pid} (and {', '.join(map(str, p.survivors))} in its group) "
            "still runs after SIGKILL"
            for p in self.processes
            if p.how == "left"
        ]
        lines += [
            f"{r.resource.provider} {r.resource.kind} {r.resource.id}: not removed ({r.detail or 'still listed'})"
            for r in self.removals
            if not r.removed
        ]
        return lines + list(self.errors)

    @property
    def ok(self) -> bool:
        return not self.left


@runtime_checkable
class ProcessTable(Protocol):
    """The operating system's processes, as stopping a Local pool needs them (a seam)."""

    def same_process(self, pid: int, started: float | None) -> bool:
        """Whether ``pid`` runs (not a zombie) and is the process that started at ``started``."""
        ...

    def group_of(self, pid: int) -> int | None:
        """``pid``'s process group, None when it is gone."""
        ...

    def members(self, group: int) -> list[int]:
        """The running (not zombie) processes of process group ``group``."""
        ...

    def signal_group(self, group: int, sig: int) -> None:
        """Send ``sig`` to every process of ``group`` (one already gone is fine)."""
        ...


class SystemProcesses:
    """The real process table (psutil and ``killpg``)."""

    def same_process(self, pid: int, started: float | None) -> bool:
        return process_alive(pid, started)

    def group_of(self, pid: int) -> int | None:
        try:
            return os.getpgid(pid)
        except ProcessLookupError:
            return None

    def members(self, group: int) -> list[int]:
        found = []
        for process in psutil.process_iter(["status"]):
            try:
                if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == group:
                    found.append(process.pid)
            except (ProcessLookupError, psutil.Error):
                continue
        return found

    def signal_group(self, group: int, sig: int) -> None:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass


# -- pure decisions ----------------------------------------------------------------------


def processes_of(record: PoolRecord, answers: Iterable[Answer]) -> tuple[list[LocalProcess], list[int]]:
    """A Local pool's agent processes (pure): each node's recorded pid (with its start
    time), else the pid its agent gave in INFO; and the nodes with neither."""
    told = {a.node: a.pid for a in answers if a.pid is not None}
    known: list[LocalProcess] = []
    unknown: list[int] = []
    for node in record.nodes:
        if node.pid is not None:
            known.append(LocalProcess(node.node, node.pid, node.pid_started))
        elif node.node in told:
            known.append(LocalProcess(node.node, told[node.node]))
        else:
            unknown.append(node.node)
    return known, unknown


_ENDED_BY: dict[int, str] = {signal.SIGTERM: "terminated", signal.SIGKILL: "killed"}


def due_signal(elapsed: float, grace: float, kill_after: float) -> int | None:
    """The signal a group still running after ``elapsed`` seconds is due (pure): none
    during the grace, SIGTERM after it, SIGKILL ``kill_after`` seconds later."""
    if elapsed < grace:
        return None
    return signal.SIGTERM if elapsed < grace + kill_after else signal.SIGKILL


# -- step 1: tell the agents ----------------------------------------------------------------


def tell_to_stop(
    record: PoolRecord, client: Keypair, node_public: Mapping[int, bytes], timeout: float = ANSWER_TIMEOUT
) -> list[Answer]:
    """Send each node's agent HELLO and STOP, as the pool's client would, and collect what
    they say within ``timeout`` seconds (all nodes at once). A tcp node without a recorded
    key is not asked (an unencrypted connection is refused everywhere in skyward)."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sockets: dict[zmq.Socket[bytes], int] = {}
    pids: dict[int, int] = {}
    bye: set[int] = set()
    try:
        for node in record.nodes:
            sock = context.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            if node.endpoint.startswith("tcp://"):
                key = node_public.get(node.node)
                if key is None:
                    sock.close(linger=0)
                    continue
                security.configure_client(sock, key, client)
            sock.connect(node.endpoint)
            sock.send(wire.HELLO)
            sock.send(wire.STOP)
            sockets[sock] = node.node
        poller = zmq.Poller()
        for sock in sockets:
            poller.register(sock, zmq.POLLIN)
        deadline = time.monotonic() + timeout
        while len(bye) < len(sockets) and (left := deadline - time.monotonic()) > 0:
            for sock, _ in poller.poll(int(left * 1000) + 1):
                index = sockets[sock]
                frames = sock.recv_multipart()
                if frames[0] == wire.INFO and len(frames) > 1:
                    pid = _pid_in(frames[1])
                    if pid is not None:
                        pids[index] = pid
                elif frames[0] == wire.BYE:
                    bye.add(index)
    finally:
        context.destroy(linger=0)
    return [Answer(n.node, pids.get(n.node), n.node in bye) for n in record.nodes]


def _pid_in(raw: bytes) -> int | None:
    try:
        pid = json.loads(raw).get("pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


# -- step 2: make sure (Local) ----------------------------------------------------------------


def end_processes(
    processes: Sequence[LocalProcess],
    table: ProcessTable,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    grace: float = GRACE,
    kill_after: float = KILL_AFTER,
    settle: float = SETTLE,
) -> list[ProcessEnd]:
    """Wait for these agent processes to end; past ``grace`` signal their process groups
    (SIGTERM, then SIGKILL), and report how each ended. A pid that is no longer the
    recorded process counts as exited and its group is never signalled."""
    groups: dict[LocalProcess, int] = {}
    ends: dict[LocalProcess, str] = {}
    for process in processes:
        group = table.group_of(process.pid) if table.same_process(process.pid, process.started) else None
        if group is None:
            ends[process] = "exited"
        else:
            groups[process] = group
    start = clock()
    sent: dict[LocalProcess, int] = {}
    while True:
        running = {p: g for p, g in groups.items() if p not in ends and table.members(g)}
        for process in groups:
            if process not in ends and process not in running:
                ends[process] = _ENDED_BY.get(sent.get(process, 0), "exited")
        elapsed = clock() - start
        if not running or elapsed >= grace + kill_after + settle:
            break
        due = due_signal(elapsed, grace, kill_after)
        for process, group in running.items():
            if due is not None and sent.get(process) != due:
                table.signal_group(group, due)
                sent[process] = due
        sleep(POLL)
    out = []
    for process in processes:
        if process in ends:
            out.append(ProcessEnd(process, ends[process]))
        else:
            out.append(ProcessEnd(process, "left", tuple(table.members(groups[process]))))
    return out


# -- step 2: make sure (cloud) ----------------------------------------------------------------


def provider_session(provider: str, config: object | None = None) -> ResourceSession:
    """The installed plugin's resource session for ``provider`` (its defaults and the
    environment when ``config`` is None): what deletes a cloud pool's resources."""
    groups = get_plugin_manager().hook.skyward_provider_tools()
    tools: dict[str, ProviderTools] = {t.name: t for group in groups for t in group}
    if provider not in tools:
        raise AttachError(
            f"the pool's provider {provider!r} has no installed plugin: install it to stop the pool's machines "
            f"(installed: {', '.join(sorted(tools)) or 'none'})"
        )
    session = tools[provider].open(config)
    if not isinstance(session, ResourceSession):
        raise AttachError(f"the {provider} plugin's tools do not list resources (a plugin bug)")
    return session


def delete_pool_resources(session: ResourceSession, pool_id: str) -> list[Removal]:
    """Delete every resource of ``pool_id`` the session lists (it lists again to verify)."""
    mine = [r for r in session.resources() if r.pool_id == pool_id]
    return session.delete(mine) if mine else []


# -- the whole ---------------------------------------------------------------------------------


@dataclass
class Stopper:
    """``stop_pool``'s seams: the messenger, the process table, the clock and sleep, and
    where a cloud pool's resources are deleted (``delete(record)``)."""

    tell: Callable[[PoolRecord, Keypair, Mapping[int, bytes]], list[Answer]] = tell_to_stop
    table: ProcessTable = field(default_factory=SystemProcesses)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    delete: Callable[[PoolRecord], list[Removal]] | None = None
    grace: float = GRACE
    kill_after: float = KILL_AFTER

    def stop(self, store: PoolStore, name: str) -> StopReport:
        record = find_record(store, name)
        keys = store.keys(record.name)
        answers = self.tell(record, keys.client, keys.node_public)
        processes: list[ProcessEnd] = []
        removals: list[Removal] = []
        unknown: list[int] = []
        errors: list[str] = []
        if record.provider == LOCAL:
            known, unknown = processes_of(record, answers)
            unknown = [n for n in unknown if not _answered(answers, n)]
            processes = end_processes(
                known, self.table, clock=self.clock, sleep=self.sleep, grace=self.grace, kill_after=self.kill_after
            )
        else:
            delete = self.delete or (lambda r: delete_pool_resources(provider_session(r.provider), r.pool_id))
            try:
                removals = delete(record)
            except Exception as error:
                errors.append(f"{record.provider}: could not delete pool {record.pool_id}'s resources: {error}")
        report = StopReport(
            record.name, record.pool_id, record.provider, tuple(answers), tuple(processes), tuple(removals),
            tuple(unknown), tuple(errors),
        )  # fmt: skip
        if report.ok:
            store.remove(record.name)
            report = replace(report, record_removed=True)
        return report


def _answered(answers: Iterable[Answer], node: int) -> bool:
    """A node that said BYE stopped, even when its pid is unknown."""
    return any(a.node == node and a.said_bye for a in answers)


def find_record(store: PoolStore, name: str) -> PoolRecord:
    """The recorded pool named ``name``, or whose pool id is ``name``; ``AttachError``
    listing the recorded pools when none is."""
    try:
        return store.record(name)
    except AttachError:
        for other in store.names():
            try:
                record = store.record(other)
            except AttachError:
                continue
            if record.pool_id == name:
                return record
        raise


def recorded(store: PoolStore, name: str) -> bool:
    """Whether ``name`` is a recorded pool's name or pool id."""
    try:
        find_record(store, name)
    except AttachError:
        return False
    return True


def attached_client(store: PoolStore, record: PoolRecord) -> int | None:
    """The pid of the client attached to the pool now, if one is (it loses its pool)."""
    status = store.status(record.name)
    if status is None or status.client_pid is None or not client_alive(status):
        return None
    return status.client_pid


def stop_pool(name: str, *, store: PoolStore | None = None, stopper: Stopper | None = None) -> StopReport:
    """Stop the recorded pool ``name`` (or pool id) from any process of this user: tell its
    agents to stop, make sure its processes (Local) or resources (a cloud) are gone, and
    forget it. ``report.ok`` is false, and ``report.left`` names what, when something is
    left; the record then stays so it can be tried again."""
    return (stopper or Stopper()).stop(store or PoolStore(), name)
