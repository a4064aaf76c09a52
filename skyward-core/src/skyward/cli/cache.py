"""What pools leave on this machine under ``$SKYWARD_HOME`` (default ``~/.skyward``): the
environments Local pools built (``envs/``) and the wheels of a checkout that cloud pools
send to their nodes (``wheels/``, one per package and source digest: every edit of the
checkout makes new ones, so they add up until cleared).

Each environment is a directory named ``<image hash>-<skyward hash>`` beside a lock file
``<name>.lock`` that every bootstrap using it opens (truncating it), so the lock file's
modification time is the environment's last use. An environment whose interpreter a
running process uses is never removed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from skyward.bootstrap import ENV_COMPLETE
from skyward.home import DEFAULT_HOME, skyward_home

__all__ = [
    "DEFAULT_HOME",
    "CachedEnvironment",
    "cached",
    "environments",
    "in_use",
    "remove",
    "running_executables",
    "skyward_home",
    "wheels",
]


@dataclass(frozen=True, slots=True)
class CachedEnvironment:
    name: str
    path: Path
    size: int  # bytes on disk
    last_used: float  # Unix time
    complete: bool  # built to the end (an incomplete one is rebuilt on next use)
    kind: str = "environment"  # or "wheel": a checkout package's wheel (skyward.wheels)


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def environments(home: Path) -> list[CachedEnvironment]:
    """The cached environments, most recently used first."""
    envs = home / "envs"
    if not envs.is_dir():
        return []
    found = []
    for entry in envs.iterdir():
        if not entry.is_dir() or entry.is_symlink():
            continue
        lock = entry.with_name(entry.name + ".lock")
        used = (lock if lock.exists() else entry).stat().st_mtime
        found.append(CachedEnvironment(entry.name, entry, _size(entry), used, (entry / ENV_COMPLETE).exists()))
    return sorted(found, key=lambda e: e.last_used, reverse=True)


WHEEL_RECORD = "wheel.json"  # written last by skyward.wheels.cache: the entry is complete


def wheels(home: Path) -> list[CachedEnvironment]:
    """The cached wheels, most recently built first. A wheel is never "in use": a pool
    that needs a removed one builds it again."""
    root = home / "wheels"
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        if not entry.is_dir() or entry.is_symlink() or entry.name.startswith("."):
            continue
        record = entry / WHEEL_RECORD
        used = (record if record.exists() else entry).stat().st_mtime
        found.append(CachedEnvironment(entry.name, entry, _size(entry), used, record.exists(), kind="wheel"))
    return sorted(found, key=lambda e: e.last_used, reverse=True)


def cached(home: Path) -> list[CachedEnvironment]:
    """Everything ``skyward cache`` lists: environments first, then wheels."""
    return [*environments(home), *wheels(home)]


def in_use(env: CachedEnvironment, running: Iterable[str]) -> bool:
    """Whether any of the ``running`` executables lives in this environment (pure)."""
    root = str(env.path) + os.sep
    return any(exe.startswith(root) for exe in running)


def running_executables() -> list[str]:
    """The executables (and interpreters named first on a command line) of this user's processes."""
    found: list[str] = []
    for process in psutil.process_iter(["exe", "cmdline"]):
        info = process.info
        if info.get("exe"):
            found.append(str(info["exe"]))
        cmdline = info.get("cmdline") or []
        if cmdline:
            found.append(str(cmdline[0]))
    return found


def remove(env: CachedEnvironment) -> None:
    shutil.rmtree(env.path)
    env.path.with_name(env.name + ".lock").unlink(missing_ok=True)
