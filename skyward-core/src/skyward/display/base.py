"""The protocol every console display follows."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from rich.console import Console

from skyward.events import SkywardEvent


def library_console() -> Console:
    """Where the library's own output goes unless a display is given a console: stderr,
    so it never mixes with what the user's program prints on stdout (``python app.py >
    out.txt`` gets only the program's output)."""
    return Console(stderr=True)


@runtime_checkable
class Display(Protocol):
    """A console display: an event callback with an end.

    The pool creates it (``create_display``), subscribes it to its ``EventBus`` (it is a
    ``Callback`` returning ``None``) and calls ``close()`` once, when the pool has
    stopped (after ``CostFinal``), also when the pool fails. A display starts drawing
    on its first event; ``close()`` restores the terminal and is idempotent. Events
    after ``close()`` print plainly, if at all. Calls may come from any thread.
    """

    def __call__(self, event: SkywardEvent) -> None: ...

    def close(self) -> None: ...


class DisplayBase:
    """Context-manager support shared by the built-in displays."""

    def close(self) -> None:
        """Stop drawing; idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
