"""``@compute``: functions become lazy, typed, picklable computations.

Operators route a computation to a pool: ``>>`` runs it on one worker, ``@`` on every
worker, ``&`` chains up to eight into a typed batch, and ``gather`` groups any number.
A generator function is a stream: ``>>`` returns an iterator over what it yields, as it
yields it (see ``skyward.transport.stream``).

``@compute(retries=n)`` says how many times a task of the function runs again on another
node when the node running it is lost (see ``compute``); the number travels with each
computation to the pool's client, never to the worker.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import types
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

import cloudpickle

from skyward.errors import ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
E = TypeVar("E")
F = TypeVar("F")
G = TypeVar("G")
H = TypeVar("H")
T = TypeVar("T")


class Executor(Protocol):
    """What the operators need from a pool (``ComputePool`` and friends satisfy it)."""

    def run(self, pending: PendingCompute[T]) -> T: ...

    def run_batch(self, batch: PendingBatch[Any]) -> tuple[Any, ...]: ...

    def broadcast(self, pending: PendingCompute[T]) -> tuple[T, ...]: ...


MAX_RETRIES = 10
"""The most re-runs ``@compute(retries=...)`` allows. A task that takes down every node
it runs on (it exhausts the node's memory, crashes its host) costs a node, and its
replacement, on each try; ten is past any transient cause and bounds that cost."""


@dataclass(frozen=True, slots=True)
class PendingCompute(Generic[R]):
    """A deferred call ``fn(*args, **kwargs)`` that returns ``R`` when a pool runs it.
    ``retries``: its function's ``@compute(retries=...)`` (None: the pool's default)."""

    fn: Callable[..., R]
    """The function to call on the worker (the one ``@compute`` wrapped)."""
    args: tuple[Any, ...] = ()
    """Its positional arguments, sent with the task."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Its keyword arguments, sent with the task."""
    retries: int | None = None
    """Re-runs of a task whose node was lost: ``None``, the pool's default (one)."""

    @property
    def name(self) -> str:
        """The function's qualified name, as the pool's log and errors name the task."""
        return getattr(self.fn, "__qualname__", repr(self.fn))

    @property
    def is_stream(self) -> bool:
        """Whether ``fn`` is a generator function: its values come back as it yields them."""
        return inspect.isgeneratorfunction(self.fn)

    # A generator's computation gives an iterator (a stream), not the generator object:
    # only iteration and close() travel, not send() or throw().
    @overload
    def __rshift__(self: PendingCompute[Generator[T, Any, Any]], pool: Executor) -> Iterator[T]: ...

    @overload
    def __rshift__(self, pool: Executor) -> R: ...

    def __rshift__(self, pool: Executor) -> Any:
        return pool.run(self)

    @overload
    def __matmul__(self: PendingCompute[Generator[T, Any, Any]], pool: Executor) -> tuple[Iterator[T], ...]: ...

    @overload
    def __matmul__(self, pool: Executor) -> tuple[R, ...]: ...

    def __matmul__(self, pool: Executor) -> tuple[Any, ...]:
        return pool.broadcast(self)

    def __and__(self, other: PendingCompute[B]) -> PendingBatch2[R, B]:
        return PendingBatch2((self, _check_chained(other)))

    def __reduce__(self) -> tuple[Any, ...]:
        # ``fn`` is the function @compute wrapped; its module attribute is the wrapper, so
        # the standard pickle, which saves functions by name, finds "not the same object".
        # Save the wrapper's name instead, or the function by value where no name finds it
        # (see ``_reference``); any other function is saved as it is. A function saved by
        # value takes its arguments with it: they are mostly of its program too (a class
        # defined in the same notebook), which the standard pickle also saves by name only.
        fn = _reference(self.fn)
        if isinstance(fn, _ByValue):
            return (_rebuild_by_value, (cloudpickle.dumps((self.fn, self.args, self.kwargs)), self.retries))
        return (_rebuild, (fn, self.args, self.kwargs, self.retries))


@dataclass(frozen=True, slots=True)
class _ComputeName:
    """Where a module-level ``@compute`` function lives: its computation's ``fn`` is the
    wrapper's ``.local`` there."""

    module: str
    qualname: str

    @staticmethod
    def of(fn: Callable[..., Any]) -> _ComputeName | None:
        module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
        # __main__ is not importable on a worker: cloudpickle sends such functions by value.
        if not module or module == "__main__" or "<locals>" in qualname:
            return None
        found: Any = sys.modules.get(module)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if isinstance(found, ComputeFunction) and found.local is fn:
            return _ComputeName(module, qualname)
        return None

    def resolve(self) -> Callable[..., Any]:
        found: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            found = getattr(found, part)
        if not isinstance(found, ComputeFunction):
            raise TypeError(f"{self.module}.{self.qualname} is no longer a @compute function")
        return found.local


@dataclass(frozen=True, slots=True)
class _ByValue:
    """A function no name finds in another process, saved as cloudpickle's bytes: one
    defined in ``__main__`` (a script, a notebook cell: ``__main__`` there is another
    program) or inside another function. The standard pickle saves functions by name
    only, so a computation of such a function pickles with it as cloudpickle would."""

    data: bytes

    def resolve(self) -> Callable[..., Any]:
        fn: Callable[..., Any] = cloudpickle.loads(self.data)
        return fn


def _reference(fn: Callable[..., Any]) -> Callable[..., Any] | _ComputeName | _ByValue:
    """How ``fn`` is pickled: by its ``@compute`` wrapper's name, by value where its own
    name does not lead back to it (``__main__``, a closure, a lambda), else as itself."""
    name = _ComputeName.of(fn)
    if name is not None:
        return name
    if isinstance(fn, types.FunctionType) and (fn.__module__ == "__main__" or _found(fn) is not fn):
        return _ByValue(cloudpickle.dumps(fn))
    return fn


def _found(fn: types.FunctionType) -> object:
    """What ``fn``'s module and qualified name lead to in this process (None: nothing)."""
    found: object = sys.modules.get(fn.__module__)
    for part in fn.__qualname__.split("."):
        found = getattr(found, part, None)
    return found


def _resolve(fn: Callable[..., Any] | _ComputeName | _ByValue) -> Callable[..., Any]:
    return fn.resolve() if isinstance(fn, _ComputeName | _ByValue) else fn


def _rebuild(
    fn: Callable[..., Any] | _ComputeName | _ByValue,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    retries: int | None = None,
) -> PendingCompute[Any]:
    return PendingCompute(_resolve(fn), args, kwargs, retries)


def _rebuild_by_value(data: bytes, retries: int | None) -> PendingCompute[Any]:
    fn, args, kwargs = cloudpickle.loads(data)
    return PendingCompute(fn, args, kwargs, retries)


def _rebuild_function(
    fn: Callable[..., Any] | _ComputeName | _ByValue, retries: int | None
) -> ComputeFunction[..., Any]:
    return ComputeFunction(_resolve(fn), retries)


def _check_pending(value: object) -> PendingCompute[Any]:
    if not isinstance(value, PendingCompute):
        raise ConfigurationError(f"expected a computation (the result of calling a @compute function), got {value!r}")
    return value


def _check_chained(value: object) -> PendingCompute[Any]:
    """``_check_pending`` for the right side of ``&``, where a non-computation almost always
    means ``f() & g() >> pool``: Python binds ``>>`` (and ``@``) tighter than ``&``, so
    ``g()`` has already run alone and ``&`` receives its result. Say so, and how to write it."""
    if not isinstance(value, PendingCompute):
        raise ConfigurationError(
            f"expected a computation (the result of calling a @compute function) on the right of &, got {value!r}. "
            "If you wrote `f() & g() >> pool`, Python ran `g() >> pool` first (>> and @ bind tighter than &), "
            "so g() has already run alone; add parentheses: `(f() & g()) >> pool`"
        )
    return value


@dataclass(frozen=True, slots=True)
class PendingBatch(Generic[R]):
    """Computations that run in parallel; ``batch >> pool`` returns their results in order."""

    items: tuple[PendingCompute[Any], ...]
    """The computations, in the order their results come back."""

    def __len__(self) -> int:
        return len(self.items)

    def __rshift__(self, pool: Executor) -> tuple[R, ...]:
        return pool.run_batch(self)


# Typed chains: ``(f() & g() & h()) >> pool`` infers ``tuple[F, G, H]``. Python has no
# variadic generics that a checker can grow one element at a time, so each arity is a
# class of its own.
@dataclass(frozen=True, slots=True)
class PendingBatch2(PendingBatch[Any], Generic[A, B]):
    def __rshift__(self, pool: Executor) -> tuple[A, B]:
        return pool.run_batch(self)

    def __and__(self, other: PendingCompute[C]) -> PendingBatch3[A, B, C]:
        return PendingBatch3((*self.items, _check_chained(other)))


@dataclass(frozen=True, slots=True)
class PendingBatch3(PendingBatch[Any], Generic[A, B, C]):
    def __rshift__(self, pool: Executor) -> tuple[A, B, C]:
        return pool.run_batch(self)

    def __and__(self, other: PendingCompute[D]) -> PendingBatch4[A, B, C, D]:
        return PendingBatch4((*self.items, _check_chained(other)))


@dataclass(frozen=True, slots=True)
class PendingBatch4(PendingBatch[Any], Generic[A, B, C, D]):
    def __rshift__(self, pool: Executor) -> tuple[A, B, C, D]:
        return pool.run_batch(self)

    def __and__(self, other: PendingCompute[E]) -> PendingBatch5[A, B, C, D, E]:
        return PendingBatch5((*self.items, _check_chained(other)))


@dataclass(frozen=True, slots=True)
class PendingBatch5(PendingBatch[Any], Generic[A, B, C, D, E]):
    def __rshift__(self, pool: Executor) -> tuple[A, B, C, D, E]:
        return pool.run_batch(self)

    def __and__(self, other: PendingCompute[F]) -> PendingBatch6[A, B, C, D, E, F]:
        return PendingBatch6((*self.items, _check_chained(other)))


@dataclass(frozen=True, slots=True)
class PendingBatch6(PendingBatch[Any], Generic[A, B, C, D, E, F]):
    def __rshift__(self, pool: Executor) -> tuple[A, B, C, D, E, F]:
        return pool.run_batch(self)

    def __and__(self, other: PendingCompute[G]) -> PendingBatch7[A, B, C, D, E, F, G]:
        return PendingBatch7((*self.items, _check_chained(other)))


@dataclass(frozen=True, slots=True)
class PendingBatch7(PendingBatch[Any], Generic[A, B, C, D, E, F, G]):
    def __rshift__(self, pool: Executor) -> tuple[A, B, C, D, E, F, G]:
        return pool.run_batch(self)

    def __and__(self, other: PendingCompute[H]) -> PendingBatch8[A, B, C, D, E, F, G, H]:
        return PendingBatch8((*self.items, _check_chained(other)))


@dataclass(frozen=True, slots=True)
class PendingBatch8(PendingBatch[Any], Generic[A, B, C, D, E, F, G, H]):
    def __rshift__(self, pool: Executor) -> tuple[A, B, C, D, E, F, G, H]:
        return pool.run_batch(self)

    def __and__(self, other: object) -> PendingBatch[Any]:
        raise ConfigurationError("a chain with & holds at most 8 computations; use gather(*computations) for more")


@dataclass(frozen=True, slots=True)
class PendingStreams(PendingBatch[Any], Generic[T]):
    """``gather`` of generator computations: ``>> pool`` gives an iterator each, in order."""

    def __rshift__(self, pool: Executor) -> tuple[Iterator[T], ...]:
        return pool.run_batch(self)


@overload
def gather(*computations: PendingCompute[Generator[T, Any, Any]]) -> PendingStreams[T]: ...


@overload
def gather(*computations: PendingCompute[R]) -> PendingBatch[R]: ...


def gather(*computations: PendingCompute[Any]) -> PendingBatch[Any]:
    """Group any number of computations; ``gather(...) >> pool`` returns results in order
    (an iterator for each generator's computation)."""
    items = tuple(_check_pending(c) for c in computations)
    if items and all(c.is_stream for c in items):
        return PendingStreams(items)
    return PendingBatch(items)


class ComputeFunction(Generic[P, R]):
    """A function made lazy by ``@compute``: calling it returns a ``PendingCompute``."""

    __slots__ = ("__dict__", "_fn", "_retries")

    def __init__(self, fn: Callable[P, R], retries: int | None = None) -> None:
        self._fn = fn
        self._retries = retries
        functools.update_wrapper(self, fn)

    @property
    def local(self) -> Callable[P, R]:
        """The original function, to run here and now (tests, debugging)."""
        return self._fn

    @property
    def retries(self) -> int | None:
        """How many times a task of it runs again when its node is lost (None: the pool's
        default, once)."""
        return self._retries

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> PendingCompute[R]:
        return PendingCompute(self._fn, args, dict(kwargs), self._retries)

    def __repr__(self) -> str:
        retries = "" if self._retries is None else f" retries={self._retries}"
        return f"<compute {getattr(self._fn, '__qualname__', self._fn)!r}{retries}>"

    # A ComputeFunction is itself picklable, e.g. when one computation calls another's
    # .local inside a worker: its function travels as a computation's does.
    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_function, (_reference(self._fn), self._retries))


@overload
def compute(fn: Callable[P, R], /, *, retries: int | None = None) -> ComputeFunction[P, R]: ...


@overload
def compute(*, retries: int | None = None) -> Callable[[Callable[P, R]], ComputeFunction[P, R]]: ...


def compute(
    fn: Callable[P, R] | None = None, /, *, retries: int | None = None
) -> ComputeFunction[P, R] | Callable[[Callable[P, R]], ComputeFunction[P, R]]:
    """Make ``fn`` lazy: ``fn(x)`` now builds a computation for a pool to run.

    ``@compute`` or ``@compute(retries=n)``. ``retries``: how many times a task of this
    function runs again on another node when the node running it is lost (it stopped
    answering, its process or machine died, its cloud reclaimed it) or leaves while it
    runs. None: the pool's default, once. 0: at most once; a task whose node is lost
    fails with ``NodeLostError`` (for work with side effects that must not happen
    twice). A task that raised is never run again: only a lost node's are.
    """
    checked = _check_retries(retries)
    if fn is None:

        def decorate(function: Callable[P, R]) -> ComputeFunction[P, R]:
            return _make(function, checked)

        return decorate
    return _make(fn, checked)


def _make(fn: Callable[P, R], retries: int | None) -> ComputeFunction[P, R]:
    if isinstance(fn, ComputeFunction):
        return fn if retries is None or retries == fn.retries else ComputeFunction(fn.local, retries)
    if not callable(fn):
        raise ConfigurationError(f"@compute needs a function (or other callable), got {type(fn).__name__}: {fn!r}")
    if inspect.isasyncgenfunction(fn):
        raise ConfigurationError(
            f"@compute({getattr(fn, '__qualname__', fn)}): async generator functions are not supported; "
            "write a plain generator (def with yield): its values stream back the same way"
        )
    return ComputeFunction(fn, retries)


def _check_retries(retries: object) -> int | None:
    if retries is None:
        return None
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise ConfigurationError(
            f"sky.compute(retries={retries!r}): must be a whole number from 0 (run at most once: a task whose "
            f"node is lost fails) to {MAX_RETRIES}, or None for the pool's default (one re-run on a lost node)"
        )
    return retries
