"""Callbacks: how events reach user code and the console display.

A ``Callback`` takes an event and returns ``None`` or an event. Its return value means:

* ``None``, the same event object, or anything that is not a Skyward event: nothing
  (so ``lambda e: print(e)`` and pass-through callbacks are fine);
* another event: a *derived event*, delivered in turn to every subscriber of the same
  emitter (this callback included), after the event that produced it has reached all
  of them. A callback can so turn, say, a ``Metrics`` over a threshold into a
  ``Notice`` that the display shows. Derived events chain at most ``MAX_DEPTH`` levels
  deep and at most ``MAX_DERIVED`` per emitted event; what goes past is dropped and
  reported once per callback, so two callbacks answering each other cannot loop.

An exception raised by a callback is caught: it is logged once per callback through
structlog (logger ``"skyward"``) and, on a pool, shown by the display as an ``Error``
event; later failures of the same callback are counted, not reported. It never stops
the other callbacks, nor the pool. ``BaseException`` (``KeyboardInterrupt``) is not
caught.

Callbacks reach events three ways:

* ``use_callback(cb)``: for the current context (a ``contextvars`` context, so a thread
  or an asyncio task that did not inherit it does not see ``cb``); ``emit(event)`` sends
  to these, on the emitting thread.
* ``ComputePool(on_event=cb)`` and ``pool.on(EventType, handler)``: through the pool's
  ``EventBus``.
* The pool's display is one more subscriber of its ``EventBus``.
"""

from __future__ import annotations

import sys
import threading
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeAlias, TypeVar, Union, cast, get_args, get_origin, overload

import structlog

from skyward.errors import ConfigurationError
from skyward.events import Error, SkywardEvent, is_event

Callback: TypeAlias = Callable[[SkywardEvent], SkywardEvent | None]
"""An event handler; see the module docstring for what its return value means."""

MAX_DEPTH = 8
"""Longest chain of derived events delivered from one emitted event."""

MAX_DERIVED = 256
"""Most derived events delivered from one emitted event (a fan-out bound, as depth
alone allows ``subscribers ** MAX_DEPTH``)."""

E = TypeVar("E")


# On stderr, whatever the display: a user's failing callback is reported even with
# display="quiet", and never on the program's stdout (structlog's default).
class _Stderr:
    """A structlog logger printing on whatever ``sys.stderr`` is at the time of the call
    (``structlog.PrintLogger`` keeps the stream it was made with)."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    debug = info = warning = error = critical = exception = msg


_log = structlog.wrap_logger(_Stderr())


# --- subscribers ----------------------------------------------------------------------


class _Subscriber:
    """One registration of a callback, with its own "already reported" flags."""

    __slots__ = ("callback", "failures", "is_display", "name", "overflowed", "types")

    def __init__(
        self,
        callback: Callable[[Any], object],
        types: tuple[type, ...] | None = None,
        *,
        is_display: bool = False,
    ) -> None:
        self.callback = callback
        self.types = types
        self.is_display = is_display
        self.name = _callback_name(callback)
        self.failures = 0
        self.overflowed = False

    def accepts(self, event: object) -> bool:
        return self.types is None or isinstance(event, self.types)


def _callback_name(callback: object) -> str:
    name = getattr(callback, "__qualname__", None) or getattr(callback, "__name__", None)
    return str(name) if name else repr(callback)


# --- compose --------------------------------------------------------------------------


class _Composed:
    """Callbacks merged by ``compose``, kept flat so an emitter can call them one by one."""

    __slots__ = ("callbacks",)

    def __init__(self, callbacks: tuple[Callback, ...]) -> None:
        self.callbacks = callbacks

    def __call__(self, event: SkywardEvent) -> SkywardEvent | None:
        derived: SkywardEvent | None = None
        for callback in self.callbacks:
            result = callback(event)
            if derived is None and result is not event and is_event(result):
                derived = result
        return derived

    def __repr__(self) -> str:
        return f"compose({', '.join(_callback_name(c) for c in self.callbacks)})"


def _flatten(callbacks: Iterable[Callback | None]) -> Iterator[Callback]:
    for callback in callbacks:
        if callback is None:
            continue
        if isinstance(callback, _Composed):
            yield from callback.callbacks
        else:
            yield callback


def compose(*callbacks: Callback | None) -> Callback:
    """Merge callbacks into one that calls each, in the order given.

    ``None`` arguments are skipped, so ``compose(on_event, display)`` needs no check.
    Registered with Skyward (``on_event``, ``use_callback``, ``pool.on``), the merged
    callback is taken apart again: each member's derived event is delivered and a
    member that raises does not stop the next. Called directly, it calls each member,
    lets an exception through, and returns the first derived event a member returned
    (a ``Callback`` returns one event at most).
    """
    flat = tuple(_flatten(callbacks))
    if len(flat) == 1:
        return flat[0]
    return _Composed(flat)


# --- delivery -------------------------------------------------------------------------

# Depth of the event being delivered on this thread/task, and the subscriber running:
# an emit() made from inside a callback counts as one level deeper, like a derived event.
_depth: ContextVar[int] = ContextVar("skyward_event_depth", default=0)
_running: ContextVar[_Subscriber | None] = ContextVar("skyward_event_subscriber", default=None)

_Reporter: TypeAlias = Callable[[_Subscriber, str], None]


def _dispatch(
    subscribers: Sequence[_Subscriber],
    event: SkywardEvent,
    on_failure: Callable[[_Subscriber, SkywardEvent, Exception], None],
    on_overflow: _Reporter,
) -> None:
    # Breadth first: an event reaches every subscriber before the events derived from it.
    queue: deque[tuple[SkywardEvent, int, _Subscriber | None]] = deque([(event, _depth.get(), _running.get())])
    derived = 0
    while queue:
        current, depth, origin = queue.popleft()
        if depth > MAX_DEPTH:
            if origin is not None:
                on_overflow(origin, f"derived events nested more than {MAX_DEPTH} deep")
            continue
        for subscriber in subscribers:
            if not subscriber.accepts(current):
                continue
            result, failure = _call(subscriber, current, depth + 1)
            if failure is not None:
                on_failure(subscriber, current, failure)
            elif result is not current and is_event(result):
                if derived >= MAX_DERIVED:
                    on_overflow(
                        subscriber,
                        f"more than {MAX_DERIVED} derived events from one event",
                    )
                    continue
                derived += 1
                queue.append((result, depth + 1, subscriber))


def _call(subscriber: _Subscriber, event: SkywardEvent, depth: int) -> tuple[object, Exception | None]:
    depth_token = _depth.set(depth)
    running_token = _running.set(subscriber)
    try:
        return subscriber.callback(event), None
    # Any Exception: a user's bug must not break the pool or the other callbacks.
    except Exception as exc:
        return None, exc
    finally:
        _running.reset(running_token)
        _depth.reset(depth_token)


def _log_failure(subscriber: _Subscriber, event: SkywardEvent, exc: Exception) -> str | None:
    """Log a callback's failure the first time; return the message, None if repeated."""
    subscriber.failures += 1
    if subscriber.failures > 1:
        return None
    message = (
        f"event callback {subscriber.name} raised {type(exc).__name__}: {exc} "
        f"(handling {type(event).__name__}); its further errors are not reported"
    )
    _log.error(
        "event callback failed",
        callback=subscriber.name,
        event_type=type(event).__name__,
        exc_info=exc,
    )
    return message


def _log_overflow(subscriber: _Subscriber, why: str) -> str | None:
    if subscriber.overflowed:
        return None
    subscriber.overflowed = True
    message = f"events derived by callback {subscriber.name} dropped: {why}"
    _log.warning("derived events dropped", callback=subscriber.name, reason=why)
    return message


def _context_failure(subscriber: _Subscriber, event: SkywardEvent, exc: Exception) -> None:
    _log_failure(subscriber, event, exc)


def _context_overflow(subscriber: _Subscriber, why: str) -> None:
    _log_overflow(subscriber, why)


# --- context callbacks ----------------------------------------------------------------

_active: ContextVar[tuple[_Subscriber, ...]] = ContextVar("skyward_callbacks", default=())


@contextmanager
def use_callback(callback: Callback) -> Iterator[Callback]:
    """Send the events emitted in this context to ``callback`` while the block runs.

    Uses ``contextvars``: nested blocks stack (the outer callback keeps receiving), an
    asyncio task created inside the block inherits it, and a thread started inside it
    does not (Python threads start with an empty context; use
    ``contextvars.copy_context().run`` to carry it over). A pool constructed inside the
    block captures it, and delivers its events there from its own threads.
    """
    token = _active.set(_active.get() + tuple(_Subscriber(c) for c in _flatten([callback])))
    try:
        yield callback
    finally:
        _active.reset(token)


def active_callbacks() -> tuple[Callback, ...]:
    """The callbacks ``use_callback`` made active in the current context, outermost first."""
    return tuple(cast(Callback, s.callback) for s in _active.get())


def emit(event: SkywardEvent) -> None:
    """Send ``event`` to the callbacks active in the current context (``use_callback``),
    on this thread, in the order they were entered. Without any, it does nothing."""
    subscribers = _active.get()
    if subscribers:
        _dispatch(subscribers, event, _context_failure, _context_overflow)


# --- the pool's bus -------------------------------------------------------------------


def _event_types(spec: object) -> tuple[type, ...]:
    if isinstance(spec, type):
        return (spec,)
    if isinstance(spec, tuple):
        return tuple(t for item in spec for t in _event_types(item))
    if get_origin(spec) in (Union, types.UnionType):
        return tuple(t for item in get_args(spec) for t in _event_types(item))
    raise ConfigurationError(f"expected an event class, a tuple of them or a union of them, got {spec!r}")


class EventBus:
    """Delivers a pool's events to its subscribers, from any of the pool's threads.

    Subscribers, in delivery order: the display, ``on_event``, the ``use_callback``
    callbacks captured when the bus was made (outermost first), then the handlers added
    with ``on`` in the order they were added. The pool makes its bus in its constructor,
    so ``with use_callback(cb): pool = ComputePool(...)`` sends the pool's events to
    ``cb`` even though the pool emits from threads that never saw that context; pass
    ``context`` to choose the captured callbacks instead.

    ``emit`` is thread-safe and delivers synchronously, one event at a time: callbacks
    never run concurrently with each other (no locking needed in them), events from one
    thread arrive in the order that thread emitted them, and a slow callback slows the
    emitting thread, so callbacks should be quick and must not wait for the pool. An
    ``emit`` from inside a callback is delivered at once, one level deeper.
    """

    def __init__(
        self,
        on_event: Callback | None = None,
        display: Callback | None = None,
        *,
        context: Sequence[Callback] | None = None,
    ) -> None:
        self._lock = threading.RLock()
        fixed: list[_Subscriber] = []
        if display is not None:
            fixed.append(_Subscriber(display, is_display=True))
        fixed.extend(_Subscriber(c) for c in _flatten([on_event]))
        if context is None:
            fixed.extend(_active.get())  # the same records: "reported once" holds across
        else:
            fixed.extend(_Subscriber(c) for c in _flatten(context))
        self._fixed = tuple(fixed)
        self._display = fixed[0] if display is not None else None
        self._handlers: tuple[_Subscriber, ...] = ()

    @overload
    def on(self, event_type: type[E], handler: Callable[[E], object]) -> Callable[[], None]: ...

    @overload
    def on(
        self,
        event_type: tuple[type, ...] | types.UnionType | object,
        handler: Callable[[Any], object],
    ) -> Callable[[], None]: ...

    def on(self, event_type: object, handler: Callable[[Any], object]) -> Callable[[], None]:
        """Call ``handler`` for every event that is an instance of ``event_type`` (a class,
        a tuple of classes, or a union such as ``Metrics | LogLine``).

        Returns a function that removes the handler again.
        """
        if not callable(handler):
            raise ConfigurationError(f"event handler must be callable, got {handler!r}")
        added = tuple(_Subscriber(c, _event_types(event_type)) for c in _flatten([cast(Callback, handler)]))
        with self._lock:
            self._handlers = (*self._handlers, *added)

        def remove() -> None:
            with self._lock:
                self._handlers = tuple(h for h in self._handlers if h not in added)

        return remove

    def emit(self, event: SkywardEvent) -> None:
        """Deliver ``event`` to every subscriber; returns once all have run."""
        with self._lock:
            _dispatch((*self._fixed, *self._handlers), event, self._failed, self._overflowed)

    def _failed(self, subscriber: _Subscriber, event: SkywardEvent, exc: Exception) -> None:
        message = _log_failure(subscriber, event, exc)
        if message is not None and not subscriber.is_display:
            self._tell_display(message)

    def _overflowed(self, subscriber: _Subscriber, why: str) -> None:
        message = _log_overflow(subscriber, why)
        if message is not None and not subscriber.is_display:
            self._tell_display(message)

    def _tell_display(self, message: str) -> None:
        if self._display is not None:
            # Through _dispatch, so a failing display is itself caught and logged.
            _dispatch(
                [self._display],
                Error(message, None),
                _context_failure,
                _context_overflow,
            )


__all__ = [
    "MAX_DEPTH",
    "MAX_DERIVED",
    "Callback",
    "EventBus",
    "active_callbacks",
    "compose",
    "emit",
    "use_callback",
]
