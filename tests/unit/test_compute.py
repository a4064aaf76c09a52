"""The programming model: @compute, PendingCompute, operators, batches, gather."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest

import skyward as sky
from skyward.api.compute import PendingBatch, PendingBatch2, PendingBatch8, PendingCompute, T
from skyward.errors import ConfigurationError


class RecordingPool:
    """An Executor that runs computations in-process and records which method was used."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def run(self, pending: PendingCompute[T]) -> T:
        self.calls.append("run")
        return pending.fn(*pending.args, **pending.kwargs)

    def run_batch(self, batch: PendingBatch[Any]) -> tuple[Any, ...]:
        self.calls.append(f"run_batch:{len(batch)}")
        return tuple(p.fn(*p.args, **p.kwargs) for p in batch.items)

    def broadcast(self, pending: PendingCompute[T]) -> tuple[T, ...]:
        self.calls.append("broadcast")
        return (pending.fn(*pending.args, **pending.kwargs),) * 3


@sky.compute
def add(a: int, b: int = 0) -> int:
    return a + b


def test_calling_returns_a_frozen_pending_compute() -> None:
    pending = add(1, b=2)
    assert isinstance(pending, PendingCompute)
    assert pending.args == (1,) and pending.kwargs == {"b": 2}
    with pytest.raises(AttributeError):
        pending.args = ()  # type: ignore[misc]


def test_local_runs_the_original_function() -> None:
    assert add.local(2, 3) == 5
    assert add.__name__ == "add" and add.__doc__ is None


def test_pending_compute_pickles_round_trip() -> None:
    pending = add(4, b=5)
    clone = pickle.loads(cloudpickle.dumps(pending))
    assert clone.fn(*clone.args, **clone.kwargs) == 9


def test_operators_route_to_the_right_pool_method() -> None:
    pool = RecordingPool()
    assert (add(1, 2) >> pool) == 3
    assert (add(1) @ pool) == (1, 1, 1)
    a, b = (add(1) & add(2)) >> pool
    assert (a, b) == (1, 2)
    assert (sky.gather(add(1), add(2), add(3)) >> pool) == (1, 2, 3)
    assert pool.calls == ["run", "broadcast", "run_batch:2", "run_batch:3"]


def test_chains_grow_to_eight_and_stop_there() -> None:
    batch = add(1) & add(2)
    assert isinstance(batch, PendingBatch2)
    for i in range(3, 9):
        batch = batch & add(i)  # type: ignore[assignment]
    assert isinstance(batch, PendingBatch8) and len(batch) == 8
    with pytest.raises(ConfigurationError, match="at most 8"):
        batch & add(9)
    assert (batch >> RecordingPool()) == tuple(range(1, 9))


def test_gather_of_many_keeps_order() -> None:
    assert (sky.gather(*[add(i) for i in range(100)]) >> RecordingPool()) == tuple(range(100))


def test_compute_refuses_a_non_callable() -> None:
    with pytest.raises(ConfigurationError, match="needs a function"):
        sky.compute(42)


def test_chaining_something_that_is_not_a_computation_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="expected a computation"):
        add(1) & 5  # type: ignore[operator]
    with pytest.raises(ConfigurationError, match="expected a computation"):
        sky.gather(add(1), "nope")  # type: ignore[arg-type]


def test_a_chain_without_parentheses_says_to_add_them() -> None:
    # `add(1) & add(2) >> pool` is `add(1) & (add(2) >> pool)`: add(2) runs alone first,
    # then & receives its result, 2. The error must name the cause and the fix.
    pool = RecordingPool()
    with pytest.raises(ConfigurationError, match=r"add parentheses: `\(f\(\) & g\(\)\) >> pool`") as info:
        add(1) & add(2) >> pool  # type: ignore[operator]
    assert "got 2" in str(info.value)
    assert ">> and @ bind tighter than &" in str(info.value)
    assert pool.calls == ["run"]  # the right side did run alone, as the message says
    with pytest.raises(ConfigurationError, match="add parentheses"):
        add(1) & add(2) & add(3) >> pool  # type: ignore[operator]
    with pytest.raises(ConfigurationError, match="add parentheses"):
        add(1) & add(2) @ pool  # type: ignore[operator]


def test_compute_is_idempotent() -> None:
    assert sky.compute(add) is add


def test_a_computation_of_a_module_level_function_survives_the_standard_pickle() -> None:
    import pickle

    import cloudpickle
    from pickling_target import add

    pending = add(1, b=2)
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, pickle.loads)):
        copy = loads(dumps(pending))
        assert copy == pending and copy.fn is add.local
        assert copy.fn(*copy.args, **copy.kwargs) == 3


def test_an_async_generator_is_refused_at_decoration() -> None:
    async def ticks() -> Any:
        yield 1

    with pytest.raises(ConfigurationError, match="async generator"):
        sky.compute(ticks)


def test_a_generator_functions_computation_is_a_stream() -> None:
    @sky.compute
    def gen(n: int) -> Iterator[int]:
        yield from range(n)

    @sky.compute
    def plain(n: int) -> int:
        return n

    assert gen(2).is_stream
    assert not plain(2).is_stream


@sky.compute(retries=0)
def charge_card(amount: int) -> int:
    return amount


@sky.compute(retries=3)
def idempotent(x: int) -> int:
    return x


def test_retries_travel_with_each_computation_and_default_to_the_pools() -> None:
    assert add(1).retries is None and add.retries is None
    assert charge_card(5).retries == 0 and idempotent(1).retries == 3
    assert charge_card.local(7) == 7 and charge_card.__name__ == "charge_card"
    assert "retries=0" in repr(charge_card)


def test_retries_survive_pickling_of_the_computation_and_the_function() -> None:
    for pending in (charge_card(5), idempotent(2)):
        copy = pickle.loads(cloudpickle.dumps(pending))
        assert copy.retries == pending.retries and copy.args == pending.args
    assert pickle.loads(cloudpickle.dumps(idempotent)).retries == 3


def test_compute_with_retries_rewraps_a_compute_function_with_the_new_value() -> None:
    assert sky.compute(retries=None)(add) is add
    again = sky.compute(retries=2)(add)
    assert again is not add and again.retries == 2 and again.local is add.local
    assert sky.compute(add, retries=1).retries == 1


@pytest.mark.parametrize("bad", [-1, 11, 1.5, True, "2"])
def test_retries_out_of_range_or_not_a_whole_number_are_refused_naming_the_parameter(bad: object) -> None:
    expected = r"sky\.compute\(retries=.*\): must be a whole number from 0"
    with pytest.raises(ConfigurationError, match=expected) as raised:
        sky.compute(retries=bad)  # type: ignore[arg-type]
    assert "to 10" in str(raised.value)
