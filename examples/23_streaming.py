"""A generator function streams: ``gen() >> pool`` yields each value as the worker
yields it, a bounded window ahead of the loop. Breaking out of the loop stops the
generator on the worker (its ``finally`` runs there) and frees the worker. The other way,
an argument annotated ``Iterator[T]`` is pulled by the worker as it reads it.

Run it with:  .venv/bin/python examples/23_streaming.py
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from _provider import provider

import skyward as sky


@sky.compute
def train(epochs: int) -> Iterator[tuple[int, float]]:
    loss = 1.0
    try:
        for epoch in range(epochs):
            time.sleep(0.05)  # an epoch's work
            loss *= 0.6
            yield epoch, loss
    finally:
        print("training loop closed on the worker", flush=True)


@sky.compute
def squares(n: int) -> Iterator[int]:
    for i in range(n):
        yield i * i


@sky.compute
def checksums(chunks: Iterator[bytes]) -> Iterator[int]:
    for chunk in chunks:  # each chunk comes from the client as this loop asks for it
        yield sum(chunk[::4096])


def main() -> None:
    with sky.ComputePool(provider=provider()) as pool:
        started = time.monotonic()
        for epoch, loss in train(1000) >> pool:
            print(f"epoch {epoch}: loss {loss:.4f} after {time.monotonic() - started:.2f} s")
            if loss < 0.05:
                break  # early stopping: the worker's loop ends here too
        total = sum(squares(100_000) >> pool)  # 100,000 values, never all held at once
        print(f"sum of squares: {total}")
        assert total == sum(i * i for i in range(100_000))
        chunks = (bytes([i % 256]) * 1_000_000 for i in range(300))  # 300 MB, never all in memory
        sums = list(checksums(chunks) >> pool)
        print(f"{len(sums)} chunks checked on the worker")
        assert sums == [(i % 256) * 245 for i in range(300)]


if __name__ == "__main__":
    main()
