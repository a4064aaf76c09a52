"""The "quiet" display: prints nothing.

Errors still reach the program: as the exceptions the pool raises, and as ``Error``
events for an ``on_event`` callback. A display that printed them too would write on a
console the user asked to keep silent.
"""

from __future__ import annotations

from rich.console import Console

from skyward.display.base import DisplayBase
from skyward.events import SkywardEvent


class QuietDisplay(DisplayBase):
    """Prints nothing. ``console`` is accepted, and unused, so every display is made alike."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console

    def __call__(self, event: SkywardEvent) -> None:
        return None
