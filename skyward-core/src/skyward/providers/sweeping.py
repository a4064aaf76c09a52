"""Providers whose stopped nodes still bill, and whether the scheduled sweep is installed.

A cloud node ends itself when its agent exits (client gone past the grace period, or a
kept pool's keep-alive over) and at its TTL. On AWS that deletes it
(``InstanceInitiatedShutdownBehavior=terminate``); on DigitalOcean, Verda, VastAI and
RunPod a node can only power off or stop (deleting takes the account's credentials,
which never reach a node), and the stopped machine keeps billing until something holding
the credentials deletes it: the next pool start on that provider, ``skyward down
--expired``, or the schedule ``skyward sweep --install`` sets up to run it. A provider
says so by declaring :class:`StoppedNodesBill` (on its config class).

:func:`sweep_installed` is read when a kept pool opens, so it reads one small marker file
(:data:`SWEEP_MARKER`, written by ``skyward sweep --install``) and never runs ``crontab``
or ``systemctl``. :func:`sweep_advice` is the pure rule for what the pool then says.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from skyward.home import skyward_home

SWEEP_MARKER = "sweep.json"
"""The file under the skyward home that ``skyward sweep --install`` writes and
``--uninstall`` removes: how the schedule was installed, what it runs, how often."""

SWEEP_LOG = "sweep.log"
"""The file under the skyward home the scheduled run appends one JSON line to per run."""

DEFAULT_SWEEP_MINUTES = 15
"""How often the installed sweep runs by default: a forgotten stopped node bills at most
this long after it stopped (a powered-off 8-GPU droplet at about 24 USD an hour: 6 USD)."""

SWEEP_METHODS = ("timer", "cron")
"""How the schedule can be installed: a systemd user timer, or a user crontab entry."""


@runtime_checkable
class StoppedNodesBill(Protocol):
    """A provider (its config class) whose node, once its client is gone, stops but keeps
    billing until it is deleted. ``stopped_node_note`` says what bills, in a few words:
    "a powered-off droplet bills at its full rate" (a class attribute does)."""

    @property
    def stopped_node_note(self) -> str:
        """What bills once a node stopped, in a few words, read into the pool's advice."""
        ...


@dataclass(frozen=True, slots=True)
class SweepMarker:
    """What ``skyward sweep --install`` installed.

    method:        ``"timer"`` (systemd user timer) or ``"cron"`` (user crontab entry).
    every_minutes: how often the schedule runs ``skyward down --expired``.
    command:       the command line it runs (absolute paths: cron's PATH is bare).
    installed_at:  Unix time of the install.
    files:         the unit files written (the timer method), to remove on uninstall.
    """

    method: str
    every_minutes: int
    command: tuple[str, ...]
    installed_at: float
    files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in SWEEP_METHODS:
            raise ValueError(f"SweepMarker(method={self.method!r}) must be one of {', '.join(SWEEP_METHODS)}")
        if self.every_minutes <= 0:
            raise ValueError(f"SweepMarker(every_minutes={self.every_minutes!r}) must be a positive number of minutes")

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "command": list(self.command), "files": list(self.files)}

    @staticmethod
    def from_json(value: object) -> SweepMarker | None:
        """The marker ``value`` holds, or None when it is not one (a damaged file)."""
        if not isinstance(value, dict):
            return None
        try:
            return SweepMarker(
                method=str(value["method"]),
                every_minutes=int(value["every_minutes"]),
                command=tuple(str(part) for part in value["command"]),
                installed_at=float(value["installed_at"]),
                files=tuple(str(f) for f in value.get("files", ())),
            )
        except (KeyError, TypeError, ValueError):
            return None


def marker_path(home: Path | None = None) -> Path:
    return (home if home is not None else skyward_home()) / SWEEP_MARKER


def read_marker(home: Path | None = None) -> SweepMarker | None:
    """The installed sweep's marker, or None (not installed, or the file is damaged)."""
    try:
        return SweepMarker.from_json(json.loads(marker_path(home).read_text()))
    except (OSError, ValueError):
        return None


def sweep_installed(home: Path | None = None) -> bool:
    """Whether ``skyward sweep --install`` has installed the schedule (from its marker file
    alone: cheap enough for every pool start)."""
    return read_marker(home) is not None


def sweep_advice(provider_name: str, provider: object, installed: bool) -> str | None:
    """What a pool says when a *kept* pool opens on ``provider`` (its config, or anything
    that declares :class:`StoppedNodesBill`): None when its stopped nodes do not bill or the
    sweep is installed; else why a forgotten node would bill and the one command that
    bounds it (pure)."""
    if installed or not isinstance(provider, StoppedNodesBill):
        return None
    return (
        f"{provider_name}: a node whose client is gone stops, and {provider.stopped_node_note} until deleted; "
        "a kept pool's nodes outlive "
        f"this client: only the next pool start on {provider_name} or `skyward down --expired` deletes a stopped "
        f"node; run `skyward sweep --install` so a forgotten node is deleted within {DEFAULT_SWEEP_MINUTES} min "
        "of stopping (at the latest of its expiry)"
    )
