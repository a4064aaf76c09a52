"""Console displays of a pool's events: "log", "spinner" and "quiet".

``create_display(mode)`` returns a ``Display``: an event callback the pool subscribes
to its ``EventBus``, with a ``close()`` the pool calls once when it has stopped.
"""

from __future__ import annotations

from rich.console import Console

from skyward.display.base import Display, DisplayBase
from skyward.display.log import LogDisplay
from skyward.display.quiet import QuietDisplay
from skyward.display.render import render
from skyward.display.spinner import SpinnerDisplay
from skyward.display.state import DisplayState, NodeView, reduce
from skyward.errors import ConfigurationError

DISPLAY_MODES: tuple[str, ...] = ("log", "spinner", "quiet")
"""The values ``ComputePool(display=...)`` accepts."""


def create_display(mode: str, console: Console | None = None, *, metrics_interval: float = 30.0) -> Display:
    """The display for ``mode``, printing on ``console``.

    Without a console, "log" and "spinner" print on stderr (``base.library_console``),
    and "quiet" prints nothing.
    ``metrics_interval`` is the least time in seconds between two ``Metrics`` lines of
    one node in "log" mode (and in "spinner" mode when it falls back to lines).
    """
    if mode == "log":
        return LogDisplay(console, metrics_interval=metrics_interval)
    if mode == "spinner":
        return SpinnerDisplay(console, metrics_interval=metrics_interval)
    if mode == "quiet":
        return QuietDisplay(console)
    modes = ", ".join(repr(m) for m in DISPLAY_MODES)
    raise ConfigurationError(f"unknown display mode {mode!r}: expected one of {modes}")


__all__ = [
    "DISPLAY_MODES",
    "Display",
    "DisplayBase",
    "DisplayState",
    "LogDisplay",
    "NodeView",
    "QuietDisplay",
    "SpinnerDisplay",
    "create_display",
    "reduce",
    "render",
]
