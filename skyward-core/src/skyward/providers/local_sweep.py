"""Removes the run directories of Local pools whose client is gone.

A Local pool keeps its sockets, node scripts (a tcp pool's hold its server secret) and
logs in a private directory under the temporary directory, and removes it when it
closes. A client that was killed, or whose machine lost power, never gets to: so every
Local pool start sweeps the directories whose owner process no longer exists.

The owner is recorded in the directory (``owner.json``: pid and process start time, so a
recycled pid does not pass for the owner). A directory without one (written by an older
skyward) is swept once it has not changed for ``UNOWNED_AGE_S``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

RUN_DIR_PREFIX = "skyward-sky-"
"""``skyward-<pool id>-<random>``; pool ids start with ``sky-``."""

OWNER_FILE = "owner.json"
KEEPERS_FILE = "keepers.json"
"""A kept pool's node processes, one ``{"pid", "started"}`` per node: its run directory
stays while any of them runs, though the client that made it is gone."""

UNOWNED_AGE_S = 24 * 3600.0
"""An unowned run directory untouched for a day belongs to no running pool: pools with
a longer timeout write an owner file."""

START_TIME_TOLERANCE_S = 1.0
"""psutil derives a start time from boot time and clock ticks: the same process reads
the same within milliseconds; a recycled pid starts seconds or more later."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The client process that made a run directory."""

    pid: int
    started: float  # psutil create_time(), epoch seconds


@dataclass(frozen=True, slots=True)
class RunDir:
    """What the sweep knows of one candidate directory."""

    path: Path
    owner: Owner | None
    modified: float  # epoch seconds
    keepers: tuple[Owner, ...] = ()  # a kept pool's node processes


def current_owner() -> Owner:
    return Owner(os.getpid(), psutil.Process().create_time())


def write_owner(run_dir: Path, owner: Owner) -> None:
    (run_dir / OWNER_FILE).write_text(json.dumps({"pid": owner.pid, "started": owner.started}))


def read_owner(run_dir: Path) -> Owner | None:
    try:
        data = json.loads((run_dir / OWNER_FILE).read_text())
        return Owner(int(data["pid"]), float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def add_keeper(run_dir: Path, keeper: Owner) -> None:
    """Record one more node process of a kept pool (the directory stays while it runs)."""
    keepers = [*read_keepers(run_dir), keeper]
    path = run_dir / KEEPERS_FILE
    temporary = path.with_name("." + path.name)
    temporary.write_text(json.dumps([{"pid": k.pid, "started": k.started} for k in keepers]))
    temporary.replace(path)


def read_keepers(run_dir: Path) -> tuple[Owner, ...]:
    try:
        data = json.loads((run_dir / KEEPERS_FILE).read_text())
        return tuple(Owner(int(k["pid"]), float(k["started"])) for k in data)
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def process_alive(pid: int, started: float | None) -> bool:
    """Whether ``pid`` runs and is the process that started at ``started`` (Unix time;
    None: any), so a recycled pid does not pass. A zombie has exited: its parent (init,
    for a kept pool's orphaned node) has only not reaped it yet."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True  # it exists; not ours to judge
    return started is None or abs(created - started) < START_TIME_TOLERANCE_S


def started_at(pid: int) -> float | None:
    """When process ``pid`` started (Unix time), or None when it is gone."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def owner_alive(owner: Owner) -> bool:
    return process_alive(owner.pid, owner.started)


def is_stale(run: RunDir, alive: Callable[[Owner], bool], now: float) -> bool:
    """Whether ``run`` belongs to no running client (pure: the caller supplies the checks)."""
    if any(alive(keeper) for keeper in run.keepers):
        return False  # a kept pool's node still runs: its sockets are here
    if run.owner is None:
        return now - run.modified > UNOWNED_AGE_S
    return not alive(run.owner)


def candidates(directory: Path, uid: int) -> Iterable[RunDir]:
    """This user's Local run directories under ``directory`` (never a symlink)."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(RUN_DIR_PREFIX):
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not entry.is_dir() or entry.is_symlink() or info.st_uid != uid:
            continue
        yield RunDir(entry, read_owner(entry), info.st_mtime, read_keepers(entry))


def sweep(
    directory: Path,
    *,
    alive: Callable[[Owner], bool] = owner_alive,
    now: float | None = None,
    uid: int | None = None,
) -> list[Path]:
    """Remove the stale run directories under ``directory``; returns what was removed."""
    moment = time.time() if now is None else now
    removed = []
    for run in candidates(directory, os.getuid() if uid is None else uid):
        if is_stale(run, alive, moment):
            shutil.rmtree(run.path, ignore_errors=True)
            removed.append(run.path)
    return removed


def swept_pool_ids(removed: Iterable[Path]) -> list[str]:
    """The pool ids of removed run directories (``skyward-<pool id>-<mkdtemp's random
    suffix>``, which holds no ``-``), whose shared-memory segments go with them (pure)."""
    ids = []
    for path in removed:
        stem, _, suffix = path.name.rpartition("-")
        if suffix and stem.startswith(RUN_DIR_PREFIX):
            ids.append(stem.removeprefix("skyward-"))
    return ids
