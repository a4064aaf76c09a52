"""cloudpickle with pickle protocol 5: large buffers travel as separate frames.

A payload is a list of frames: the pickle stream first, then every out-of-band buffer
(numpy arrays, bytes-like objects supporting PickleBuffer). Buffers are never joined into
one bytes object, so a 256 MB array is handed to ZeroMQ as it is.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import io
import os
import pickle
import sys
import types
import weakref
from collections import ChainMap
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import cloudpickle

from skyward.errors import ConfigurationError, SharedMemoryError, TransferError

# hashlib, csv and importlib.metadata are imported where they are used: only the client
# sends functions (dumps_function and what it calls), while every node's agent imports
# this module before it can answer; there they cost 18 ms of a Local node's start on this
# 2-core machine (python -X importtime).

Frame = bytes | memoryview


def dumps(obj: object) -> list[Frame]:
    buffers: list[pickle.PickleBuffer] = []
    head = cloudpickle.dumps(_lift_bytes(obj, _LIFT_DEPTH), protocol=5, buffer_callback=buffers.append)
    return [head, *(b.raw() for b in buffers)]


def dumps_result(obj: object) -> list[Frame]:
    """A worker's result (or exception), for the client to read. Like ``dumps``, except
    that a dataclass or exception class that came from the user's own code (defined in a
    module this node cannot import: it arrived by value) is named, not sent by value, so
    the client rebuilds it from its own module, and safe mode can allow it by name.

    Plain data (see ``_is_plain``) goes through the C pickler, the same bytes for a
    fraction of the cost: 0.3 us against 2.0 us for an int, once per task on the worker.
    In a gather of 10,000 trivial tasks on 2 Local nodes the node processes' CPU per task
    went from 12.3-12.6 us to 9.9-10.0 us (``bench/gather_cpu.py``, alternating)."""
    if type(obj) in _FLAT_SCALARS or _is_plain(obj, 3):
        return [pickle.dumps(obj, protocol=5)]
    return _dumps_by_cloudpickle(obj)


def _dumps_by_cloudpickle(obj: object) -> list[Frame]:
    buffers: list[pickle.PickleBuffer] = []
    with io.BytesIO() as out:
        _ResultPickler(out, protocol=5, buffer_callback=buffers.append).dump(_lift_bytes(obj, _LIFT_DEPTH))
        head = out.getvalue()
    return [head, *(b.raw() for b in buffers)]


def dumps_value(obj: object) -> list[Frame]:
    """A value a stream yielded: ``dumps_result`` (plain data through the C pickler, as
    arguments do: a stream may send a million of them)."""
    return dumps_result(obj)


class _ResultPickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle ships no types
    def reducer_override(self, obj: object) -> Any:
        if isinstance(obj, type) and _named_user_class(obj):
            return user_class, (obj.__module__, obj.__qualname__)
        return super().reducer_override(obj)


def user_class(module: str, qualname: str) -> type:
    """A class of the user's code named by a worker (see ``dumps_result``), found in the
    client's own module (imported if needed: it is the user's code). A result names this
    function by reference to rebuild such a class; ``safe_pickle`` lets it through and
    checks the class against its policy."""
    if module not in sys.modules:
        __import__(module)
    value: Any = sys.modules[module]
    for part in qualname.split("."):
        value = getattr(value, part)
    if not isinstance(value, type):
        raise TypeError(f"{module}.{qualname} is not a class")
    return value


def _named_user_class(cls: type) -> bool:
    """A dataclass or exception class at module level that this process cannot import by
    name (it was defined by value, from the client's own code)."""
    if "<locals>" in cls.__qualname__ or not (dataclasses.is_dataclass(cls) or issubclass(cls, BaseException)):
        return False
    module = sys.modules.get(cls.__module__)
    found: Any = module
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is not cls


# bytes and bytearray of at least this size travel out of band, as numpy arrays do: the
# same threshold as zero-copy sending (wire.ZERO_COPY_MIN), below which copying is cheaper.
OUT_OF_BAND_MIN = 64 * 1024
_LIFT_DEPTH = 3
_LIFT_MAX_ITEMS = 1024


class _OutOfBandBytes:
    """Pickles a large ``bytes`` or ``bytearray`` as a PickleBuffer, so it leaves as its
    own frame instead of being copied into the pickle stream. Plain pickle writes both
    in band (a 1 GB ``bytes`` took 14 s and 2 GB of extra client memory); the receiver
    rebuilds the same type (one copy there, which ``bytes`` needs to own its memory)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | bytearray) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: object) -> tuple[type, tuple[pickle.PickleBuffer]]:
        return type(self.data), (pickle.PickleBuffer(self.data),)


def _lift_bytes(value: object, depth: int) -> object:
    """``value`` with each large bytes/bytearray (in plain tuples, lists and dicts, up to
    ``depth`` levels and ``_LIFT_MAX_ITEMS`` items each) wrapped to travel out of band.
    Returns ``value`` itself when there is none (no copy of the containers)."""
    kind = type(value)
    if kind is bytes or kind is bytearray:
        data: Any = value
        return _OutOfBandBytes(data) if len(data) >= OUT_OF_BAND_MIN else value
    if depth == 0:
        return value
    if kind is tuple or kind is list:
        items: Any = value
        if len(items) > _LIFT_MAX_ITEMS:
            return value
        lifted = [_lift_bytes(v, depth - 1) for v in items]
        if all(a is b for a, b in zip(lifted, items, strict=True)):
            return value
        return tuple(lifted) if kind is tuple else lifted
    if kind is dict:
        mapping: Any = value
        if len(mapping) > _LIFT_MAX_ITEMS:
            return value
        lifted_map = {k: _lift_bytes(v, depth - 1) for k, v in mapping.items()}
        if all(lifted_map[k] is v for k, v in mapping.items()):
            return value
        return lifted_map
    return value


_UNREADABLE = (SharedMemoryError, TransferError)
"""What ``wire.open_message`` puts in place of a part it could not read: its task fails with it."""


def loads(frames: Sequence[Any]) -> Any:
    """Rebuild an object from frames (bytes, memoryviews or zmq.Frame objects).

    A torch tensor that lived on a worker's GPU, read where torch sees no GPU (the usual
    laptop), makes torch refuse the whole result. It is read again with its storages put
    on the CPU (:func:`load_torch_storage`): retrying on that one error costs the normal
    path nothing, where an unpickler of our own for every message cost 0.6 us more than
    ``pickle.loads`` (1.01 vs 0.42 us for a small result, measured here).
    """
    views = [f.buffer if hasattr(f, "buffer") else f for f in frames]
    if type(views[0]) in _UNREADABLE or (len(views) > 1 and any(type(v) in _UNREADABLE for v in views)):
        raise next(v for v in views if type(v) in _UNREADABLE)  # a segment or transfer that could not be read (wire)
    try:
        return pickle.loads(views[0], buffers=views[1:])
    except RuntimeError as error:
        if CUDA_WITHOUT_GPU not in str(error):
            raise
        return _CpuStorageUnpickler(io.BytesIO(views[0]), buffers=views[1:]).load()


CUDA_WITHOUT_GPU = "Attempting to deserialize object on a CUDA device"
"""The start of torch's error for a CUDA storage read where CUDA is unavailable (stable
since torch 1.x; tests/unit/test_cuda_results.py fails if the installed torch changes it)."""


class _CpuStorageUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "torch.storage" and name == "_load_from_bytes":
            return load_torch_storage
        return super().find_class(module, name)


def load_torch_storage(data: bytes, *, weights_only: bool = False) -> Any:
    """A tensor's storage as torch pickles it (``torch.storage._load_from_bytes``): on its
    own device where this process's torch sees a GPU, on the CPU where it sees none."""
    import torch  # noqa: PLC0415  # heavy and optional: only a result holding a tensor needs it

    location = None if torch.cuda.is_available() else "cpu"
    return torch.load(io.BytesIO(data), weights_only=weights_only, map_location=location)


def dumps_function(fn: object) -> tuple[bytes, bytes]:
    """(cache key, pickled function). Workers keep recently used functions by key, so a
    batch of 10,000 calls of one function unpickles it once per worker."""
    _pickle_user_modules_by_value(fn)
    try:
        raw = _dumps_keeping_filenames(fn)
    except Exception as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        raise ConfigurationError(f"cannot send {name} to the pool: the function cannot be pickled: {exc}") from exc
    import hashlib  # noqa: PLC0415  # the client's alone: see the note at the imports

    return hashlib.blake2b(raw, digest_size=16).digest(), raw


def _code_reduce_keeping_filename(code: types.CodeType) -> tuple[Any, tuple[Any, ...]]:
    """cloudpickle's reduction of a code object, with its real ``co_filename`` put back.

    cloudpickle 3.1.3 writes every function sent by value with the file name
    ``<dynamic-code>`` (for byte-identical pickles across machines), so a remote traceback
    lost the user's file name and, on Local nodes, the source line of every frame
    (``raise CustomError(code)``). The file name costs a few bytes and is stable for a
    given source file, so the pickle of a function is still the same on every call."""
    rebuild, args = cloudpickle.cloudpickle._code_reduce(code)
    return rebuild, tuple(code.co_filename if arg == "<dynamic-code>" else arg for arg in args)


class _FunctionPickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle ships no types
    dispatch_table: ClassVar[ChainMap[Any, Any]] = ChainMap(
        {types.CodeType: _code_reduce_keeping_filename}, cloudpickle.Pickler.dispatch_table
    )


def _dumps_keeping_filenames(fn: object) -> bytes:
    with io.BytesIO() as out:
        _FunctionPickler(out, protocol=5).dump(fn)
        return out.getvalue()


def dumps_arguments(fn: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Frame]:
    """Serialise a call's arguments, naming the argument that cannot be pickled.

    Plain data (numbers, strings, bytes, and small tuples, lists and dicts of them) goes
    through the C pickler: same stream format, about 8x cheaper than building a
    CloudPickler for every call (3.4 us -> 0.4 us for ``((5,), {})``). The common case,
    positional numbers and strings, is recognised without the recursive walk
    (``_flat_scalars``: 0.18 us against 1.9 us for ``((5,), {})``, once per task of a
    gather, on the caller's thread)."""
    if _flat_scalars(args, kwargs) or _is_plain((args, kwargs), 3):
        return [pickle.dumps((args, kwargs), protocol=5)]
    try:
        return dumps((args, kwargs))
    except Exception as exc:
        raise _explain_pickling_failure(fn, args, kwargs, exc) from exc


_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_FLAT_SCALARS = (type(None), bool, int, float, complex, str)  # bytes: its size decides
_PLAIN_MAX_ITEMS = 64


def _flat_scalars(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """True for positional arguments that are all numbers, strings or None (a loop, not
    ``all()`` over a generator: this runs once per task)."""
    if kwargs or len(args) > _PLAIN_MAX_ITEMS:
        return False
    for arg in args:  # noqa: SIM110  (all() over a generator: 0.39 us, this loop 0.18 us)
        if type(arg) not in _FLAT_SCALARS:
            return False
    return True


def _is_plain(value: object, depth: int) -> bool:
    """True for values plain pickle serialises exactly as cloudpickle would: no code, no
    classes, no out-of-band buffers (bytearray, numpy and large bytes stay on the
    cloudpickle path)."""
    kind = type(value)
    if kind in _SCALARS:
        return kind is not bytes or len(value) < OUT_OF_BAND_MIN  # type: ignore[arg-type]
    if depth == 0:
        return False
    if kind is tuple or kind is list:
        items: Any = value
        return len(items) <= _PLAIN_MAX_ITEMS and all(_is_plain(v, depth - 1) for v in items)
    if kind is dict:
        mapping: Any = value
        return len(mapping) <= _PLAIN_MAX_ITEMS and all(
            type(k) in _SCALARS and _is_plain(v, depth - 1) for k, v in mapping.items()
        )
    return False


class FunctionPickles:
    """``dumps_function`` results kept across calls, so ``fn(x) >> pool`` in a loop does
    not pickle ``fn`` by value every time (25-50 us of a ~250 us round trip).

    A cached pickle is reused only while it would come out the same: the function's code,
    defaults and closure are the same objects, and every global it (or a function it
    calls) refers to is the same object and of a kind whose pickled form cannot change in
    place (modules, classes, functions, numbers, strings, tuples of those...). A function
    that reads a mutable global (a list, a dict, an array) is pickled on every call, as
    before, so a change to that global always reaches the workers."""

    def __init__(self) -> None:
        self._cache: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], tuple[bytes, bytes]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, fn: object) -> tuple[bytes, bytes]:
        fingerprint = _fingerprint(fn, 4, set())
        if fingerprint is not None:
            try:
                known = self._cache.get(fn)
            except TypeError:  # not weak-referenceable
                known = None
            if known is not None and known[0] == fingerprint:
                return known[1]
        key_raw = dumps_function(fn)
        if fingerprint is not None:
            try:
                self._cache[fn] = (fingerprint, key_raw)
            except TypeError:
                pass
        return key_raw


_STABLE = (type(None), bool, int, float, complex, str, bytes, frozenset, range, types.ModuleType, type,
           types.BuiltinFunctionType)  # fmt: skip


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _stable(value: object, depth: int, seen: set[int]) -> Any:
    """A fingerprint part for a value a function refers to, or None when its pickle could
    change without the value being replaced (mutable containers, instances)."""
    if isinstance(value, float | complex):
        return ("num", type(value), repr(value))  # repr tells -0.0 from 0.0, which == does not
    if isinstance(value, _STABLE):
        # The object itself, not its id(): the cache entry keeps it alive, so a rebound
        # global can never match by reusing a freed object's address; == on these types
        # is identity (modules, classes) or exact value (numbers, strings).
        return ("obj", type(value), value)
    if type(value) is tuple:
        parts = [_stable(v, depth, seen) for v in value]
        return None if any(p is None for p in parts) else ("tuple", *parts)
    if isinstance(value, types.FunctionType):
        inner = _fingerprint(value, depth - 1, seen)
        return None if inner is None else ("fn", value, inner)
    return None


def _fingerprint(fn: object, depth: int, seen: set[int]) -> tuple[Any, ...] | None:
    target = getattr(fn, "__wrapped__", fn)
    if not isinstance(target, types.FunctionType) or depth <= 0:
        return None
    if id(target) in seen:
        return ("recursive", id(target))
    seen.add(id(target))
    parts: list[Any] = [target.__code__]
    for value in (*(target.__defaults__ or ()), *(target.__kwdefaults__ or {}).values()):
        part = _stable(value, depth, seen)
        if part is None:
            return None
        parts.append(part)
    for cell in target.__closure__ or ():
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            parts.append("empty")
            continue
        part = _stable(content, depth, seen)
        if part is None:
            return None
        parts.append(part)
    builtins_ns = target.__globals__.get("__builtins__")
    for name in sorted(_code_names(target.__code__)):
        if name in target.__globals__:
            part = _stable(target.__globals__[name], depth, seen)
            if part is None:
                return None
            parts.append((name, part))
        elif builtins_ns is None:
            return None
    if target.__dict__:
        return None  # attributes set on the function travel with it and may change
    return tuple(parts)


@functools.cache
def _plugin_top_level_names() -> frozenset[str]:
    """skyward and its plugins, which every node installs (``client_requirements``): an
    editable install's RECORD lists a .pth file, not the package, so no distribution
    seems to provide them, and they would look like the user's own code and be pickled
    by value, module globals (locks) and all."""
    from importlib import metadata  # noqa: PLC0415  # the client's alone: see the note at the imports

    names = {"skyward"}
    for entry_point in metadata.entry_points(group="skyward"):
        names.add(entry_point.value.split(":", 1)[0].split(".", 1)[0])
    return frozenset(names)


def _installed_top_level(top: str) -> bool:
    """Whether nodes can import the top-level package ``top`` by name: skyward or a
    plugin, or what an installed distribution provides."""
    return top in _plugin_top_level_names() or provided_by_a_distribution(top)


@functools.cache
def provided_by_a_distribution(top: str) -> bool:
    """``top in importlib.metadata.packages_distributions()``, for one name: each
    distribution's ``top_level.txt``, else the top-level names of the files its RECORD
    lists, read as text. ``packages_distributions`` makes a path object of every file of
    every distribution (29,339 here: 0.5 s, the largest part of a first pool's first call
    when the function's module is outside the interpreter's prefix, as a project's is)."""
    from importlib import metadata  # noqa: PLC0415  # the client's alone: see the note at the imports

    for dist in metadata.distributions():
        declared = (dist.read_text("top_level.txt") or "").split()
        if declared:
            if top in declared:
                return True
            continue
        record = dist.read_text("RECORD")
        if record is None:  # an egg-info's file list: the library's own reading (rare)
            files: Iterable[str] = (str(path) for path in dist.files or ())
        else:
            files = (_record_path(line) for line in record.splitlines() if line)
        if any(_top_level_name(name) == top for name in files):
            return True
    return False


def _record_path(line: str) -> str:
    """The path of one RECORD line (CSV: a path with a comma is quoted)."""
    if '"' in line:
        import csv  # noqa: PLC0415  # the client's alone: see the note at the imports

        return next(csv.reader([line]))[0]
    return line.split(",", 1)[0]


def _top_level_name(name: str) -> str:
    """The top-level name a distribution's file gives (``importlib.metadata``'s rule: its
    first directory, else its module name, else itself). Most RECORD paths are plain
    ``pkg/module.py``; anything else goes through the path object the library makes."""
    plain = name[:1] not in ("/", ".", "") and not name.endswith(("/", "/.")) and "//" not in name
    if plain and "/./" not in name:
        head, _, rest = name.partition("/")
        if rest:
            return head
    else:
        import pathlib  # noqa: PLC0415  # rare (see above), and pathlib costs a worker ~5 ms of its start

        parts = pathlib.PurePosixPath(name).parts
        if len(parts) > 1:
            return parts[0]
    return inspect.getmodulename(name) or name


def is_user_module(name: str) -> bool:
    """Public alias of the rule below, for plugins that pickle nested user code
    themselves (skyward-sklearn pickles joblib batches)."""
    return _is_user_module(name)


@functools.cache
def _is_user_module(name: str) -> bool:
    """True for the user's own code (a script's module, a project package that is not
    an installed distribution): it is not importable on a node, so it travels by value."""
    if name == "__main__":
        return False  # cloudpickle already sends __main__ by value
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if module is None or path is None:
        return False
    top = name.split(".", 1)[0]
    if top in sys.stdlib_module_names:
        return False
    real = os.path.realpath(path)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if any(real.startswith(prefix + os.sep) for prefix in prefixes):
        return False
    # asked last: the first answer reads every installed distribution's file list (0.5 s
    # in this repository's environment, the largest part of a first pool's first call)
    return not _installed_top_level(top)


def _pickle_user_modules_by_value(fn: object) -> None:
    module_name = getattr(fn, "__module__", None)
    if isinstance(module_name, str) and _is_user_module(module_name):
        try:
            cloudpickle.register_pickle_by_value(sys.modules[module_name])
        except ValueError:
            pass


def _explain_pickling_failure(
    fn: object, args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception
) -> ConfigurationError:
    name = getattr(fn, "__qualname__", repr(fn))
    candidates: list[tuple[str, object]] = [("the function itself", fn)]
    candidates += [(f"positional argument {i}", a) for i, a in enumerate(args)]
    candidates += [(f"keyword argument {k!r}", v) for k, v in kwargs.items()]
    for label, value in candidates:
        try:
            cloudpickle.dumps(value, protocol=5, buffer_callback=lambda _b: None)
        except Exception as inner:
            return ConfigurationError(
                f"cannot send {name}(...) to the pool: {label} ({type(value).__name__}) cannot be pickled: {inner}"
            )
    return ConfigurationError(f"cannot send {name}(...) to the pool: {exc}")
