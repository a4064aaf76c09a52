"""What the cloud template says when a node does not start, and the run directories it
removes from this machine afterwards (pure, or touching only this machine's files).

A node that stops, vanishes or never runs leaves the user with a state word unless the
error carries what the node printed: :func:`console_tail` shapes a driver's
:class:`~skyward.providers.ConsoleOutput` into the last lines of the error.
:func:`addressless_message` is the one diagnosis a timeout must not hide: an instance the
API calls running but whose describe answer carries no address is a driver's bug, which
a longer ``provision_timeout`` never fixes.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

CONSOLE_TAIL_LINES = 25
"""Lines of a node's console output an error carries: a failed bootstrap's cause (its
``skyward bootstrap: ...`` line and the traceback before it) fits in the last 25 of the
scripts' output, and more would bury the error's own first line."""

CONSOLE_TAIL_CHARS = 4000
"""At most this many characters of it (a single runaway line can be megabytes)."""


def console_tail(instance_id: str, output: str) -> str:
    """The last lines of ``output`` as a paragraph to append to an error; ``""`` when
    there is nothing."""
    lines = [line.rstrip() for line in output.strip().splitlines()]
    if not lines:
        return ""
    tail = "\n".join(lines[-CONSOLE_TAIL_LINES:])[-CONSOLE_TAIL_CHARS:]
    return f"\n--- the last console output of {instance_id} ---\n{tail}"


def addressless_message(what: str, running_word: str, driver: str) -> str:
    """Why a running instance never became a node, when its describe answer had no ip."""
    return (
        f"{what} is {running_word}, but {driver}.describe reports no address for it (Instance.ip is empty), "
        "so the pool cannot reach its agent: a running instance's describe answer must carry the address the "
        "client connects to (a longer provision_timeout does not help)"
    )


def remove_local_run_dirs(paths: Iterable[str], pool_id: str) -> list[str]:
    """Remove the run directories handed to this pool's nodes that exist on this machine;
    returns what could not be removed, in words.

    On a cloud VM the run directory dies with the machine and none of these paths exists
    here. Nodes that are processes on this machine (a host-process or on-premises
    provider) leave theirs behind when the host outlives them: the agent made it, and
    nobody else removes it. Only a real directory (not a link) of this user whose name
    carries the pool id is removed, so a driver's shared or foreign path is never touched.
    """
    problems = []
    for raw in sorted(set(paths)):
        path = Path(raw)
        if pool_id not in path.name:
            continue
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        try:
            shutil.rmtree(path)
        except OSError as error:
            problems.append(f"run directory {path}: {error}")
    return problems
