"""The "spinner" display: a live view of the pool, redrawn in place.

Events are reduced into an immutable ``DisplayState`` (``state.reduce``); rich's
``Live`` redraws ``render(state)`` a few times a second from its own thread, so an
event costs one reduction, never a redraw. Remote output, errors and notices are
printed above the live view, where they stay. On a console that is not a terminal
(a CI log, a file) nothing can be redrawn, so the display degrades to ``LogDisplay``'s
plain lines.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from skyward.display.base import DisplayBase, library_console
from skyward.display.log import LogDisplay
from skyward.display.render import render
from skyward.display.state import DisplayState, reduce
from skyward.events import (
    CandidateFailed,
    CostFinal,
    Error,
    InstanceInterrupted,
    LogLine,
    NodeRemoved,
    Notice,
    PoolResized,
    SkywardEvent,
)

_FRAMES_PER_SECOND = 10


class SpinnerDisplay(DisplayBase):
    """Live view of phase, nodes, tasks, metrics and cost; see the module docstring.

    Drawing starts with the first event (or ``start()``) and ends with ``close()``,
    which leaves the last view on screen.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        refresh_per_second: float = 8.0,
        metrics_interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console if console is not None else library_console()
        self._clock = clock
        self._refresh_per_second = refresh_per_second
        self._fallback: LogDisplay | None = None
        if not self.console.is_terminal:
            self._fallback = LogDisplay(self.console, metrics_interval=metrics_interval, clock=clock)
        self._state = DisplayState()
        self._live: Live | None = None
        self._started_at: float | None = None
        self._closed_at: float | None = None
        self._lock = threading.RLock()

    @property
    def state(self) -> DisplayState:
        return self._state

    @property
    def is_live(self) -> bool:
        """Whether the view is being redrawn in place right now."""
        return self._live is not None

    def start(self) -> None:
        """Start drawing (idempotent); a closed display stays closed."""
        with self._lock:
            if self._fallback is not None or self._live is not None:
                return
            if self._closed_at is not None:
                return
            if self._started_at is None:
                self._started_at = self._clock()
            self._live = Live(
                console=self.console,
                get_renderable=self.renderable,
                refresh_per_second=self._refresh_per_second,
                transient=False,
            )
            self._live.start()

    def renderable(self) -> RenderableType:
        """The view now; what the live display redraws."""
        state = self._state  # one read: the state is swapped, never mutated
        now = self._clock() if self._closed_at is None else self._closed_at
        elapsed = None if self._started_at is None else now - self._started_at
        if state.final is not None:
            elapsed = state.final.total_seconds
        return render(state, frame=int(now * _FRAMES_PER_SECOND), elapsed=elapsed)

    def __call__(self, event: SkywardEvent) -> None:
        with self._lock:
            self._state = reduce(self._state, event)
            if self._fallback is not None:
                self._fallback(event)
                return
            if self._closed_at is None:
                self.start()
            else:
                if isinstance(event, Error):
                    self._print(Text(f"error: {event.message}", style="red"))
                return
            match event:
                case LogLine(node=node, line=line):
                    self._print(Text(f"[node {node}] {line.rstrip()}"))
                case Error(message=message):
                    self._print(Text(f"error: {message}", style="red"))
                case Notice(message=message):
                    self._print(Text(f"note: {message}", style="yellow"))
                case CandidateFailed(candidate=index, provider=provider, reason=reason, message=message):
                    text = f"candidate {index + 1} ({provider}) failed, {reason}: {message}"
                    self._print(Text(text, style="yellow"))
                case InstanceInterrupted(node=node, reason=reason):
                    text = f"node {node}: spot instance interrupted ({reason})"
                    self._print(Text(text, style="red"))
                case NodeRemoved(node=node, reason=reason) if reason in ("lost", "reclaimed"):
                    self._print(Text(f"node {node} {reason}: replacing it where the pool can", style="red"))
                case PoolResized(desired=desired, current=current, reason=reason):
                    self._print(Text(f"pool resized ({reason}): {current} -> {desired} nodes", style="cyan"))
                case CostFinal():
                    self._refresh()
                case _:
                    pass

    def close(self) -> None:
        with self._lock:
            if self._fallback is not None:
                self._fallback.close()
            if self._closed_at is not None:
                return
            self._closed_at = self._clock()
            live, self._live = self._live, None
            if live is not None:
                live.stop()  # draws the final view once more and leaves it on screen

    def _print(self, text: Text) -> None:
        # While Live is running, console.print goes above the live region.
        self.console.print(text, soft_wrap=True, highlight=False)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()


__all__ = ["SpinnerDisplay"]
