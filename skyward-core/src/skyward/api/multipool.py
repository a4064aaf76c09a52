"""``MultiPool``: several pools provisioned in parallel, torn down together.

Start time is the slowest pool's, not the sum. If any pool fails to start, every other
one (started or still starting) is stopped before the error, which names the pool that
failed and why, reaches the caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait

from skyward.api.pool import ComputePool
from skyward.errors import ConfigurationError, ProvisioningError


class MultiPoolError(ProvisioningError):
    """One or more pools of a MultiPool failed to start; all of them were stopped."""

    def __init__(self, message: str, failures: dict[int, BaseException]) -> None:
        super().__init__(message)
        self.failures = failures
        """Each pool that failed to start, by its position in ``MultiPool(...)``, with its error."""


class MultiPool:
    """Several ``ComputePool`` values opened in parallel and closed together:
    ``with MultiPool(a, b) as (a, b):``."""

    def __init__(self, *pools: ComputePool) -> None:
        if not pools:
            raise ConfigurationError("MultiPool needs at least one ComputePool")
        for index, pool in enumerate(pools):
            if not isinstance(pool, ComputePool):
                raise ConfigurationError(f"MultiPool argument {index} is not a ComputePool: {pool!r}")
        if len({id(p) for p in pools}) != len(pools):
            raise ConfigurationError("MultiPool was given the same ComputePool twice")
        self.pools: tuple[ComputePool, ...] = pools
        """The pools, in the order given; ``with MultiPool(a, b) as (a, b):`` unpacks them."""

    def __enter__(self) -> tuple[ComputePool, ...]:
        self.open()
        return self.pools

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self) -> None:
        """Start every pool in parallel; if any fails, stop them all and raise
        ``MultiPoolError`` naming each failure (pools start in parallel because each start
        is mostly waiting on a cloud: two take the time of the slower, not the sum)."""
        with ThreadPoolExecutor(max_workers=len(self.pools), thread_name_prefix="skyward-multipool") as executor:
            futures = [executor.submit(pool.open) for pool in self.pools]
            wait(futures)
        failures = {i: f.exception() for i, f in enumerate(futures) if f.exception() is not None}
        if not failures:
            return
        self.close()
        lines = [
            f"pool {i} ({self.pools[i].provider_name}, nodes={self.pools[i].spec.nodes}): {type(e).__name__}: {e}"
            for i, e in failures.items()
        ]
        error = MultiPoolError(
            f"{len(failures)} of {len(self.pools)} pools failed to start; all were stopped:\n" + "\n".join(lines),
            {i: e for i, e in failures.items() if e is not None},
        )
        raise error from next(iter(failures.values()))

    def close(self) -> None:
        """Stop every pool in parallel; the first error (if any) is raised after all stopped."""
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=len(self.pools), thread_name_prefix="skyward-multipool") as executor:
            for future in [executor.submit(pool.close) for pool in self.pools]:
                exc = future.exception()
                if exc is not None:
                    errors.append(exc)
        if errors:
            raise errors[0]

    def __iter__(self) -> Iterator[ComputePool]:
        return iter(self.pools)
