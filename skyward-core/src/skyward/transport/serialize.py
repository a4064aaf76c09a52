"""cloudpickle with pickle protocol 5: large buffers travel as separate frames.

A payload is a list of frames: the pickle stream first, then every out-of-band buffer
(numpy arrays, bytes-like objects supporting PickleBuffer). Buffers are never joined into
one bytes object, so a 256 MB array is handed to ZeroMQ as it is.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import cloudpickle

from skyward.errors import ConfigurationError

Frame = bytes | memoryview


def dumps(obj: object) -> list[Frame]:
    buffers: list[pickle.PickleBuffer] = []
    head = cloudpickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return [head, *(b.raw() for b in buffers)]


def loads(frames: Sequence[Any]) -> Any:
    """Rebuild an object from frames (bytes, memoryviews or zmq.Frame objects)."""
    views = [f.buffer if hasattr(f, "buffer") else f for f in frames]
    return pickle.loads(views[0], buffers=views[1:])


def dumps_function(fn: object) -> tuple[bytes, bytes]:
    """(cache key, pickled function). Workers keep recently used functions by key, so a
    batch of 10,000 calls of one function unpickles it once per worker."""
    _pickle_user_modules_by_value(fn)
    try:
        raw = cloudpickle.dumps(fn, protocol=5)
    except Exception as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        raise ConfigurationError(f"cannot send {name} to the pool: the function cannot be pickled: {exc}") from exc
    return hashlib.blake2b(raw, digest_size=16).digest(), raw


def dumps_arguments(fn: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Frame]:
    """Serialise a call's arguments, naming the argument that cannot be pickled."""
    try:
        return dumps((args, kwargs))
    except Exception as exc:
        raise _explain_pickling_failure(fn, args, kwargs, exc) from exc


@functools.cache
def _installed_top_level_names() -> frozenset[str]:
    return frozenset(metadata.packages_distributions())


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
    if top in sys.stdlib_module_names or top in _installed_top_level_names():
        return False
    real = os.path.realpath(path)
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return not any(real.startswith(prefix + os.sep) for prefix in prefixes)


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
