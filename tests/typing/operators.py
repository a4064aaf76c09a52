"""Checked by mypy in `python3 tasks.py check`: the operators keep their types."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import assert_type

import skyward as sky


@sky.compute
def number() -> int:
    return 1


@sky.compute
def text(n: int) -> str:
    return str(n)


@sky.compute
def ratio(a: float, b: float) -> float:
    return a / b


@sky.compute
@sky.distributed.torch(backend="gloo")
def train(epochs: int) -> float:
    return float(epochs)


@sky.compute
@sky.distributed.keras(backend="jax")
def fit(steps: int) -> list[float]:
    return [0.0] * steps


def check(pool: sky.ComputePool) -> None:
    assert_type(number(), sky.PendingCompute[int])
    assert_type(number() >> pool, int)
    assert_type(number() @ pool, tuple[int, ...])
    a, b = (number() & text(1)) >> pool
    assert_type(a, int)
    assert_type(b, str)
    x, y, z = (number() & text(2) & ratio(1.0, 2.0)) >> pool
    assert_type(x, int)
    assert_type(y, str)
    assert_type(z, float)
    assert_type(sky.gather(*[text(i) for i in range(3)]) >> pool, tuple[str, ...])
    assert_type(text.local(3), str)
    # distributed wrappers keep the signature under @compute
    assert_type(train(3) @ pool, tuple[float, ...])
    assert_type(fit(2) @ pool, tuple[list[float], ...])


@sky.compute
def counts(n: int) -> Generator[int, None, None]:
    yield from range(n)


@sky.compute
def words(n: int) -> Iterator[str]:
    yield from map(str, range(n))


def check_streams(pool: sky.ComputePool) -> None:
    # a generator's values stream back: `>>` gives an iterator of what it yields
    assert_type(counts(3) >> pool, Iterator[int])
    assert_type(counts(3) @ pool, tuple[Iterator[int], ...])
    assert_type(words(3) >> pool, Iterator[str])
    for value in counts(3) >> pool:
        assert_type(value, int)
    assert_type(sky.gather(counts(1), counts(2)) >> pool, tuple[Iterator[int], ...])


@sky.compute(retries=0)
def charge(amount: int) -> float:
    return amount / 100


@sky.compute(retries=2)
def ticks(n: int) -> Iterator[int]:
    yield from range(n)


def check_retries(pool: sky.ComputePool) -> None:
    # @sky.compute(retries=n) keeps the function's types, as plain @sky.compute does
    assert_type(charge(250), sky.PendingCompute[float])
    assert_type(charge(250) >> pool, float)
    assert_type(charge.local(3), float)
    assert_type(ticks(3) >> pool, Iterator[int])
    assert_type(sky.compute(retries=1)(charge.local)(3), sky.PendingCompute[float])
    charge("250")  # type: ignore[arg-type]  # the parameters are checked too
