"""The wrapper every distributed backend applies to the user's function.

``@compute`` on top, ``@distributed.<name>(...)`` below it::

    @compute
    @distributed.torch(backend="gloo")
    def train() -> float: ...

    results = train() @ pool  # once on every worker: that is the launch

The decorator returns a :class:`DistributedFunction`: the user's function plus a
*launcher*, a frozen value whose ``session(info)`` context manager sets the framework
up on this worker before the call and tears it down after it, even when the function
raises. Both travel to the worker with cloudpickle: the launcher and this class by
reference (skyward and its plugins are installed on every node), the user's function
by value as usual.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, Literal, ParamSpec, Protocol, TypeVar

from skyward.api.compute import ComputeFunction
from skyward.errors import ConfigurationError, NotInComputationError
from skyward.runtime.context import InstanceInfo, instance_info

P = ParamSpec("P")
R = TypeVar("R")


class Launcher(Protocol):
    """Sets a framework up for one call on one worker slot.

    ``name`` is the backend's public name (``"torch"``), used in messages.
    ``session(info)`` is entered just before the user's function runs and exited just
    after; it must undo what it did (process groups, environment variables) so that the
    long-lived worker process can serve the next call, distributed or not.
    """

    @property
    def name(self) -> str: ...

    def session(self, info: InstanceInfo) -> AbstractContextManager[None]: ...


class DistributedFunction(Generic[P, R]):
    """``fn`` made to run inside ``launcher.session(instance_info())`` on a worker."""

    __slots__ = ("__dict__", "_fn", "_launcher")

    def __init__(self, fn: Callable[P, R], launcher: Launcher) -> None:
        self._fn = fn
        self._launcher = launcher
        # __module__ and __qualname__ of the user's function: the pool uses them in
        # messages and to decide that the user's module travels by value.
        functools.update_wrapper(self, fn)

    @property
    def launcher(self) -> Launcher:
        return self._launcher

    @property
    def function(self) -> Callable[P, R]:
        """The wrapped function, without the distributed set-up."""
        return self._fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            info = instance_info()
        except NotInComputationError:
            raise NotInComputationError(
                f"{getattr(self._fn, '__qualname__', self._fn)} is wrapped with "
                f"distributed.{self._launcher.name}(...), which sets up a process group "
                "across the workers of a pool, so it only runs on a pool: "
                "fn(...) @ pool runs it on every worker"
            ) from None
        with self._launcher.session(info):
            return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        name = getattr(self._fn, "__qualname__", self._fn)
        return f"<distributed.{self._launcher.name} {name!r}>"

    # Rebuilt from (fn, launcher) alone: the attributes update_wrapper copied (among
    # them __wrapped__) would only make the payload larger.
    def __reduce__(self) -> tuple[Any, ...]:
        return (DistributedFunction, (self._fn, self._launcher))


def check_target(fn: object, backend: str) -> None:
    """Refuse what ``distributed.<backend>(...)`` cannot wrap, with the fix."""
    if isinstance(fn, ComputeFunction):
        raise ConfigurationError(
            f"distributed.{backend}(...) was applied on top of @compute; put @compute "
            f"on top instead:\n\n    @compute\n    @distributed.{backend}(...)\n"
            f"    def {getattr(fn, '__name__', 'fn')}(...): ..."
        )
    if not callable(fn):
        raise ConfigurationError(f"distributed.{backend}(...) decorates a function, got {type(fn).__name__}: {fn!r}")


def wrap(fn: Callable[P, R], launcher: Launcher) -> DistributedFunction[P, R]:
    """Wrap ``fn`` with ``launcher``, refusing the decorator orders that cannot work."""
    check_target(fn, launcher.name)
    return DistributedFunction(fn, launcher)


class DistributedDecorator(Protocol):
    """What ``distributed.<name>(...)`` returns: keeps the wrapped function's signature,
    so ``@compute`` on top still types ``fn(x) @ pool`` as ``tuple[R, ...]``."""

    def __call__(self, fn: Callable[P, R], /) -> DistributedFunction[P, R]: ...


class TorchBackendFactory(Protocol):
    """``distributed.torch(...)`` and ``distributed.transformers(...)``, which skyward-torch
    provides. Declared here so ``sky.distributed.torch`` is typed without core importing
    the plugin; skyward_torch.plugin checks its two functions against it."""

    def __call__(
        self, backend: Literal["nccl", "gloo"] | None = None, *, timeout: float | None = None
    ) -> DistributedDecorator: ...


def decorator(launcher: Launcher) -> DistributedDecorator:
    """The decorator ``distributed.<name>(...)`` returns for ``launcher``."""

    def apply(fn: Callable[P, R]) -> DistributedFunction[P, R]:
        return wrap(fn, launcher)

    return apply
