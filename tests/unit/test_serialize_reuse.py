"""Pickled functions are reused across calls only while they would pickle the same."""

from __future__ import annotations

import pickle

import cloudpickle

from skyward.transport import serialize

SCALE = 3
TABLE = [1, 2, 3]


def pure(x: int) -> int:
    return x + 1


def scaled(x: int) -> int:
    return x * SCALE


def reads_a_list(x: int) -> int:
    return TABLE[x]


def calls_a_helper(x: int) -> int:
    return reads_a_list(x)


def test_a_pure_function_is_pickled_once() -> None:
    cache = serialize.FunctionPickles()
    assert cache.get(pure) is cache.get(pure)


def test_rebinding_a_global_is_seen() -> None:
    global SCALE
    cache = serialize.FunctionPickles()
    first = cache.get(scaled)
    SCALE = 4
    try:
        second = cache.get(scaled)
        assert second != first
        assert cloudpickle.loads(second[1])(2) == 8
    finally:
        SCALE = 3


def test_a_function_reading_a_mutable_global_is_pickled_every_time() -> None:
    cache = serialize.FunctionPickles()
    first = cache.get(reads_a_list)
    TABLE.append(4)
    try:
        assert cache.get(reads_a_list) is not first
        assert cache.get(calls_a_helper) is not cache.get(calls_a_helper)  # through a helper, too
    finally:
        TABLE.pop()


def test_closures_over_mutable_values_are_not_cached() -> None:
    box = {"n": 1}

    def closure(x: int) -> int:
        return x + box["n"]

    cache = serialize.FunctionPickles()
    assert cache.get(closure) is not cache.get(closure)


def test_plain_arguments_take_the_c_pickler_and_read_back_the_same() -> None:
    args, kwargs = (1, "a", 2.5, None, (1, 2), [b"x"]), {"k": {"n": 3}}
    frames = serialize.dumps_arguments(pure, args, kwargs)
    assert len(frames) == 1
    assert serialize.loads(frames) == (args, kwargs)
    assert pickle.loads(frames[0]) == (args, kwargs)


def test_non_plain_arguments_still_use_cloudpickle_and_out_of_band_buffers() -> None:
    import numpy as np

    array = np.arange(10)
    frames = serialize.dumps_arguments(pure, (array, lambda: 1), {})
    args, _ = serialize.loads(frames)
    assert len(frames) == 2 and (args[0] == array).all() and args[1]() == 1


LEARNING_RATE = 0.1


def test_a_rebound_float_global_is_never_served_stale() -> None:
    global LEARNING_RATE

    def step() -> float:
        return LEARNING_RATE

    cache = serialize.FunctionPickles()
    for value in (0.1, 0.2, 0.30000000000000004, -0.0, 0.0):
        LEARNING_RATE = float(str(value))  # a fresh float object each time
        _, raw = cache.get(step)
        assert pickle.loads(raw)() == value and str(pickle.loads(raw)()) == str(value)
