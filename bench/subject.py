"""Skyward, the system under test, as a user writes it: ``@compute``, ``>>``, ``gather``, ``@``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import skyward as sky
from bench.baselines.base import WORKERS
from skyward.api.compute import ComputeFunction


class SkywardSystem:
    """A Local pool of ``nodes`` nodes; each node is an agent process plus its worker(s).

    ``nodes=2`` gives the same 2 worker processes as every baseline (the agents are
    Skyward's own overhead, so they are counted, not hidden)."""

    def __init__(
        self,
        nodes: int = WORKERS,
        transport: Literal["ipc", "tcp"] = "ipc",
        pip: Sequence[str] = (),
        name: str | None = None,
        shared_memory: bool = True,
    ) -> None:
        self.name = name or ("skyward" if transport == "ipc" else "skyward+curve")
        image = sky.Image(pip=list(pip)) if pip else None
        provider = sky.Local(transport=transport, shared_memory=shared_memory)
        self.pool = sky.ComputePool(provider=provider, nodes=nodes, image=image, display="quiet")
        self.pool.open()
        self._compute: dict[Callable[..., Any], ComputeFunction[..., Any]] = {}

    def _fn(self, fn: Callable[..., Any]) -> ComputeFunction[..., Any]:
        wrapped = self._compute.get(fn)
        if wrapped is None:
            wrapped = self._compute[fn] = sky.compute(fn)
        return wrapped

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._fn(fn)(*args) >> self.pool

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        wrapped = self._fn(fn)
        return list(sky.gather(*(wrapped(item) for item in items)) >> self.pool)

    def broadcast(self, fn: Callable[[], Any]) -> tuple[Any, ...]:
        return self._fn(fn)() @ self.pool

    def close(self) -> None:
        self.pool.close()
