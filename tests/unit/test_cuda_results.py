"""A torch tensor that lived on a worker's GPU reaches a client without one as a CPU tensor.

This machine has no GPU, so the bytes a GPU worker sends are made here the way torch
makes them (a storage pickled with ``torch.save``'s legacy format, whose location says
``cuda:0``); the first test checks that torch itself refuses them, so the others test
what a real GPU worker's result does. The same path ran on an NVIDIA H100 (see
docs/distributed.md).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import pytest

from skyward.transport import serialize
from skyward.transport.safe_pickle import ResultPolicy, safe_loads

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="torch sees a GPU: a CUDA tensor loads as it is")

_CPU = b"X\x03\x00\x00\x00cpu"  # the location string in torch.save's legacy pickle
_CUDA = b"X\x06\x00\x00\x00cuda:0"


class _AsIfOnGPU(pickle.Pickler):
    """Pickles tensors as a GPU worker would: every storage's location is ``cuda:0``."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.storage.TypedStorage):
            buffer = io.BytesIO()
            torch.save(obj, buffer, _use_new_zipfile_serialization=False)
            raw = buffer.getvalue()
            assert raw.count(_CPU) == 1, "torch.save's legacy format changed: update this test"
            return torch.storage._load_from_bytes, (raw.replace(_CPU, _CUDA),)
        return NotImplemented


def as_if_from_a_gpu(value: object) -> bytes:
    buffer = io.BytesIO()
    _AsIfOnGPU(buffer, protocol=5).dump(value)
    return buffer.getvalue()


def test_torch_itself_refuses_a_cuda_tensor_without_a_gpu() -> None:
    with pytest.raises(RuntimeError, match=serialize.CUDA_WITHOUT_GPU):
        pickle.loads(as_if_from_a_gpu(torch.arange(4.0)))


def test_a_result_holding_gpu_tensors_arrives_on_the_cpu() -> None:
    weights = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([0.5]), "step": 7}
    loaded = serialize.loads([as_if_from_a_gpu(weights)])
    assert loaded["step"] == 7
    for key in ("w", "b"):
        assert loaded[key].device.type == "cpu"
        assert torch.equal(loaded[key], weights[key])


def test_safe_mode_puts_gpu_tensors_on_the_cpu_too() -> None:
    loaded = safe_loads(ResultPolicy())([as_if_from_a_gpu([torch.ones(3)])])
    assert loaded[0].device.type == "cpu" and torch.equal(loaded[0], torch.ones(3))


def test_other_runtime_errors_while_loading_are_not_swallowed() -> None:
    with pytest.raises(RuntimeError, match="not a tensor problem"):
        serialize.loads([pickle.dumps(_Boom())])


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return _raise, ("not a tensor problem",)


def _raise(message: str) -> None:
    raise RuntimeError(message)
