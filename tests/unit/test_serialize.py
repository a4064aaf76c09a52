"""Payload framing: big buffers travel out of band, as views of the caller's memory."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError
from skyward.transport import serialize, wire


def test_a_large_array_is_a_separate_frame_sharing_the_arrays_memory() -> None:
    array = np.arange(1_000_000, dtype=np.float64)
    frames = serialize.dumps({"x": array})
    assert len(frames) == 2 and len(frames[0]) < 1000  # the pickle stream stays small
    view = np.frombuffer(frames[1], dtype=np.float64)
    assert np.shares_memory(view, array)  # no copy was made
    restored = serialize.loads(frames)["x"]
    np.testing.assert_array_equal(restored, array)


@given(
    st.recursive(
        st.none() | st.integers() | st.text() | st.binary(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_round_trip(value: object) -> None:
    assert serialize.loads(serialize.dumps(value)) == value


def test_the_unpicklable_argument_is_named() -> None:
    def fn(a: object, b: object) -> None: ...

    with pytest.raises(ConfigurationError, match=r"positional argument 1 \(lock\)"):
        serialize.dumps_arguments(fn, (1, threading.Lock()), {})


def test_function_keys_are_stable_for_the_same_function() -> None:
    def fn(x: int) -> int:
        return x + 1

    assert serialize.dumps_function(fn)[0] == serialize.dumps_function(fn)[0]


@given(st.lists(st.tuples(st.integers(0, 2**63), st.integers(0, 2**31), st.integers(0, 2**31)), max_size=50))
def test_task_and_result_metadata_round_trip(entries: list[tuple[int, int, int]]) -> None:
    assert wire.unpack_tasks(wire.pack_tasks(entries)) == entries
    results = [(t, wire.Status(n % 4), n, (n % 1024) / 4) for t, n, _ in entries]  # run times exact in float32
    assert wire.unpack_results(wire.pack_results(results)) == results
    assert wire.unpack_recall(wire.pack_recall([t for t, _, _ in entries])) == [t for t, _, _ in entries]
    for t, _, w in entries:
        assert wire.unpack_credit(wire.pack_credit(t, w)) == (t, w)


@given(st.binary(min_size=16, max_size=16), st.binary(max_size=300), st.binary(min_size=1, max_size=300))
def test_task_heads_round_trip(key: bytes, fn: bytes, arguments: bytes) -> None:
    frames = wire.encode_task(key, fn, [arguments, b"buffer"])
    assert len(frames) == 2
    got_key, got_fn, got_arguments = wire.decode_task(frames)
    assert (got_key, bytes(got_fn), bytes(got_arguments[0]), got_arguments[1]) == (key, fn, arguments, b"buffer")


def _defined_here() -> int:
    raise ValueError("from this file")


def test_a_function_sent_by_value_keeps_its_file_name_for_remote_tracebacks() -> None:
    """cloudpickle 3.1.3 renames the code of by-value functions to <dynamic-code>, which took
    the user's file name and source lines out of every remote traceback."""
    import pickle as std_pickle
    import traceback

    from skyward.transport import serialize

    serialize._pickle_user_modules_by_value(_defined_here)
    _, raw = serialize.dumps_function(_defined_here)
    rebuilt = std_pickle.loads(raw)
    assert rebuilt.__code__.co_filename == __file__
    try:
        rebuilt()
    except ValueError as exc:
        text = "".join(traceback.format_exception(exc))
    assert f'File "{__file__}"' in text and 'raise ValueError("from this file")' in text


@pytest.mark.parametrize("kind", [bytes, bytearray])
def test_large_bytes_arguments_travel_out_of_band_and_come_back_as_themselves(kind: type) -> None:
    data = kind(b"x" * (serialize.OUT_OF_BAND_MIN + 1))

    def fn(a: object, b: object, *, c: object) -> None:
        return None

    frames = serialize.dumps_arguments(fn, (data, [b"small", data]), {"c": {"k": data}})
    assert len(frames[0]) < 1024, "a large buffer was copied into the pickle stream"
    assert len(frames) == 4 and all(memoryview(f).nbytes == len(data) for f in frames[1:])
    args, kwargs = serialize.loads(frames)
    assert args == (data, [b"small", data]) and kwargs == {"c": {"k": data}}
    assert type(args[0]) is kind and type(kwargs["c"]["k"]) is kind


def test_a_large_bytes_result_travels_out_of_band() -> None:
    data = bytes(serialize.OUT_OF_BAND_MIN)
    frames = serialize.dumps(data)
    assert len(frames) == 2 and len(frames[0]) < 1024
    assert serialize.loads(frames) == data
