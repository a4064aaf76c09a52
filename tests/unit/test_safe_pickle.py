"""Safe mode's allow-list unpickler, without a pool."""

from __future__ import annotations

import dataclasses
import os
import pickle
from collections import OrderedDict
from datetime import datetime
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError, WorkerDiedError
from skyward.providers.settings import third_party_hosts
from skyward.transport import serialize
from skyward.transport.safe_pickle import RefusedType, ResultPolicy, safe_loads


@dataclasses.dataclass
class Point:
    x: int
    y: float


class NotADataclass:
    def __init__(self) -> None:
        self.value = 1


class RunsACommand:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, ("echo pwned",)


SAFE = safe_loads(ResultPolicy())


def test_plain_data_arrays_and_user_dataclasses_are_read() -> None:
    value = {
        "n": [1, 2.5, "s", b"b", None, (True, frozenset({1}))],
        "array": np.arange(6.0).reshape(2, 3),
        "scalar": np.float32(1.5),
        "ordered": OrderedDict(a=1),
        "when": datetime(2026, 1, 1),
        "point": Point(1, 2.0),
        "error": WorkerDiedError("gone"),
        "builtin error": ValueError("bad"),
    }
    got = SAFE(serialize.dumps_result(value))
    assert got["point"] == Point(1, 2.0) and type(got["point"]) is Point
    np.testing.assert_array_equal(got["array"], value["array"])
    assert got["n"] == value["n"] and got["scalar"] == value["scalar"] and got["when"] == value["when"]
    assert isinstance(got["error"], WorkerDiedError) and isinstance(got["builtin error"], ValueError)


def test_torch_tensors_are_read_through_torchs_own_allow_list() -> None:
    torch = pytest.importorskip("torch")
    tensor = torch.arange(4.0)
    got = SAFE(serialize.dumps_result({"t": tensor, "p": torch.nn.Parameter(torch.ones(2)), "size": tensor.shape}))
    assert torch.equal(got["t"], tensor) and got["size"] == torch.Size([4])


def test_a_pickle_that_calls_a_function_is_refused_before_anything_runs(tmp_path: object) -> None:
    with pytest.raises(RefusedType, match=r"safe mode refused posix\.system") as caught:
        SAFE([pickle.dumps(RunsACommand())])
    assert "allow_results=['posix.system']" in str(caught.value)


def test_a_class_that_is_not_a_dataclass_is_refused_unless_allowed() -> None:
    frames = serialize.dumps_result(NotADataclass())
    with pytest.raises(RefusedType, match="NotADataclass"):
        SAFE(frames)
    allowed = safe_loads(ResultPolicy.build([NotADataclass]))
    assert allowed(frames).value == 1
    by_module = safe_loads(ResultPolicy.build([f"{__name__}.*"]))
    assert by_module(frames).value == 1


@pytest.mark.parametrize("bad", ["os", "", "a.b c", 3, "pkg.mod"[0:0], [1]])
def test_allow_results_refuses_what_is_not_a_class_or_a_dotted_name(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="allow_results"):
        ResultPolicy.build(bad if isinstance(bad, list) else [bad])


def test_safe_mode_is_the_default_where_a_providers_hosts_are_third_parties() -> None:
    from dataclasses import dataclass

    from skyward.providers.settings import ProviderSettings

    @dataclass(frozen=True, slots=True, kw_only=True)
    class Marketplace(ProviderSettings):
        third_party_hosts: ClassVar[bool] = True

    @dataclass(frozen=True, slots=True, kw_only=True)
    class OwnCloud(ProviderSettings):
        pass

    assert third_party_hosts(Marketplace()) is True
    assert third_party_hosts(OwnCloud()) is False


_plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.frozensets(st.integers(), max_size=4)
    ),
    max_leaves=20,
)


@given(_plain)
def test_any_plain_data_reads_the_same_in_safe_mode(value: object) -> None:
    assert SAFE(serialize.dumps_result(value)) == value


def test_the_marketplace_clouds_default_to_safe_results_and_the_others_do_not() -> None:
    import skyward as sky

    assert third_party_hosts(sky.VastAI()) and third_party_hosts(sky.RunPod())
    assert not any(third_party_hosts(p) for p in (sky.Local(), sky.AWS(), sky.DigitalOcean(), sky.Verda()))
