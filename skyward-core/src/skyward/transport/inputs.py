"""Input streams: an argument for a parameter annotated ``Iterator[T]`` or ``Iterable[T]``
is not pickled whole; the worker pulls its items from the client as it consumes them.

On the client the argument is replaced by an ``InputRef`` (its slot number) and the
iterable stays here; on the worker that marker unpickles as a ``RemoteInput``, an
iterator that asks the worker's ``InputSource`` for the next item. The worker asks the
client for a window of items (a WANT result), and again each time half of it has been
consumed; a ``Feeder`` thread on the client pulls that many from the iterable, pickles
each one and hands them to the I/O thread (INPUT messages). At most a window of items
is ever in flight, so an input larger than either machine's memory streams through.

The user's iterable is read on the feeder thread, never on the I/O thread: a generator
that builds 1 MB chunks would otherwise hold up every other task's messages.
"""

from __future__ import annotations

import collections.abc
import inspect
import threading
import typing
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from skyward.errors import ConfigurationError
from skyward.transport import serialize

# Items of an input stream in flight (pulled on the client, not yet consumed on the
# worker). 16: a stream of 1 MB chunks then holds at most ~16 MB on each side, while
# small items still arrive several per message.
INPUT_WINDOW = 16
_ITERATOR_ORIGINS = (collections.abc.Iterator, collections.abc.Iterable)
_STRING_PREFIXES = ("Iterator[", "Iterable[", "typing.Iterator[", "typing.Iterable[", "collections.abc.Iterator[")


def _is_stream_annotation(annotation: object) -> bool:
    if isinstance(annotation, str):  # unresolvable under ``from __future__ import annotations``
        text = annotation.replace(" ", "")
        return text.startswith(_STRING_PREFIXES) or text.startswith("collections.abc.Iterable[")
    return typing.get_origin(annotation) in _ITERATOR_ORIGINS or annotation in _ITERATOR_ORIGINS


_parameters_cache: weakref.WeakKeyDictionary[Callable[..., Any], tuple[str, ...]] = weakref.WeakKeyDictionary()


class _LastAnswer:
    """The function asked about last and its answer: a gather asks once per task, always
    about the same function, and an identity check through a weak reference (0.05 us)
    is far cheaper than the WeakKeyDictionary's lookup, which builds a weak reference
    per call (0.4 us; py-spy and cProfile put it on the client's per-task path)."""

    __slots__ = ("names", "ref")

    def __init__(self) -> None:
        self.ref: Callable[[], object] = lambda: None
        self.names: tuple[str, ...] = ()


_last = _LastAnswer()


def stream_parameters(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names of ``fn``'s parameters annotated ``Iterator[T]`` or ``Iterable[T]`` (not
    ``*args`` or ``**kwargs``). Cached per function: ``>>`` asks on every call."""
    last = _last
    if last.ref() is fn:
        return last.names
    try:
        cached = _parameters_cache[fn]
    except (KeyError, TypeError):
        pass
    else:
        _remember(fn, cached)
        return cached
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        names: tuple[str, ...] = ()
    else:
        try:
            hints = typing.get_type_hints(fn)
        except Exception:
            hints = {}
        names = tuple(
            name
            for name, parameter in signature.parameters.items()
            if parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            and _is_stream_annotation(hints.get(name, parameter.annotation))
        )
    try:
        _parameters_cache[fn] = names
    except TypeError:
        pass  # not weak-referenceable: asked again next time
    else:
        _remember(fn, names)
    return names


def _remember(fn: Callable[..., Any], names: tuple[str, ...]) -> None:
    """Make ``fn`` the last function asked about (it is weak-referenceable: it is in the
    cache). The names are set first: a reader on another thread that sees the new
    reference then sees its names (and one that sees the old one, the old names)."""
    fresh = _LastAnswer()
    fresh.names = names
    fresh.ref = weakref.ref(fn)
    global _last
    _last = fresh


@dataclass(frozen=True, slots=True)
class InputRef:
    """What travels in place of an input stream's argument: its slot."""

    slot: int

    def __reduce__(self) -> tuple[Any, ...]:
        return (_remote_input, (self.slot,))


class InputSource(Protocol):
    """Where a worker's ``RemoteInput`` gets its items (the worker running the task)."""

    def next_input(self, slot: int) -> Any: ...


_source: InputSource | None = None


def set_source(source: InputSource | None) -> None:
    """The worker installs itself before it unpickles a task's arguments."""
    global _source
    _source = source


class RemoteInput(Iterator[Any]):
    """An input stream on the worker: each ``next`` takes an item the client sent."""

    def __init__(self, slot: int, source: InputSource | None) -> None:
        self._slot = slot
        self._source = source

    def __iter__(self) -> RemoteInput:
        return self

    def __next__(self) -> Any:
        if self._source is None:
            raise RuntimeError("this input stream belongs to a task that is not running here")
        return self._source.next_input(self._slot)


def _remote_input(slot: int) -> RemoteInput:
    return RemoteInput(slot, _source)


def split_inputs(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], list[tuple[str, Iterable[Any]]]]:
    """``args`` and ``kwargs`` with every input stream's argument replaced by its
    ``InputRef``, and the (parameter name, iterable) of each, by slot."""
    names = stream_parameters(fn)
    if not names:
        return args, kwargs, []
    bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    inputs: list[tuple[str, Iterable[Any]]] = []
    for name in names:
        if name in bound.arguments:
            value = bound.arguments[name]
            if not isinstance(value, Iterable):
                raise ConfigurationError(
                    f"argument {name!r} of {getattr(fn, '__qualname__', fn)} is annotated as an Iterator/Iterable "
                    f"(it streams to the worker item by item), but got {type(value).__name__}: pass an iterable"
                )
            inputs.append((name, value))
            bound.arguments[name] = InputRef(len(inputs) - 1)
    return tuple(bound.args), dict(bound.kwargs), inputs


Send = Callable[[int, bool, list[list[serialize.Frame]]], None]  # (slot, ended, items' frames)


class Feeder:
    """Pulls a task's input streams on its own thread as the worker asks (``want``) and
    hands each batch to ``send``; stops when ``finished()`` says the task is over, or on
    ``stop()``. A failing iterable calls ``fail`` with its exception."""

    def __init__(
        self,
        inputs: list[tuple[str, Iterable[Any]]],
        send: Send,
        finished: Callable[[], bool],
        fail: Callable[[BaseException], None],
    ) -> None:
        self._names = [name for name, _ in inputs]
        self._iterators: list[Iterator[Any] | None] = [None] * len(inputs)
        self._iterables = [value for _, value in inputs]
        self._credit = [0] * len(inputs)
        self._send = send
        self._finished = finished
        self._fail = fail
        self._stopped = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="skyward-feeder", daemon=True)
        self._thread.start()

    def want(self, slot: int, count: int) -> None:
        with self._changed:
            if 0 <= slot < len(self._credit):
                self._credit[slot] += count
                self._changed.notify()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopped and not any(c > 0 for c in self._credit):
                    self._changed.wait(0.1)
                    if self._finished():
                        return
                if self._stopped:
                    return
                slot = next(i for i, c in enumerate(self._credit) if c > 0)
                count, self._credit[slot] = self._credit[slot], 0
            if not self._pull(slot, count):
                return

    def _pull(self, slot: int, count: int) -> bool:
        """Send ``count`` items of ``slot`` (fewer and the end, when it runs out). False
        when the iterable failed."""
        items: list[list[serialize.Frame]] = []
        ended = False
        try:
            iterator = self._iterators[slot]
            if iterator is None:
                iterator = self._iterators[slot] = iter(self._iterables[slot])
                self._iterables[slot] = ()  # the iterator holds what it needs
            for _ in range(count):
                try:
                    value = next(iterator)
                except StopIteration:
                    ended = True
                    break
                items.append(serialize.dumps(value))
                if len(items) >= 8:  # a few at a time: the worker starts on them sooner
                    self._send(slot, False, items)
                    items = []
        except BaseException as error:
            error.add_note(f"(raised while reading the input stream {self._names[slot]!r} on this machine)")
            self._fail(error)
            return False
        if items or ended:
            self._send(slot, ended, items)
        return True
