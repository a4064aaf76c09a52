"""One decoder for what a worker sends back, used by every path (``>>``, ``@``,
``gather``, ``submit``), so a result reads the same, and fails the same, on all of them.

- A result that cannot be unpickled here (its module is not installed on this machine,
  or safe mode refused its type) is an ``UnreadableResultError`` naming the node and why.
- A remote exception is re-raised as its own type with the remote traceback as
  ``__cause__``; one that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``)
  arrives wrapped in ``RemoteExitError``: a ``sys.exit()`` in a task never ends the
  caller's program.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Callable, Sequence
from typing import Any

from skyward.errors import RemoteError, RemoteExitError, UnreadableResultError
from skyward.transport import serialize, wire

Loads = Callable[[Sequence[Any]], Any]


class RemoteTraceback(Exception):
    """Carries the remote traceback text as the ``__cause__`` of a re-raised exception."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return "\n\n" + self.tb


class ResultDecoder:
    """Turns (status, frames) from a worker into a value, or the exception to raise."""

    def __init__(self, loads: Loads | None = None) -> None:
        self._safe = loads  # None: plain unpickling, ``serialize.loads`` looked up per call

    def _loads(self, frames: Sequence[Any]) -> Any:
        return serialize.loads(frames) if self._safe is None else self._safe(frames)

    def value(self, status: wire.Status, frames: Sequence[Any], node: int) -> Any:
        """The task's result; raises what the task raised (see the module docstring)."""
        if status == wire.Status.OK:
            try:
                # inline, not through _loads: once per result of a gather
                return serialize.loads(frames) if self._safe is None else self._safe(frames)
            except Exception as error:
                raise unreadable(node, "result", error) from error
        raise self.exception(frames, node)

    def exception(self, frames: Sequence[Any], node: int) -> BaseException:
        try:
            exc, tb = self._loads(frames)
        except Exception as error:
            return unreadable(node, "exception", error)
        if isinstance(tb, str):
            tb = with_source_lines(tb, linecache.getline)
        cause = RemoteTraceback(f"Traceback from node {node}:\n{tb}")
        if not isinstance(exc, BaseException):
            return RemoteError(f"a task on node {node} failed with a non-exception {exc!r}")
        if not isinstance(exc, Exception):
            wrapped = RemoteExitError(
                f"a task on node {node} raised {type(exc).__name__}({', '.join(map(repr, exc.args))}); "
                "it ended the task, not this program",
                exc,
            )
            wrapped.__cause__ = cause
            return wrapped
        exc.__cause__ = cause
        return exc


_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+)')


def with_source_lines(tb: str, getline: Callable[[str, int], str]) -> str:
    """``tb`` with the source line put under each frame that lacks one, read here with
    ``getline`` (``linecache.getline``). A function defined in a notebook cell or a
    script's ``__main__`` travels by value: its file does not exist on the worker, whose
    traceback then shows no line, while this process holds the cell's source (IPython
    keeps every cell in ``linecache``)."""
    lines = tb.splitlines(keepends=True)
    out: list[str] = []
    for index, line in enumerate(lines):
        out.append(line)
        frame = _FRAME.match(line)
        if frame is None:
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if following.startswith("    "):
            continue  # the worker found the line itself
        source = getline(frame.group("file"), int(frame.group("line"))).strip()
        if source:
            out.append(f"    {source}\n")
    return "".join(out)


def unreadable(node: int, what: str, error: BaseException) -> UnreadableResultError:
    if isinstance(error, ModuleNotFoundError):
        hint = (
            f"module {error.name!r} is not installed on this machine; install it here, "
            "or return types this machine can import"
        )
    else:
        hint = f"{type(error).__name__}: {error}"
    result = UnreadableResultError(f"cannot read the {what} of a task from node {node}: {hint}")
    result.__cause__ = error
    return result
