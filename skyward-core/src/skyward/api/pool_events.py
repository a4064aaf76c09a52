"""How a pool's events reach its subscribers: the display, ``on_event``, the
``use_callback`` callbacks captured at construction and the ``pool.on`` handlers.

Once the pool opens, events go through a thread of their own (``EventPump``): the pool
emits from its I/O thread, its timers and provider calls, and a slow user callback must
stall none of them. Before that (an event emitted before ``open``) they are delivered on
the caller's thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import cast

from skyward.callbacks import Callback, EventBus
from skyward.display import Display, create_display
from skyward.events import SkywardEvent


class EventPump:
    """Delivers events on a thread of their own: a slow user callback never stalls I/O."""

    def __init__(self, deliver: Callable[[SkywardEvent], None]) -> None:
        self._deliver = deliver
        self._queue: queue.SimpleQueue[SkywardEvent | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="skyward-events", daemon=True)
        self.thread.start()

    def put(self, event: SkywardEvent) -> None:
        self._queue.put(event)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self._deliver(event)

    def close(self) -> None:
        """Deliver what is queued, then stop (waits at most 10 s for a stuck callback)."""
        self._queue.put(None)
        self.thread.join(timeout=10)


class PoolEvents:
    """A pool's event bus and display, and the pump that serves them once it opens."""

    def __init__(self, display: str, on_event: Callable[[SkywardEvent], object] | None) -> None:
        self._display: Display = create_display(display)
        # a callback's return value is read only when it is an event (skyward.callbacks),
        # so any callable taking an event is a Callback
        self.bus = EventBus(on_event=cast(Callback | None, on_event), display=self._display)
        self._pump: EventPump | None = None

    def emit(self, event: SkywardEvent) -> None:
        if self._pump is not None:
            self._pump.put(event)
        else:
            self.bus.emit(event)

    def start(self) -> None:
        """From now on, deliver on the event thread."""
        self._pump = EventPump(self.bus.emit)

    def on_event_thread(self) -> bool:
        """Whether the caller is the event thread (a callback that closes the pool must
        not wait for the teardown, which ends by joining this very thread)."""
        return self._pump is not None and threading.current_thread() is self._pump.thread

    def finish(self) -> None:
        """Deliver what is queued, then close the display; once, when the pool stopped."""
        if self._pump is not None:
            self._pump.close()
        self._display.close()
