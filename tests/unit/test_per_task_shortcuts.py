"""Shortcuts on the caller's per-task path of a gather give the answers of the long way:
flat scalar arguments (``serialize._flat_scalars``) and the last function asked about
(``inputs.stream_parameters``)."""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from skyward.transport import inputs, serialize

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
_values = st.recursive(
    st.one_of(_scalars, st.binary(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner), st.dictionaries(st.text(max_size=3), inner)),
    max_leaves=6,
)


@given(args=st.lists(_values, max_size=5).map(tuple), kwargs=st.dictionaries(st.text(max_size=3), _values, max_size=2))
def test_flat_scalar_arguments_are_plain_data_and_pickle_the_same(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if serialize._flat_scalars(args, kwargs):
        assert serialize._is_plain((args, kwargs), 3)
        assert serialize.dumps_arguments(len, args, kwargs) == [pickle.dumps((args, kwargs), protocol=5)]
    if kwargs or any(type(a) not in serialize._FLAT_SCALARS for a in args):
        assert not serialize._flat_scalars(args, kwargs)


def streams(a: Iterator[int], b: int) -> None:
    pass


def plain(a: int) -> None:
    pass


def test_the_answer_follows_the_function_asked_about_whatever_the_order() -> None:
    for fn, expected in [(streams, ("a",)), (streams, ("a",)), (plain, ()), (streams, ("a",)), (plain, ())]:
        assert inputs.stream_parameters(fn) == expected


def test_a_function_gone_and_one_made_in_its_place_gets_its_own_answer() -> None:
    def make(stream: bool) -> Any:
        if stream:

            def fn(items: Iterator[int]) -> None:
                pass

        else:

            def fn(items: int) -> None:  # type: ignore[misc]
                pass

        return fn

    first = make(True)
    assert inputs.stream_parameters(first) == ("items",)
    del first
    gc.collect()
    for _ in range(20):  # whatever address each new function takes
        assert inputs.stream_parameters(make(False)) == ()
        assert inputs.stream_parameters(make(True)) == ("items",)


def test_a_callable_that_cannot_be_weakly_referenced_is_answered_every_time() -> None:
    assert inputs.stream_parameters(len) == ()
    assert inputs.stream_parameters(streams) == ("a",)
    assert inputs.stream_parameters(len) == ()


@given(value=_values)
def test_a_plain_result_is_the_same_bytes_as_by_cloudpickle(value: Any) -> None:
    """The worker's C-pickler shortcut for results: the client reads the same bytes."""
    if serialize._is_plain(value, 3):
        assert serialize.dumps_result(value) == serialize._dumps_by_cloudpickle(value)
    assert serialize.loads(serialize.dumps_result(value)) == value
