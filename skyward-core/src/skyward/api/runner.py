"""Running computations on an open pool: a task's frames, and each way to run them
(one worker, a stream, a batch, every worker), counted for ``TaskProgress``. Each
task's ``retries`` (its function's ``@compute(retries=...)``) goes with it to the client.

``ComputePool``'s run methods are this module's, behind the pool's checks that it is
open and in its own process; the docstrings users read are on ``ComputePool``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from skyward.api.compute import PendingBatch, PendingCompute
from skyward.api.progress import Progress
from skyward.errors import ConfigurationError
from skyward.transport import serialize
from skyward.transport.client import PoolClient
from skyward.transport.inputs import split_inputs
from skyward.transport.stream import STREAM_WINDOW, RemoteStream

T = TypeVar("T")

Inputs = list[tuple[str, Any]]
"""A task's input streams: (parameter name, the iterable a worker pulls from)."""


class Runner:
    """Sends computations through the pool's client. ``client()`` is the open pool's
    client (it raises when the pool cannot run work); ``broadcast_width()`` is how many
    results ``@`` gathers (every worker of every live node, as the client counts them)."""

    def __init__(
        self, client: Callable[[], PoolClient], progress: Progress, broadcast_width: Callable[[], int]
    ) -> None:
        self._client = client
        self._progress = progress
        self._broadcast_width = broadcast_width
        self._fn_pickles = serialize.FunctionPickles()  # pickled functions reused across calls

    def payload(
        self,
        pending: PendingCompute[Any],
        functions: dict[int, tuple[bytes, bytes]],
        inputs: Inputs | None = None,
    ) -> list[serialize.Frame]:
        """The task's frames. Arguments for parameters annotated ``Iterator[T]`` or
        ``Iterable[T]`` are input streams: they go to ``inputs`` (the worker pulls them
        as it reads them); where ``inputs`` is None (``@``, ``gather``), they are refused."""
        if not isinstance(pending, PendingCompute):
            raise ConfigurationError(
                f"a pool runs computations (the result of calling a @compute function), got {pending!r}"
            )
        key_raw = functions.get(id(pending.fn))
        if key_raw is None:
            key_raw = self._fn_pickles.get(pending.fn)
            functions[id(pending.fn)] = key_raw
        args, kwargs, streams = split_inputs(pending.fn, pending.args, pending.kwargs)
        if streams:
            if inputs is None:
                raise ConfigurationError(
                    f"argument {streams[0][0]!r} of {pending.name} is an input stream (annotated Iterator/Iterable): "
                    "it streams to one worker, so run it with >>, pool.submit or pool.stream, not @, & or gather"
                )
            inputs.extend(streams)
        return [*key_raw, *serialize.dumps_arguments(pending.fn, args, kwargs)]

    def submit(self, pending: PendingCompute[T]) -> Future[T]:
        if isinstance(pending, PendingCompute) and pending.is_stream:
            raise ConfigurationError(
                f"pool.submit({pending.name}(...)): a generator function streams its values; "
                "iterate `computation >> pool` or pool.stream(computation) instead of a Future"
            )
        client = self._client()
        inputs: Inputs = []
        payload = self.payload(pending, {}, inputs)
        future = client.submit_with_inputs(payload, inputs) if inputs else client.submit(payload, pending.retries)
        self._progress.track(future)
        return future

    def abandon(self, futures: Sequence[Future[Any]]) -> None:
        self._client().abandon_futures(futures)

    def run(self, pending: PendingCompute[T]) -> T:
        if pending.is_stream:
            return self.stream(pending)  # type: ignore[arg-type,return-value]
        client = self._client()
        inputs: Inputs = []
        payload = self.payload(pending, {}, inputs)
        self._progress.add(1)
        try:
            if inputs:
                result = client.submit_with_inputs(payload, inputs).result()
            else:
                result = client.run(payload, pending.retries)
        except BaseException:
            self._progress.finished(failed=True)
            raise
        self._progress.finished(failed=False)
        return result  # type: ignore[no-any-return]

    def stream(
        self,
        pending: PendingCompute[Generator[T, Any, Any]] | PendingCompute[Iterator[T]],
        window: int = STREAM_WINDOW,
    ) -> RemoteStream[T]:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigurationError(f"ComputePool.stream(window={window!r}): must be an int >= 1")
        if not isinstance(pending, PendingCompute) or not pending.is_stream:
            raise ConfigurationError(
                f"ComputePool.stream needs a computation of a generator function (def with yield), got {pending!r}"
            )
        client = self._client()
        inputs: Inputs = []
        payload = self.payload(pending, {}, inputs)
        self._progress.add(1)
        return client.stream(
            payload, window=window, on_finish=self._progress.finished, inputs=inputs or None, retries=pending.retries
        )

    def run_batch(self, batch: PendingBatch[Any]) -> tuple[Any, ...]:
        client = self._client()
        functions: dict[int, tuple[bytes, bytes]] = {}
        payloads = [self.payload(p, functions) for p in batch.items]
        self._progress.add(len(payloads))
        kinds: dict[int, bool] = {}  # per function: is_stream inspects its code
        streams = [
            kinds[id(p.fn)] if id(p.fn) in kinds else kinds.setdefault(id(p.fn), p.is_stream) for p in batch.items
        ]
        retries = [p.retries for p in batch.items]
        if not any(streams):
            each = retries if any(r is not None for r in retries) else None
            return client.submit_batch(payloads, on_finish=self._progress.finished, retries=each).wait()
        # generators: an iterator each, in order (they queue like tasks: with more of them
        # than workers, the later ones start as the earlier ones end)
        started: list[RemoteStream[Any] | None] = []
        try:
            for payload, stream, again in zip(payloads, streams, retries, strict=True):
                started.append(
                    client.stream(payload, on_finish=self._progress.finished, retries=again) if stream else None
                )
            plain = [p for p, s in zip(payloads, streams, strict=True) if not s]
            plain_retries = [r for r, s in zip(retries, streams, strict=True) if not s]
            values = iter(client.submit_batch(plain, on_finish=self._progress.finished, retries=plain_retries).wait())
        except BaseException:
            for it in started:
                if it is not None:
                    it.close()
            raise
        return tuple(it if it is not None else next(values) for it in started)

    def broadcast(self, pending: PendingCompute[T]) -> tuple[T, ...]:
        client = self._client()
        payload = self.payload(pending, {})
        expected = self._broadcast_width()
        if pending.is_stream:
            return tuple(client.stream_on_all(payload))  # type: ignore[arg-type]
        self._progress.add(expected)
        try:
            results = client.run_on_all(payload)
        except BaseException:
            for _ in range(expected):
                self._progress.finished(failed=True)
            raise
        for _ in range(expected):
            self._progress.finished(failed=False)
        return tuple(results)
