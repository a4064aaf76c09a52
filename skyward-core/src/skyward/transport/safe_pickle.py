"""Safe mode: results read with an allow-list unpickler.

The client unpickles what nodes send back, and unpickling can run any code a pickle
names. A node on a host the user does not control (a marketplace cloud) can be taken
over by that host, and would then run code on the user's machine, which holds their
cloud credentials. In safe mode a result may only name:

- plain data types and exceptions of ``builtins``, and ``collections``, ``datetime``,
  ``decimal``, ``fractions``, ``uuid`` value types;
- numpy arrays, scalars and dtypes; torch tensors, parameters, sizes, dtypes and devices
  (a tensor's storage is read with ``torch.load(weights_only=True)``, torch's own
  allow-list, never its full unpickler);
- dataclasses and exceptions defined in the user's own modules (see
  ``serialize.is_user_module``), looked up in modules this process already imported;
- skyward's own errors;
- whatever the user allowed: ``ComputePool(safe_results=True, allow_results=["pkg.mod.Type",
  "pkg.othermod.*"])``.

Anything else is refused before it is called: the task fails with
``UnreadableResultError`` naming the type and how to allow it. A refused name is never
imported.
"""

from __future__ import annotations

import builtins
import dataclasses
import io
import pickle
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from skyward.errors import ConfigurationError
from skyward.transport.serialize import is_user_module, load_torch_storage

_BUILTIN_TYPES = frozenset(
    {"int", "float", "complex", "str", "bytes", "bytearray", "list", "tuple", "dict", "set", "frozenset",
     "bool", "slice", "range", "object"}
)  # fmt: skip
_STDLIB = frozenset(
    {
        "collections.OrderedDict", "collections.deque", "collections.Counter", "collections.defaultdict",
        "datetime.date", "datetime.time", "datetime.datetime", "datetime.timedelta", "datetime.timezone",
        "decimal.Decimal", "fractions.Fraction", "uuid.UUID", "copyreg._reconstructor",
    }
)  # fmt: skip
_NUMPY = frozenset(
    {
        "numpy.dtype", "numpy.ndarray",
        "numpy._core.numeric._frombuffer", "numpy.core.numeric._frombuffer",
        "numpy._core.multiarray._reconstruct", "numpy.core.multiarray._reconstruct",
        "numpy._core.multiarray.scalar", "numpy.core.multiarray.scalar",
    }
)  # fmt: skip
_TORCH = frozenset({"torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter", "torch.Size", "torch.device"})
_TORCH_DTYPE_NAMES = frozenset(
    {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
     "complex64", "complex128"}
)  # fmt: skip


@dataclass(frozen=True)
class ResultPolicy:
    """Which names a result may use. ``extra`` holds "module.Name" and "module.*" entries."""

    extra: frozenset[str] = frozenset()

    @staticmethod
    def build(allow: Iterable[object]) -> ResultPolicy:
        """From ``ComputePool(allow_results=...)``: names ("pkg.mod.Type", "pkg.mod.*") or classes."""
        if isinstance(allow, str | bytes) or not isinstance(allow, Iterable):
            raise ConfigurationError(
                f"ComputePool(allow_results={allow!r}): must be a list of classes or names such as "
                "'package.module.Type' or 'package.module.*'"
            )
        names: set[str] = set()
        for item in allow:
            if isinstance(item, type):
                names.add(f"{item.__module__}.{item.__qualname__}")
            elif isinstance(item, str) and item and all(part.isidentifier() for part in item.split(".")[:-1]) and (
                item.split(".")[-1].isidentifier() or item.endswith(".*")
            ) and "." in item:  # fmt: skip
                names.add(item)
            else:
                raise ConfigurationError(
                    f"ComputePool(allow_results=[..., {item!r}, ...]): each entry must be a class or a name "
                    "such as 'package.module.Type' or 'package.module.*'"
                )
        return ResultPolicy(frozenset(names))

    def allows(self, module: str, name: str) -> bool:
        full = f"{module}.{name}"
        if full in self.extra or f"{module}.*" in self.extra:
            return True
        return any(module.startswith(entry[:-1]) for entry in self.extra if entry.endswith(".*"))


class RefusedType(pickle.UnpicklingError):
    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name
        super().__init__(
            f"safe mode refused {module}.{name}: a result may hold plain data, numpy arrays, torch tensors "
            f"and dataclasses of your own modules; if you trust it, allow it with "
            f"ComputePool(allow_results=['{module}.{name}']) (or safe_results=False to trust every node)"
        )


class _SafeUnpickler(pickle.Unpickler):
    def __init__(self, stream: Any, buffers: Sequence[Any], policy: ResultPolicy) -> None:
        super().__init__(stream, buffers=buffers)
        self._policy = policy

    def find_class(self, module: str, name: str) -> Any:
        found = _resolve(module, name, self._policy)
        if found is None:
            raise RefusedType(module, name)
        return found


def _resolve(module: str, name: str, policy: ResultPolicy) -> Any:
    full = f"{module}.{name}"
    if module == "builtins":
        value = getattr(builtins, name, None)
        if name in _BUILTIN_TYPES or (isinstance(value, type) and issubclass(value, BaseException)):
            return value
        return None
    if full in _STDLIB or full in _NUMPY or full in _TORCH or (module == "torch" and name in _TORCH_DTYPE_NAMES):
        return _attribute(module, name)
    if full == "torch.storage._load_from_bytes":
        return _torch_storage_weights_only
    if full == "skyward.transport.serialize.user_class":
        return lambda module, qualname: _user_class(module, qualname, policy)
    if module == "skyward.errors" or policy.allows(module, name):
        return _attribute(module, name)
    return _user_type(module, name)


def _user_type(module: str, name: str) -> Any:
    """A dataclass or exception class of the user's own code, in a module already imported."""
    if module not in sys.modules or not (is_user_module(module) or module == "__main__"):
        return None
    try:
        value = _attribute(module, name)
    except AttributeError:
        return None
    if isinstance(value, type) and (dataclasses.is_dataclass(value) or issubclass(value, BaseException)):
        return value
    return None


def _user_class(module: str, qualname: str, policy: ResultPolicy) -> Any:
    found = _user_type(module, qualname) or (_attribute(module, qualname) if policy.allows(module, qualname) else None)
    if found is None:
        raise RefusedType(module, qualname)
    return found


def _attribute(module: str, name: str) -> Any:
    if module not in sys.modules:
        __import__(module)  # only for names allowed above
    value: Any = sys.modules[module]
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _torch_storage_weights_only(data: bytes) -> Any:
    """A tensor's storage, read with torch's own allow-list unpickler (on the CPU where
    this process sees no GPU)."""
    return load_torch_storage(data, weights_only=True)


def safe_loads(policy: ResultPolicy) -> Callable[[Sequence[Any]], Any]:
    """A ``loads`` for ``ResultDecoder`` that only rebuilds what ``policy`` allows."""

    def loads(frames: Sequence[Any]) -> Any:
        views = [f.buffer if hasattr(f, "buffer") else f for f in frames]
        return _SafeUnpickler(io.BytesIO(views[0]), views[1:], policy).load()

    return loads
